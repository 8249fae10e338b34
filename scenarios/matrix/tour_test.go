package matrix

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/nodes/nodestest"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// stubScenario records hops as the reconstruction scenario does (the hop's
// first step appends it to the run) and fails where it is told to.
type stubScenario struct {
	p        plan.Plan
	firstHop int
	w        Workload
	run      *reports.Run
	world    *stubWorld
}

// stubWorld is what a test injects and observes across a tour.
type stubWorld struct {
	mu          sync.Mutex
	failHop     map[int]bool    // global hop numbers whose check fails
	failDeploy  map[string]bool // nodes whose first deployment fails
	failRemove  bool
	cancelAtHop int // cancel the run when this hop starts
	cancel      context.CancelFunc
	deployed    []string // node/namespace/name per deployment
	usableCalls []string // node@version
	unusable    error
}

func (s *stubScenario) Steps() []scenarios.Step {
	node := s.run.Node
	steps := []scenarios.Step{{Name: "deploy " + s.w.Name, Run: func(context.Context, *scenarios.StepContext) error {
		s.world.mu.Lock()
		defer s.world.mu.Unlock()
		s.world.deployed = append(s.world.deployed, node+"/"+s.w.Namespace+"/"+s.w.Name)
		if s.world.failDeploy[node] {
			return errors.New("no pods Running")
		}
		return nil
	}}}
	for _, h := range s.p.Hops() {
		n := h.Number + s.firstHop - 1
		steps = append(steps,
			scenarios.Step{Hop: n, Name: fmt.Sprintf("hop %d: stop kubelet", n), Run: func(context.Context, *scenarios.StepContext) error {
				s.run.Hops = append(s.run.Hops, reports.Hop{Number: n, From: plan.V(h.From), To: plan.V(h.To), Direction: h.Direction,
					Timings: []reports.Timing{{Phase: "old pod dirs gone", Duration: 4500e6}}})
				if n == s.world.cancelAtHop {
					s.world.cancel()
				}
				return nil
			}},
			scenarios.Step{Hop: n, Name: fmt.Sprintf("hop %d: wait until the old pods' mounts and directories are gone", n), Run: func(ctx context.Context, _ *scenarios.StepContext) error {
				if s.world.failHop[n] {
					return fmt.Errorf("old pods not cleaned up")
				}
				return ctx.Err()
			}},
		)
	}
	return append(steps, scenarios.Step{Name: "delete the StatefulSet", Run: func(context.Context, *scenarios.StepContext) error { return nil }})
}

func (s *stubScenario) RemoveWorkload() scenarios.Step {
	return scenarios.Step{Name: "remove " + s.w.Name, Run: func(context.Context, *scenarios.StepContext) error {
		if s.world.failRemove {
			return errors.New("volumes still mounted")
		}
		return nil
	}}
}

func stubTour(t *testing.T, w *stubWorld, trails int) *Tour {
	t.Helper()
	tour := &Tour{Trails: Split(Circuit(versions(t, Default)), trails), ArtifactsDir: t.TempDir()}
	for i := range trails {
		tour.Nodes = append(tour.Nodes, nodestest.Idle{Cmder: exec.Local{}, Name: fmt.Sprintf("worker-%d", i+1)})
	}
	tour.NewScenario = func(_ nodes.Node, p plan.Plan, firstHop int, wl Workload, run *reports.Run) (Scenario, error) {
		return &stubScenario{p: p, firstHop: firstHop, w: wl, run: run, world: w}, nil
	}
	tour.Usable = func(_ context.Context, n nodes.Node, v string) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.usableCalls = append(w.usableCalls, n.String()+"@"+v)
		return w.unusable
	}
	return tour
}

func runStub(t *testing.T, w *stubWorld, trails int) (*reports.Run, []TrailRun) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.cancel = cancel
	trs, err := stubTour(t, w, trails).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return Merge(reports.Run{ID: "tour", Plan: Circuit(versions(t, Default)).Raw}, trs), trs
}

