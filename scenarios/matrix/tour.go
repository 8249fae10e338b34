package matrix

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// Scenario is one workload's share of a trail: the steps that deploy it
// and run a plan's hops on it, and the step that removes it when a hop
// failed midway (reconstruction.Scenario is one).
type Scenario interface {
	Steps() []scenarios.Step
	RemoveWorkload() scenarios.Step
}

// Workload names one deployment of a trail's StatefulSet.
type Workload struct {
	Namespace, Name string
}

// Tour runs a tour's trails, each on its own node, at once.
type Tour struct {
	// Trails are the tour's trails (Split), one per node.
	Trails []plan.Plan
	// Nodes run the trails: Nodes[i] runs Trails[i], starting at kubelet
	// Trails[i].Versions[0]; there may be more nodes than trails.
	Nodes []nodes.Node
	// NewScenario prepares the scenario that runs p on node with workload
	// w, recording into run; p's first hop is numbered firstHop.
	NewScenario func(node nodes.Node, p plan.Plan, firstHop int, w Workload, run *reports.Run) (Scenario, error)
	// Usable returns nil when node can go on at kubelet version after a
	// failed hop, or why it cannot.
	Usable func(ctx context.Context, node nodes.Node, version string) error
	// Namespace names the namespace of trail i's deployment d (both from
	// 1), each its own: the run's ID in it keeps it apart from another
	// run's on a shared cluster. Nil for skewtest-trail-<i>[-<d>].
	Namespace func(trail, deployment int) string
	// ArtifactsDir is the tour's artifacts directory; trail i keeps its
	// step artifacts in TrailDir(i, node) under it.
	ArtifactsDir string
	Logger       *slog.Logger
}

// TrailDir is where trail i (0-based) on node keeps its step artifacts,
// relative to the tour's artifacts directory.
func TrailDir(i int, node string) string {
	return filepath.Join("trails", fmt.Sprintf("%d-%s", i+1, node))
}

// Run runs every trail at once and returns their records, in trail order.
// A trail whose hop fails goes on with its next hop when its node is still
// usable at the failed hop's kubelet (a fresh workload, after removing the
// failed one); otherwise its remaining hops are Unreached, with why.
func (t *Tour) Run(ctx context.Context) ([]TrailRun, error) {
	if len(t.Nodes) < len(t.Trails) {
		return nil, fmt.Errorf("a tour of %d trails needs %d test nodes; the cluster has %d", len(t.Trails), len(t.Trails), len(t.Nodes))
	}
	out := make([]TrailRun, len(t.Trails))
	var wg sync.WaitGroup
	first := 1
	for i, p := range t.Trails {
		wg.Add(1)
		go func(i, first int, p plan.Plan) {
			defer wg.Done()
			// A panic in one trail fails that trail, not the process: the
			// tour still merges, reports and tears the cluster down.
			defer func() {
				if r := recover(); r != nil {
					node := t.Nodes[i].String()
					out[i] = TrailRun{Node: node, Plan: p, ArtifactsSubdir: TrailDir(i, node),
						Run: &reports.Run{Node: node, Plan: p.Raw, Verdict: reports.Fail, Failure: fmt.Sprintf("trail %d on %s panicked: %v\n%s", i+1, node, r, debug.Stack())}}
				}
			}()
			out[i] = t.runTrail(ctx, i, first, p, t.Nodes[i])
		}(i, first, p)
		first += len(p.Versions) - 1
	}
	wg.Wait()
	return out, nil
}

