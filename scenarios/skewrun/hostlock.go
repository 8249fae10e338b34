package skewrun

import (
	"fmt"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/hostlock"
)

// lockHost refuses a run, naming the one already running, before it makes
// anything, while another run has a cluster on this host. It is taken once
// the kubelets are resolved (seconds from the cache): a run that builds
// them first, or fails resolving them, disturbs nobody. Two runs at once
// would share pod subnets, iptables chains, the kubelet's device-plugin
// socket and the kernel settings each records and restores. The runs of a
// provider that makes nothing on this host (Descriptor.CleansHost false:
// existing) take no lock. The lock goes with the run (its Release), or
// with the process if that is killed.
func lockHost(v *Validated, runID string) (*hostlock.Lock, error) {
	if d, err := clusters.Lookup(v.Options.Provider); err == nil && !d.CleansHost {
		return nil, nil
	}
	l, err := hostlock.TryAcquire(hostlock.Path(), hostlock.Holder{RunID: runID})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return l, nil
}