func hopVerdicts(r *reports.Run) string {
	var s []string
	for _, h := range r.Hops {
		s = append(s, fmt.Sprintf("%d:%s", h.Number, h.Verdict))
	}
	return strings.Join(s, " ")
}

func TestTourAllPass(t *testing.T) {
	w := &stubWorld{}
	r, trs := runStub(t, w, 3)
	if r.Verdict != reports.Pass {
		t.Fatalf("verdict %s (%s), want pass", r.Verdict, r.Failure)
	}
	circuit := Circuit(versions(t, Default)).Hops()
	if len(r.Hops) != len(circuit) {
		t.Fatalf("%d hops, want %d", len(r.Hops), len(circuit))
	}
	for i, h := range r.Hops {
		c := circuit[i]
		if h.Number != i+1 || h.From != plan.V(c.From) || h.To != plan.V(c.To) {
			t.Errorf("hop %d is %d %s → %s, want %d %s → %s", i, h.Number, h.From, h.To, i+1, plan.V(c.From), plan.V(c.To))
		}
		if want := fmt.Sprintf("worker-%d", i/4+1); h.Node != want {
			t.Errorf("hop %d ran on %q, want %s", h.Number, h.Node, want)
		}
	}
	if len(r.Unreached) != 0 || len(r.Trails) != 3 || len(trs) != 3 {
		t.Errorf("unreached %v, %d trails", r.Unreached, len(r.Trails))
	}
	if len(w.deployed) != 3 || len(w.usableCalls) != 0 {
		t.Errorf("deployed %v, usable checks %v; want one deployment per trail and no check", w.deployed, w.usableCalls)
	}
}

func TestTourContinuesAfterFailedHopOnUsableNode(t *testing.T) {
	w := &stubWorld{failHop: map[int]bool{2: true}}
	r, _ := runStub(t, w, 3)
	if r.Verdict != reports.Fail || !strings.Contains(r.Failure, "hop 2") {
		t.Errorf("verdict %s (%s), want a failure naming hop 2", r.Verdict, r.Failure)
	}
	if got, want := hopVerdicts(r), "1:pass 2:fail 3:pass 4:pass 5:pass 6:pass 7:pass 8:pass 9:pass 10:pass 11:pass 12:pass"; got != want {
		t.Errorf("hops %s, want %s", got, want)
	}
	if len(r.Unreached) != 0 {
		t.Errorf("unreached %v, want none: the node was usable", r.Unreached)
	}
	// Hop 2 is v1.36.3 → v1.35.4: the node is checked at v1.35.4, and the
	// trail goes on from there with a second workload.
	if fmt.Sprint(w.usableCalls) != "[worker-1@v1.35.4]" {
		t.Errorf("usable checks %v, want [worker-1@v1.35.4]", w.usableCalls)
	}
	var t1 []string
	for _, d := range w.deployed {
		if strings.HasPrefix(d, "worker-1/") {
			t1 = append(t1, d)
		}
	}
	if fmt.Sprint(t1) != "[worker-1/skewtest-trail-1/web worker-1/skewtest-trail-1-2/web-2]" {
		t.Errorf("trail 1 deployments %v", t1)
	}
	names := stepNames(r)
	for _, want := range []string{"worker-1: after hop 2 failed: is worker-1 usable at kubelet v1.35.4", "worker-1: remove web", "worker-1: deploy web-2"} {
		if !strings.Contains(names, want) {
			t.Errorf("no step %q in:\n%s", want, names)
		}
	}
	if r.Trails[0].Verdict != reports.Fail || r.Trails[1].Verdict != reports.Pass {
		t.Errorf("trail verdicts %s, %s; want fail, pass", r.Trails[0].Verdict, r.Trails[1].Verdict)
	}
}

