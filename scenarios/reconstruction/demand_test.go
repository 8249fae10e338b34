package reconstruction

import (
	"testing"
	"time"

	"sigs.k8s.io/skewtest/scenarios/plan"
)

func TestDemandOf(t *testing.T) {
	mustParse := func(s string) plan.Plan {
		p, err := plan.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	signoff := mustParse("v1.37.2,v1.36.3,v1.37.2")
	fault := func(name string) *Fault {
		f, err := LookupFault(name)
		if err != nil {
			t.Fatal(err)
		}
		return &f
	}
	shapes := Shapes()
	for _, tc := range []struct {
		name   string
		p      plan.Plan
		f      *Fault
		shapes []Shape
		want   Demand
	}{
		{"baseline", signoff, nil, nil, Demand{Hold: 2 * nominalHop}},
		{"restart-no-delete", signoff, fault("restart-no-delete"), nil, Demand{Hold: 2 * nominalHop}},
		// A known leak on both kubelets: bounded per hop and at deletion.
		{"vol-data-deleted", signoff, fault("vol-data-deleted"), nil, Demand{Hold: 2*nominalHop + 3*mayLeaveBound, MayLeave: true}},
		{"apiserver-unreachable", signoff, fault("apiserver-unreachable"), nil, Demand{Hold: 2 * (nominalHop + apiserverOutage)}},
		{"prestop-emptydir", signoff, fault("prestop-emptydir"), nil, Demand{Hold: 2 * (nominalHop + preStopGrace)}},
		// Fixed in 1.30: clean on these kubelets, though the fault may leave.
		{"reboot-file-subpath on 1.37", signoff, fault("reboot-file-subpath"), nil, Demand{Hold: 2 * nominalHop}},
		{"reboot-file-subpath on 1.28.5", mustParse("v1.28.15,v1.28.5"), fault("reboot-file-subpath"), nil, Demand{Hold: nominalHop + 2*mayLeaveBound, MayLeave: true}},
		{"subpath shape", signoff, nil, []Shape{shapes[ShapeBlock], shapes[ShapeSubpath]}, Demand{Hold: 2*nominalHop + 3*mayLeaveBound, MayLeave: true}},
		{"block shape", signoff, nil, []Shape{shapes[ShapeBlock]}, Demand{Hold: 2 * nominalHop}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DemandOf(tc.p, tc.f, tc.shapes); got != tc.want {
				t.Errorf("DemandOf = %+v (hold %s), want %+v (hold %s)", got, got.Hold, tc.want, tc.want.Hold)
			}
		})
	}
	if DemandOf(signoff, fault("vol-data-deleted"), nil).Hold <= DemandOf(signoff, fault("apiserver-unreachable"), nil).Hold-time.Second {
		t.Errorf("a fault with three bounded waits should hold its node longer than one with two outages")
	}
}
