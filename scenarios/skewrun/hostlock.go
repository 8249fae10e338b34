package skewrun

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// lockHost refuses a run, naming the one already running, before it makes
// anything, while another run has a cluster on this host. It is taken once
// the kubelets are resolved (seconds from the cache): a run that builds
// them first, or fails resolving them, disturbs nobody. Two runs at once
// would share pod subnets, iptables chains, the kubelet's device-plugin
// socket and the kernel settings each records and restores. The runs of a
// provider that makes nothing on this host (Descriptor.CleansHost false:
// existing) take no lock. Holding it, a run also refuses to start beside
// what earlier runs left on this host (clusters.LeftOnHost): nothing else
// would tell it that a kept or killed cluster shares its subnet and
// sockets. The lock goes with the run (its Release), or with the process
// if that is killed.
func lockHost(v *validated, runID string) (*hostlock.Lock, error) {
	if d, err := clusters.Lookup(v.Options.Provider); err == nil && !d.CleansHost {
		return nil, nil
	}
	l, err := hostlock.TryAcquire(hostlock.Path(), hostlock.Holder{RunID: runID})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", exitcode.ErrInvalid, err)
	}
	roots := clusters.RunRoots()
	if r := v.Options.RunRoot; r != "" && !slices.Contains(roots, r) {
		roots = append(roots, r)
	}
	if left := clusters.LeftOnHost(roots...); len(left) > 0 {
		l.Release()
		return nil, fmt.Errorf("%w: this host still holds what %d earlier runs left (a cluster kept after a failure, or a harness that was killed): %s\n"+
			"a run beside them would share their pod subnet, the kubelet's device-plugin socket and the kernel settings they restore;\n"+
			"remove them first: skewtest clean %s (or skewtest clean, for every run dir)",
			exitcode.ErrInvalid, len(left), strings.Join(left, ", "), strings.Join(left, " "))
	}
	return l, nil
}
