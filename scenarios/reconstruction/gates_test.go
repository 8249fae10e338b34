package reconstruction

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// gatedNode is a node that takes feature gates and shows a kubelet log.
type gatedNode struct {
	fakeNode
	gates []map[string]bool // each SetKubeletFeatureGates call
	log   string
	reads int
}

func (n *gatedNode) SetKubeletFeatureGates(_ context.Context, g map[string]bool) error {
	n.gates = append(n.gates, g)
	return nil
}

func (n *gatedNode) KubeletLog(context.Context) (string, error) {
	n.reads++
	return n.log, nil
}

const signoffGated = "v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.15"

func mustPlan(t *testing.T, s string) plan.Plan {
	t.Helper()
	p, err := plan.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs steps on node into a fresh run record, as the scenario runner
// would, and returns the record and the first error.
func run(t *testing.T, node *gatedNode, steps ...scenarios.Step) (*reports.Run, error) {
	t.Helper()
	r := &reports.Run{}
	err := (&scenarios.Runner{Run: r, Node: node, ArtifactsDir: t.TempDir()}).Execute(context.Background(), steps)
	return r, err
}

// A plan with gates needs a node that can give them; one without gates
// runs anywhere.
func TestNewRefusesGatesWithoutTheCapability(t *testing.T) {
	gated := mustPlan(t, signoffGated)
	_, err := New(Config{Plan: gated, Kubelets: make([]binaries.Binary, 3)}, fakeCluster{}, fakeNode{}, &reports.Run{})
	if err == nil || !strings.Contains(err.Error(), "node node-1 cannot put feature gates into its kubelet's configuration") || !strings.Contains(err.Error(), "a PROVIDER whose nodes can") {
		t.Errorf("gated plan on a node without the capability: %v", err)
	}
	if _, err := New(Config{Plan: gated, Kubelets: make([]binaries.Binary, 3)}, fakeCluster{}, &gatedNode{}, &reports.Run{}); err != nil {
		t.Errorf("gated plan on a node with it: %v", err)
	}
	if _, err := New(Config{Plan: mustPlan(t, "v1.28.15,v1.27.16,v1.28.15"), Kubelets: make([]binaries.Binary, 3)}, fakeCluster{}, fakeNode{}, &reports.Run{}); err != nil {
		t.Errorf("plan without gates: %v", err)
	}
}

// The steps name each entry with its gates, and a first entry with gates
// restarts the provider's kubelet with them before anything is deployed.
func TestGatedSteps(t *testing.T) {
	s, err := New(Config{Plan: mustPlan(t, "v1.27.16+NewVolumeManagerReconstruction=true,"+signoffGated), Kubelets: make([]binaries.Binary, 4)}, fakeCluster{}, &gatedNode{}, &reports.Run{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range s.Steps() {
		names = append(names, st.Name)
	}
	all := strings.Join(names, "\n")
	for _, want := range []string{
		"restart kubelet v1.27.16+NewVolumeManagerReconstruction=true with its plan entry's feature gates\ndeploy a StatefulSet",
		"hop 1 (upgrade v1.27.16+NewVolumeManagerReconstruction=true → v1.28.15): stop kubelet\nhop 1: swap kubelet binary to v1.28.15\n",
		"hop 2 (same v1.28.15 → v1.28.15+NewVolumeManagerReconstruction=false): stop kubelet\nhop 2: swap kubelet binary to v1.28.15+NewVolumeManagerReconstruction=false\n",
		"hop 3: swap kubelet binary to v1.28.15\n",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("steps lack %q:\n%s", want, all)
		}
	}
	s, err = New(Config{Plan: mustPlan(t, signoffGated), Kubelets: make([]binaries.Binary, 3)}, fakeCluster{}, &gatedNode{}, &reports.Run{})
	if err != nil {
		t.Fatal(err)
	}
	if first := s.Steps()[0].Name; !strings.HasPrefix(first, "deploy") {
		t.Errorf("a first entry without gates restarts nothing, yet the first step is %q", first)
	}
}

// Each swap gives the kubelet exactly its entry's gates: an entry without
// gates after one with them takes them out again. A plan without gates
// leaves the configuration alone.
func TestSwapGivesEachEntryItsGates(t *testing.T) {
	bin := binaries.Binary{Version: "v1.28.15", Path: "/k", Source: "module:v1.28.15"}
	for _, tc := range []struct {
		plan string
		want []map[string]bool
	}{
		{signoffGated, []map[string]bool{{"NewVolumeManagerReconstruction": false}, nil}},
		{"v1.28.15,v1.27.16,v1.28.15", nil},
	} {
		node := &gatedNode{}
		p := mustPlan(t, tc.plan)
		s, err := New(Config{Plan: p, Kubelets: []binaries.Binary{bin, bin, bin}}, fakeCluster{}, node, &reports.Run{})
		if err != nil {
			t.Fatal(err)
		}
		var steps []scenarios.Step
		for _, h := range p.Hops() {
			swap := s.swapKubelet(bin, h.ToGates)
			steps = append(steps, scenarios.Step{Name: h.String(), Run: func(ctx context.Context, sc *scenarios.StepContext) error {
				s.hop = &reports.Hop{Number: h.Number, To: plan.V(h.To), ToGates: h.ToGates}
				return swap(ctx, sc)
			}})
		}
		r, err := run(t, node, steps...)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(node.gates, tc.want) {
			t.Errorf("%s: gates set %v, want %v", tc.plan, node.gates, tc.want)
		}
		if tc.want != nil && !strings.Contains(strings.Join(r.Steps[0].Notes, "\n"), "featureGates {NewVolumeManagerReconstruction: false} (plan entry v1.28.15+NewVolumeManagerReconstruction=false)") {
			t.Errorf("hop 1 notes: %q", r.Steps[0].Notes)
		}
	}
}

// The rejected-gate fault adds its gate to the entry's own and puts the
// entry's back.
func TestRejectedGateKeepsTheEntrysGates(t *testing.T) {
	node := &gatedNode{}
	f := Faults()["rejected-feature-gate"]
	s, err := New(Config{Plan: mustPlan(t, "v1.37.2,v1.36.3+SELinuxChangePolicy=true"), Kubelets: make([]binaries.Binary, 2), Fault: &f}, fakeCluster{}, node, &reports.Run{})
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]bool{"SELinuxChangePolicy": true}
	s.hop = &reports.Hop{To: "v1.36.3", ToGates: own}
	if _, err := run(t, node, scenarios.Step{Name: "plant", Run: s.faultStep(plantRejectedGate)}); err != nil {
		t.Fatal(err)
	}
	want := []map[string]bool{{"SELinuxChangePolicy": true, rejectedGate: false}}
	if !reflect.DeepEqual(node.gates, want) || len(own) != 1 {
		t.Errorf("planted %v (entry's gates now %v), want %v", node.gates, own, want)
	}
}

// Each hop's path comes from its kubelet's log, read once a hop and
// reused by the metrics race check; the first kubelet's goes on the run.
func TestRecordPaths(t *testing.T) {
	oldLog, err := os.ReadFile("../kubeletmetrics/testdata/kubelet-v1.27.16-old-path.log")
	if err != nil {
		t.Fatal(err)
	}
	newLog, err := os.ReadFile("../kubeletmetrics/testdata/kubelet-v1.34.4-race.log")
	if err != nil {
		t.Fatal(err)
	}
	node := &gatedNode{log: string(newLog)}
	r := &reports.Run{}
	s, err := New(Config{Plan: mustPlan(t, "v1.28.15,v1.27.16,v1.28.15"), Kubelets: make([]binaries.Binary, 3)}, fakeCluster{}, node, r)
	if err != nil {
		t.Fatal(err)
	}
	hop := func(n int, to string, vols int) scenarios.Step {
		return scenarios.Step{Name: "hop", Run: func(ctx context.Context, sc *scenarios.StepContext) error {
			s.run.Hops = append(s.run.Hops, reports.Hop{Number: n, To: to})
			s.hop = &s.run.Hops[len(s.run.Hops)-1]
			s.startHopPath()
			s.pathVolumes = vols
			if err := s.recordHopPath(ctx, sc); err != nil {
				return err
			}
			// The second call (checkMetrics after waitCleanup) reads nothing.
			return s.recordHopPath(ctx, sc)
		}}
	}
	runner := &scenarios.Runner{Run: r, Node: node, ArtifactsDir: t.TempDir()}
	ctx := context.Background()
	if err := runner.Execute(ctx, []scenarios.Step{{Name: "initial", Run: s.recordInitialPath}}); err != nil {
		t.Fatal(err)
	}
	node.log = string(oldLog)
	if err := runner.Execute(ctx, []scenarios.Step{hop(1, "v1.27.16", 2)}); err != nil {
		t.Fatal(err)
	}
	reads := node.reads
	if _, err := s.hopKubeletLog(ctx); err != nil || node.reads != reads {
		t.Errorf("the race check read the log again (%d reads, %v)", node.reads-reads, err)
	}
	node.log = string(newLog)
	if err := runner.Execute(ctx, []scenarios.Step{hop(2, "v1.28.15", 6)}); err != nil {
		t.Fatal(err)
	}
	if got := reports.ReconstructionPaths(r); got != "new → old → new" {
		t.Errorf("paths %q, want new → old → new", got)
	}
	if node.reads != 3 {
		t.Errorf("%d log reads for a kubelet and two hops, want 3", node.reads)
	}
	notes := strings.Join(r.Steps[1].Notes, "\n")
	if !strings.Contains(notes, `kubelet v1.27.16 ran reconstruction path "old"`) || len(r.Steps[1].Evidence) != 1 {
		t.Errorf("hop 1 notes %q, evidence %d", notes, len(r.Steps[1].Evidence))
	}

	// A log with lines of both paths fails the hop.
	node.log = string(oldLog) + string(newLog)
	err = runner.Execute(ctx, []scenarios.Step{hop(3, "v1.28.15", 6)})
	if err == nil || !strings.Contains(err.Error(), "lines of both the old and the new reconstruction") {
		t.Errorf("both paths: %v", err)
	}
	if got := r.Hops[2].ReconstructionPath; got != "both" {
		t.Errorf("hop 3 path %q", got)
	}
}
