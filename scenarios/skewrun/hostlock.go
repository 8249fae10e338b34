package skewrun

import (
	"fmt"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/hostlock"
)

// lockHost refuses a run at once, naming the one already running, while
// another run makes a cluster on this host: two would share pod subnets,
// iptables chains, the kubelet's device-plugin socket and the kernel
// settings each records and restores. An existing cluster's runs make
// nothing on this host and take no lock. The lock goes with the run (its
// Release), or with the process if that is killed.
func lockHost(v *Validated) (*hostlock.Lock, error) {
	if v.Options.Provider == clusters.Existing {
		return nil, nil
	}
	l, err := hostlock.TryAcquire(hostlock.Path, hostlock.Holder{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return l, nil
}