func TestTourStopsTrailOnUnusableNode(t *testing.T) {
	w := &stubWorld{failHop: map[int]bool{2: true}, unusable: errors.New("kubelet healthz: connection refused")}
	r, _ := runStub(t, w, 3)
	if got, want := hopVerdicts(r), "1:pass 2:fail 3:pass 4:pass 5:pass 6:pass 7:pass 8:pass 9:pass 10:pass"; got != want {
		t.Errorf("hops %s, want %s", got, want)
	}
	want := []string{"v1.35.4→v1.34.4", "v1.34.4→v1.37.2"}
	if len(r.Unreached) != len(want) {
		t.Fatalf("unreached %+v, want %v", r.Unreached, want)
	}
	for i, u := range r.Unreached {
		if u.From+"→"+u.To != want[i] || u.Node != "worker-1" || !strings.Contains(u.Reason, "hop 2 (v1.36.3 → v1.35.4) failed and left worker-1 unusable: kubelet healthz: connection refused") {
			t.Errorf("unreached %d = %+v, want %s on worker-1 with the reason", i, u, want[i])
		}
	}
}

func TestTourStopsTrailWhenFailedWorkloadStays(t *testing.T) {
	w := &stubWorld{failHop: map[int]bool{6: true}, failRemove: true}
	r, _ := runStub(t, w, 3)
	if len(r.Unreached) != 2 || !strings.Contains(r.Unreached[0].Reason, "could not be removed: volumes still mounted") || r.Unreached[0].Node != "worker-2" {
		t.Errorf("unreached %+v, want hops 7 and 8 on worker-2, workload not removed", r.Unreached)
	}
}

func TestTourLastHopFailure(t *testing.T) {
	w := &stubWorld{failHop: map[int]bool{4: true}}
	r, _ := runStub(t, w, 3)
	if len(r.Unreached) != 0 || len(w.usableCalls) != 0 || len(r.Hops) != 12 {
		t.Errorf("unreached %v, usable checks %v, %d hops: a failed last hop leaves nothing to reach", r.Unreached, w.usableCalls, len(r.Hops))
	}
	if r.Verdict != reports.Fail {
		t.Errorf("verdict %s, want fail", r.Verdict)
	}
}

func TestTourDeployFailure(t *testing.T) {
	w := &stubWorld{failDeploy: map[string]bool{"worker-2": true}}
	r, _ := runStub(t, w, 3)
	if len(r.Hops) != 8 || len(r.Unreached) != 4 {
		t.Fatalf("%d hops, %d unreached; want 8 and 4", len(r.Hops), len(r.Unreached))
	}
	for _, u := range r.Unreached {
		if u.Node != "worker-2" || !strings.Contains(u.Reason, "workload skewtest-trail-2/web could not be set up: no pods Running") {
			t.Errorf("unreached %+v", u)
		}
	}
	if !strings.Contains(r.Failure, "deploy web: no pods Running") {
		t.Errorf("failure %q, want the deploy step's", r.Failure)
	}
}

func TestTourInterrupted(t *testing.T) {
	w := &stubWorld{cancelAtHop: 3}
	r, _ := runStub(t, w, 1)
	if r.Verdict != reports.Fail {
		t.Errorf("verdict %s, want fail", r.Verdict)
	}
	if len(r.Hops) != 3 || len(r.Unreached) != 9 {
		t.Fatalf("%d hops, %d unreached; want 3 reached (the third failed) and 9 not", len(r.Hops), len(r.Unreached))
	}
	if !strings.Contains(r.Unreached[0].Reason, "interrupted") || len(w.usableCalls) != 0 {
		t.Errorf("reason %q, usable checks %v; want an interruption and no check", r.Unreached[0].Reason, w.usableCalls)
	}
}

func TestTourNeedsANodePerTrail(t *testing.T) {
	tour := stubTour(t, &stubWorld{}, 3)
	tour.Nodes = tour.Nodes[:1]
	if _, err := tour.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "needs 3 test nodes; the cluster has 1") {
		t.Errorf("Run with 1 node for 3 trails = %v", err)
	}
}

func stepNames(r *reports.Run) string {
	var s []string
	for _, st := range r.Steps {
		s = append(s, st.Name)
	}
	return strings.Join(s, "\n")
}