// runTrail runs trail i, whose first hop is number first, on node.
func (t *Tour) runTrail(ctx context.Context, i, first int, p plan.Plan, node nodes.Node) TrailRun {
	logger := t.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	logger = logger.With("node", node.String(), "trail", i+1)
	sub := TrailDir(i, node.String())
	tr := TrailRun{Node: node.String(), Plan: p, Run: &reports.Run{Node: node.String(), Plan: p.Raw}, ArtifactsSubdir: sub}
	runner := &scenarios.Runner{Run: tr.Run, Node: node, ArtifactsDir: filepath.Join(t.ArtifactsDir, sub), Logger: logger}
	hops := p.Hops()
	logger.Info("trail starts", "plan", p.String())
	start := time.Now()

	// stop says why the trail's hops from here on did not run.
	stop := ""
	from := 0 // index in p.Versions where the current workload starts
	for deployment := 1; stop == ""; deployment++ {
		w := Workload{Namespace: t.namespace(i+1, deployment), Name: "web"}
		if deployment > 1 {
			w.Name = fmt.Sprintf("web-%d", deployment)
		}
		seg := plan.Plan{Versions: p.Versions[from:], Raw: p.Raw[from:]}
		sc, err := t.NewScenario(node, seg, first+from, w, tr.Run)
		if err != nil {
			stop = err.Error()
			break
		}
		before := len(tr.Run.Steps)
		if t.execute(ctx, runner, sc.Steps()) {
			break
		}
		failed, ranHop := failedStep(tr.Run.Steps[before:])
		switch {
		case ctx.Err() != nil:
			stop = fmt.Sprintf("the run was interrupted (%v)", context.Cause(ctx))
		case failed.Hop == 0 && !ranHop:
			stop = fmt.Sprintf("the trail's workload %s/%s could not be set up: %s", w.Namespace, w.Name, failed.Error)
		case failed.Hop == 0:
			// Every hop ran; what failed came after them.
		case failed.Hop-first+1 >= len(hops):
			// The trail's last hop failed: nothing is left to reach.
		default:
			h := hops[failed.Hop-first]
			to := plan.V(h.To)
			check := scenarios.Step{Name: fmt.Sprintf("after hop %d failed: is %s usable at kubelet %s", failed.Hop, node, to), Run: func(ctx context.Context, sc *scenarios.StepContext) error {
				if err := t.Usable(ctx, node, to); err != nil {
					return err
				}
				sc.Note("node %s runs kubelet %s and is Ready: the trail goes on with a fresh workload", node, to)
				return nil
			}}
			if !t.execute(ctx, runner, []scenarios.Step{check}) {
				stop = fmt.Sprintf("hop %d (%s → %s) failed and left %s unusable: %s", failed.Hop, plan.V(h.From), to, node, lastError(tr.Run))
				break
			}
			if !t.execute(ctx, runner, []scenarios.Step{sc.RemoveWorkload()}) {
				stop = fmt.Sprintf("hop %d (%s → %s) failed and its workload could not be removed: %s", failed.Hop, plan.V(h.From), to, lastError(tr.Run))
				break
			}
			if next := failed.Hop - first + 1; next > from {
				from = next
				continue
			}
			stop = fmt.Sprintf("hop %d failed before the workload's first hop: the trail cannot go on", failed.Hop)
		}
		break
	}
	tr.Run.Timings = append(tr.Run.Timings, reports.Timing{Phase: "trail", Duration: time.Since(start)})

	recorded := map[int]bool{}
	for _, h := range tr.Run.Hops {
		recorded[h.Number] = true
	}
	for _, h := range hops {
		if n := first + h.Number - 1; !recorded[n] {
			tr.Unreached = append(tr.Unreached, reports.UnreachedHop{Node: node.String(), From: plan.V(h.From), To: plan.V(h.To), Reason: stop})
		}
	}
	logger.Info("trail done", "took", time.Since(start).Round(10*time.Millisecond), "hops", len(tr.Run.Hops), "unreached", len(tr.Unreached))
	return tr
}

// namespace is Tour.Namespace, or its default.
func (t *Tour) namespace(trail, deployment int) string {
	if t.Namespace != nil {
		return t.Namespace(trail, deployment)
	}
	if deployment > 1 {
		return fmt.Sprintf("skewtest-trail-%d-%d", trail, deployment)
	}
	return fmt.Sprintf("skewtest-trail-%d", trail)
}

// execute runs steps and reports whether they all passed.
func (t *Tour) execute(ctx context.Context, r *scenarios.Runner, steps []scenarios.Step) bool {
	return r.Execute(ctx, steps) == nil
}

// failedStep returns the first failed step of steps and whether a hop's
// step ran before it.
func failedStep(steps []reports.Step) (reports.Step, bool) {
	ranHop := false
	for _, s := range steps {
		if s.Verdict == reports.Fail {
			return s, ranHop
		}
		if s.Hop != 0 && s.Verdict != reports.Skipped {
			ranHop = true
		}
	}
	return reports.Step{}, ranHop
}

// lastError is the error of the run's last step.
func lastError(r *reports.Run) string {
	if len(r.Steps) == 0 {
		return ""
	}
	return r.Steps[len(r.Steps)-1].Error
}
