package skewrun

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// slot is one test node of a batch's cluster, as the schedule sees it.
type slot struct {
	node nodes.Node
	// kubelet is the kubelet it runs now (batchJob.first, .last).
	kubelet string
	// gated: that kubelet runs with feature gates its plan entry set,
	// which only a run's own hops take out again.
	gated bool
	// retired says why it takes no more jobs; "" while it does.
	retired string
}

// finished is a job that ended on a slot, or could not start on it
// because the slot's kubelet could not be swapped for the job's first.
type finished struct {
	slot    *slot
	job     *batchJob
	swapErr error
}

// cluster brings up one cluster for pending (jobs of one group), runs as
// many of them as its nodes can take, ends it, and returns the jobs it did
// not run. kept is how to reach the cluster when it was kept after a
// failure. The error is the cluster's own (bring-up, teardown); each job
// carries its own.
func (b *batch) cluster(ctx context.Context, pending []*batchJob) (left []*batchJob, kept string, err error) {
	queue := order(pending, min(b.nodes, len(pending)))
	n := min(b.nodes, len(queue))
	initial := make([]binaries.Binary, n)
	for i, j := range queue[:n] {
		initial[i] = j.kubelets[0]
	}
	v := queue[0].v
	number := len(b.record.Clusters) + 1
	id := reports.NewRunID(time.Now())
	rec := reports.BatchCluster{Number: number, Started: time.Now(), Logs: fmt.Sprintf("cluster-%d/logs", number)}
	logger := v.Options.Logger.With("cluster", number)
	c, err := newRunCluster(v, id, initial)
	if err != nil {
		notRun(queue, err.Error(), err)
		return nil, "", err
	}
	// The cluster's own record, for Up's timing and failure.
	up := &reports.Run{}
	runErr := func() (err error) {
		defer recoverRun(up, &err)
		if err := c.Up(ctx, up); err != nil {
			return err
		}
		rec.Up = time.Since(rec.Started)
		testNodes, err := c.TestNodes(ctx)
		if err != nil {
			return err
		}
		slots := make([]*slot, min(len(testNodes), n))
		for i := range slots {
			slots[i] = &slot{node: testNodes[i], kubelet: queue[i].first(), gated: queue[i].gated(0)}
			rec.Nodes = append(rec.Nodes, testNodes[i].String())
		}
		logger.Info("batch cluster up", "nodes", strings.Join(rec.Nodes, ","), "took", rec.Up.Round(100*time.Millisecond), "runs", len(queue))
		left = schedule(ctx, slots, queue, b.groups, func(s *slot, j *batchJob) { b.runJob(ctx, c, number, s, j) },
			func(s *slot, j *batchJob) string { return b.nodeAfter(ctx, c, s, j) },
			func(s *slot, j *batchJob) error { return b.swapKubelet(ctx, c, s, j) })
		for _, s := range slots {
			if s.retired != "" {
				rec.Retired = append(rec.Retired, s.node.String()+": "+s.retired)
			}
		}
		return nil
	}()
	if runErr != nil {
		why := firstNonEmpty(up.Failure, runErr.Error())
		notRun(queue, "the batch's cluster did not come up: "+why, runErr)
		left = nil
	}
	teardown := time.Now()
	failed := runErr != nil || slices.ContainsFunc(queue, func(j *batchJob) bool { return j.result.Err != nil })
	var endErr error
	if failed {
		endErr = errors.New("a run failed")
	}
	kept, endErr = c.end(ctx, filepath.Join(b.dir, filepath.Dir(rec.Logs), "logs"), endErr)
	rec.Teardown, rec.Finished = time.Since(teardown), time.Now()
	b.record.Clusters = append(b.record.Clusters, rec)
	return left, kept, errors.Join(runErr, endErr)
}

// order is the queue's order: by Job.Rank, then the longest hold first
// (they bound the batch's length), unless there are too few nodes for every job that may
// leave its node unclean to have one of its own (kind's one node): those
// then go last, each the last on its node.
func order(jobs []*batchJob, nodes int) []*batchJob {
	q := slices.Clone(jobs)
	mayLeave := 0
	for _, j := range q {
		if j.demand.MayLeave {
			mayLeave++
		}
	}
	lastMayLeave := mayLeave >= nodes
	slices.SortStableFunc(q, func(a, b *batchJob) int {
		if a.job.Rank != b.job.Rank {
			return a.job.Rank - b.job.Rank
		}
		if lastMayLeave && a.demand.MayLeave != b.demand.MayLeave {
			if a.demand.MayLeave {
				return 1
			}
			return -1
		}
		return int(b.demand.Hold - a.demand.Hold)
	})
	return q
}

