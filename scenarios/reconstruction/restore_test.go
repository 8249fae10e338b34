package reconstruction

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// A hop after one whose kubelet the catalogue expects to have a lasting
// bug restores the pods first, before it stops its kubelet; no other hop
// does, so a plan with the buggy kubelet last runs the steps it ran.
func TestRestoreBeforeTheHopAfterALastingBug(t *testing.T) {
	faults := Faults()
	pvc, kill, reboot := faults["pvc-terminating"], faults["restart-kill-container"], faults["reboot"]
	const gateOff = "+SELinuxMountReadWriteOncePod=false"
	for _, tc := range []struct {
		fault *Fault
		plan  string
		// restored are the hops that restore first.
		restored []int
	}{
		{&pvc, "v1.34.4,v1.31.0,v1.34.4", []int{2}},
		{&pvc, "v1.35.4,v1.32.2,v1.35.4", []int{2}},
		{&pvc, "v1.34.4,v1.31.0,v1.34.4,v1.31.0", []int{2}},
		{&pvc, "v1.32.2,v1.32.13,v1.32.2", nil},
		{&pvc, "v1.28.15,v1.26.15", nil},
		{&pvc, "v1.37.2,v1.36.3,v1.37.2", nil},
		{&kill, "v1.28.15" + gateOff + ",v1.28.5" + gateOff + ",v1.28.15" + gateOff, []int{2}},
		{&kill, "v1.28.5" + gateOff + ",v1.28.15" + gateOff + ",v1.28.5" + gateOff, nil},
		// The reboot's plant starts from whatever pods there are: its
		// stuck pods are force-deleted like any.
		{&reboot, "v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.15", nil},
		{nil, "v1.34.4,v1.31.0,v1.34.4", nil},
	} {
		p, err := plan.Parse(tc.plan)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for i := range p.Hops() {
			if (&Scenario{cfg: Config{Plan: p, Fault: tc.fault}}).restoresBefore(i) {
				got = append(got, i+1)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.restored) {
			t.Errorf("plan %s: hops that restore first %v, want %v", tc.plan, got, tc.restored)
		}
		if p.HasGates() {
			continue // the fake node cannot set gates: the steps are not made
		}
		s, err := New(Config{Plan: p, Kubelets: make([]binaries.Binary, len(p.Versions)), Fault: tc.fault}, fakeCluster{}, fakeNode{}, &reports.Run{})
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		steps := s.Steps()
		for i, st := range steps {
			if !strings.Contains(st.Name, ": restore the pods fault") {
				continue
			}
			got = append(got, st.Hop)
			if next := steps[i+1]; next.Hop != st.Hop || !strings.HasSuffix(next.Name, ": stop kubelet") {
				t.Errorf("plan %s: the restore of hop %d is followed by %q, want the hop's kubelet stop", tc.plan, st.Hop, next.Name)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.restored) {
			t.Errorf("plan %s: hops whose steps restore first %v, want %v", tc.plan, got, tc.restored)
		}
	}
}

// A hop not reached leaves every later hop of the plan unreached, each
// numbered in the run and saying why.
func TestLeaveUnreached(t *testing.T) {
	p, err := plan.Parse("v1.34.4,v1.31.0,v1.34.4+SELinuxMountReadWriteOncePod=false,v1.31.0")
	if err != nil {
		t.Fatal(err)
	}
	run := &reports.Run{}
	s := &Scenario{cfg: Config{Plan: p, FirstHop: 1}, run: run}
	s.leaveUnreached(2, "the pods could not be re-created")
	want := []reports.UnreachedHop{
		{Number: 2, From: "v1.31.0", To: "v1.34.4+SELinuxMountReadWriteOncePod=false", Reason: "the pods could not be re-created"},
		{Number: 3, From: "v1.34.4+SELinuxMountReadWriteOncePod=false", To: "v1.31.0", Reason: "hop 2 before it was not reached"},
	}
	if len(run.Unreached) != len(want) {
		t.Fatalf("unreached %+v, want %+v", run.Unreached, want)
	}
	for i := range want {
		if run.Unreached[i] != want[i] {
			t.Errorf("unreached[%d] = %+v, want %+v", i, run.Unreached[i], want[i])
		}
	}
}
