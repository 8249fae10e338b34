package reconstruction

import (
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// Demand is what a scenario asks of the node it runs on, for a runner
// that runs many scenarios on the nodes of one cluster (skewrun's batch):
// how long it will hold the node, and whether the node can be trusted with
// another scenario after it.
type Demand struct {
	// Hold estimates how long the scenario holds its node: a nominal time
	// per hop, and what it waits on purpose (the bounded waits for a
	// cleanup a known bug never makes, an outage, a preStop's grace). The
	// batch starts the longest first.
	Hold time.Duration
	// MayLeave: a known bug the catalogue expects on one of the plan's
	// kubelets may leave old pods' state on the node once the workload is
	// gone (a leaked global mount, a pod dir the orphan sweep cannot
	// remove), so the node may not be clean for another scenario.
	MayLeave bool
}

// nominalHop is a hop on a quiet local node when nothing waits on purpose
// (stop, swap, start, cleanup, checks), about 10 s measured: it orders the
// scenarios that make no bounded wait by their number of hops.
const nominalHop = 10 * time.Second

// DemandOf is the demand of a scenario of plan p with fault f (nil for
// none) or shapes.
func DemandOf(p plan.Plan, f *Fault, shapes []Shape) Demand {
	d := Demand{}
	for _, h := range p.Hops() {
		d.Hold += nominalHop
		if f != nil {
			d.Hold += f.Holds
			if f.MayLeave && expectsBug(f.Entry, h.To, h.ToGates) {
				d.Hold += mayLeaveBound
				d.MayLeave = true
			}
			continue
		}
		for _, sh := range shapes {
			if expectsBug(sh.Entry, h.To, h.ToGates) {
				d.Hold += mayLeaveBound
				d.MayLeave = true
				break
			}
		}
	}
	if d.MayLeave {
		// The workload's deletion waits as long again (deleteWorkload).
		d.Hold += mayLeaveBound
	}
	return d
}

// expectsBug tells whether the catalogue expects entry e's known bug on
// kubelet v run with gates.
func expectsBug(e catalogue.Entry, v *version.Version, gates map[string]bool) bool {
	x, ok := e.ExpectationForKubelet(v, gates)
	return ok && x.Outcome == catalogue.KnownBug
}