// schedule runs the queue on the slots, at once, and returns the jobs no
// slot took. A slot takes the first queued job that starts at the kubelet
// it runs; when none does, swap (nil: never) puts the first queued job's
// kubelet on it, if neither that kubelet nor the slot's runs with feature
// gates. After a job that left it usable (after says why not), it takes
// the next; otherwise it retires, as it does when its kubelet cannot be
// swapped (the job goes back to the queue). A job the control plane failed
// is queued again, first. A job that failed on a kubelet check stops its
// Group: its jobs not yet started are skipped. run runs a job and sets its
// result.
func schedule(ctx context.Context, slots []*slot, queue []*batchJob, g *groups, run func(*slot, *batchJob), after func(*slot, *batchJob) string, swap func(*slot, *batchJob) error) []*batchJob {
	queue = g.pending(queue)
	done := make(chan finished)
	running := 0
	// idle are the slots with no job they can take now: one may come
	// back to the queue (a control plane failure, a failed swap) while
	// others run, so they retire only once nothing runs.
	var idle []*slot
	start := func(s *slot) {
		if ctx.Err() != nil {
			return
		}
		queue = g.pending(queue)
		i := slices.IndexFunc(queue, func(j *batchJob) bool { return j.first() == s.kubelet })
		swapFirst := false
		if i < 0 && swap != nil && !s.gated {
			i = slices.IndexFunc(queue, func(j *batchJob) bool { return !j.gated(0) })
			swapFirst = i >= 0
		}
		if i < 0 {
			idle = append(idle, s)
			return
		}
		j := queue[i]
		queue = slices.Delete(queue, i, i+1)
		running++
		go func() {
			if swapFirst {
				if err := swap(s, j); err != nil {
					done <- finished{slot: s, job: j, swapErr: err}
					return
				}
			}
			run(s, j)
			done <- finished{slot: s, job: j}
		}()
	}
	wake := func() {
		waiting := idle
		idle = nil
		for _, s := range waiting {
			start(s)
		}
	}
	for _, s := range slots {
		start(s)
	}
	for running > 0 {
		f := <-done
		running--
		s, j := f.slot, f.job
		if f.swapErr != nil {
			s.retired = fmt.Sprintf("its kubelet could not be swapped for run %q's first: %v", j.job.Name, f.swapErr)
			queue = append([]*batchJob{j}, queue...)
			wake()
			continue
		}
		if errors.Is(j.result.Err, scenarios.ErrControlPlane) && j.attempts <= scenarios.ControlPlaneRetries && ctx.Err() == nil {
			j.log().Warn("the control plane failed the run, not the kubelet: it runs once more", "report", j.result.Result.ArtifactsDir)
			queue = append([]*batchJob{j}, queue...)
		}
		if exitcode.Of(j.result.Err) == exitcode.Kubelet {
			g.stop(j)
		}
		if why := after(s, j); why != "" {
			s.retired = why
			wake()
			continue
		}
		s.kubelet, s.gated = j.last(), j.gated(len(j.v.Plan.Raw)-1)
		start(s)
		wake()
	}
	for _, s := range idle {
		s.retired = fmt.Sprintf("no run left starts at its kubelet %s", s.kubelet)
	}
	if ctx.Err() != nil {
		notRun(queue, fmt.Sprintf("the batch was interrupted (%v) before it started", context.Cause(ctx)), interrupted(ctx, ctx.Err()))
		return nil
	}
	return queue
}

// maxRetiredWhy bounds what a retired node's line in the batch's summary
// quotes of what it was left with.
const maxRetiredWhy = 160

// nodeAfter says why slot s takes no more jobs after j, or "" when it can:
// the job passed, and the node holds nothing of its pods and volumes.
func (b *batch) nodeAfter(ctx context.Context, c *runCluster, s *slot, j *batchJob) string {
	if ctx.Err() != nil {
		return "the batch was interrupted"
	}
	if j.result.Err != nil {
		return fmt.Sprintf("run %q failed on it: it may hold anything", j.job.Name)
	}
	if r := j.result.Result; r != nil && r.Run != nil && len(r.Run.Unreached) > 0 {
		// The node runs the kubelet of the last hop reached, not the
		// plan's last, which the schedule takes it to run.
		return fmt.Sprintf("run %q did not reach its hop %d: the node runs an earlier kubelet than the plan's last", j.job.Name, r.Run.Unreached[0].Number)
	}
	left, err := c.nodeLeftovers(ctx, s.node, j.kubelets[len(j.kubelets)-1].Version)
	if err != nil {
		return fmt.Sprintf("after run %q, its state could not be read: %v", j.job.Name, err)
	}
	if len(left) > 0 {
		// The first says what; the run's report has them all.
		first := left[0]
		if r := []rune(first); len(r) > maxRetiredWhy {
			first = string(r[:maxRetiredWhy]) + "…"
		}
		if len(left) == 1 {
			return fmt.Sprintf("run %q left %s", j.job.Name, first)
		}
		return fmt.Sprintf("run %q left %d things, first %s", j.job.Name, len(left), first)
	}
	return ""
}
