package skewrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
)

// A batch is many runs (sign-off plans, catalogue entries) on the test
// nodes of one cluster, several at once, as `make test-skew` runs them:
// one bring-up and one teardown instead of one per run, and the runs'
// bounded waits (a known bug's cleanup that never comes, an outage, a
// preStop's grace) spent side by side. Each run keeps its own workload in
// its own namespace, its own report, verdict and timings, exactly as
// skewrun.Run would have written them.
//
// The runs go to nodes longest first (reconstruction.DemandOf). A node
// takes another run only after one that passed and left it clean
// (nodeLeftovers); a run that failed, or that left something, retires its
// node. Runs that no node can take (all retired, or running another
// kubelet than their plan's first) get a fresh cluster after the first,
// and so do runs that need another cluster (another CSI driver mode or
// API server). With too few nodes for every run that may leave its node
// unclean to have one, those run last on theirs.

// Job is one run of a batch.
type Job struct {
	// Name names the run in the batch's log and summary ("fault
	// vol-data-deleted"); it need not be unique, but reads best so.
	Name string
	// Options are the run's own settings. What makes the cluster
	// (PROVIDER, APISERVER, CSI_MODE, ARTIFACTS, ...) groups the runs into
	// clusters; what makes the run (PLAN, SCENARIO, REPLICAS,
	// VOLUME_KIND) is its own.
	Options Options
	// Group, when set, names jobs that stop together: once one of them
	// fails on a kubelet check (exitcode.Kubelet), those of its group not yet
	// started are not run (JobResult.Skipped says why). A mutation batch
	// stops a mutant's runs at its first kill, as mutation tools do; jobs
	// without a group always run.
	Group string
	// Rank orders the queue before the runs' lengths do: lower ranks go
	// first (0 for most jobs). A mutation batch ranks each mutant's likely
	// killers first, so that its group stops early.
	Rank int
}

// JobResult is what one job left.
type JobResult struct {
	Job Job
	// Result is the run's report, as skewrun.Run returns it; nil when the
	// job never started (bring-up failed, an interrupt came first).
	Result *Result
	// Err is the run's error, classified as skewrun.Run's (exitcode.Of).
	Err error
	// Attempts counts the runs of the job: a run the control plane
	// failed (scenarios.ErrControlPlane) runs once more, on a clean node.
	Attempts int
	// Skipped says why a job of a Group was not run: another job of its
	// group had already failed. Result and Err are then nil.
	Skipped string
}

// BatchResult is what a batch left.
type BatchResult struct {
	Jobs []JobResult
	// Record is the batch's schedule; Dir holds it (batch.md, batch.json,
	// batch.svg) and each cluster's logs.
	Record *reports.Batch
	Dir    string
}

// defaultBatchNodes is how many nodes run a batch's runs at once where
// the provider can make that many (local). Most of a run is waiting, on
// purpose or on the kubelet's own periods. Measured on 2 cores, the
// catalogue's 18 runs took 207 s on 8 nodes, 155 s on 12 and as long on
// 16 (its longest run, prestop-emptydir, bounds it), which cost more
// CPU (measurements.md).
const defaultBatchNodes = 12

// maxBatchNodes bounds BATCH_NODES.
const maxBatchNodes = 16

// batchNodes is BATCH_NODES, or defaultBatchNodes, capped at what the
// provider can make and at the number of jobs.
func batchNodes(o Options, jobs int) int {
	n := o.BatchNodes
	if n == 0 {
		n = defaultBatchNodes
	}
	if d, err := clusters.Lookup(defaultStr(o.Provider, clusters.Default().Name)); err == nil && d.MaxTestNodes > 0 {
		n = min(n, d.MaxTestNodes)
	}
	return max(1, min(n, jobs))
}

// batchJob is a job once validated and resolved.
type batchJob struct {
	index    int
	job      Job
	v        *validated
	kubelets []binaries.Binary
	demand   reconstruction.Demand
	// group is the cluster the job needs (clusterKey).
	group    string
	attempts int
	result   JobResult
	record   *reports.BatchJob
}

// log is the job's logger.
func (j *batchJob) log() *slog.Logger { return j.v.Options.Logger.With("run", j.job.Name) }

// first is the kubelet the job's node must run when it starts: its plan
// entry and binary (two sources of one version are two kubelets).
func (j *batchJob) first() string { return kubeletKey(j.v.Plan.Raw[0], j.kubelets, 0) }

// last is the kubelet the node runs after the job.
func (j *batchJob) last() string {
	n := len(j.v.Plan.Raw) - 1
	return kubeletKey(j.v.Plan.Raw[n], j.kubelets, n)
}

// kubeletKey names plan entry i's kubelet: the entry as written (its
// version and gates) and, once resolved, the binary's sha256.
func kubeletKey(entry string, kubelets []binaries.Binary, i int) string {
	if i < len(kubelets) && kubelets[i].SHA256 != "" {
		return entry + "@" + kubelets[i].SHA256
	}
	return entry
}

// clusterKey is what one cluster serves: jobs of the same key can share
// it.
func clusterKey(v *validated) string {
	return fmt.Sprintf("%s api=%v csi=%s", v.Options.Provider, v.APIServer, v.Options.CSIMode)
}

// CheckBatch checks jobs as RunBatch does before it makes anything: each
// as Check does, and the batch's own settings (o: BATCH_NODES). It returns
// each job's options with their defaults filled in.
func (o Options) CheckBatch(jobs []Job) ([]Options, error) {
	vs, err := validateBatch(o, jobs)
	if err != nil {
		return nil, err
	}
	out := make([]Options, len(vs))
	for i, v := range vs {
		out[i] = v.Options
	}
	return out, nil
}

// validateBatch checks every job as validate does, and the batch's own
// settings (o: BATCH_NODES), without creating anything. Every error wraps
// exitcode.ErrInvalid and names the job.
func validateBatch(o Options, jobs []Job) ([]*validated, error) {
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%w: a batch of no runs", exitcode.ErrInvalid)
	}
	if o.BatchNodes < 0 || o.BatchNodes > maxBatchNodes {
		return nil, fmt.Errorf("%w: BATCH_NODES=%d: want a number from 1 to %d", exitcode.ErrInvalid, o.BatchNodes, maxBatchNodes)
	}
	var out []*validated
	for _, j := range jobs {
		v, err := validate(j.Options)
		if err != nil {
			return nil, fmt.Errorf("run %q of the batch: %w", j.Name, err)
		}
		if v.Options.Provider != defaultStr(o.Provider, clusters.Default().Name) {
			return nil, fmt.Errorf("%w: run %q of the batch is for PROVIDER=%s, the batch for %s; a batch runs on one provider", exitcode.ErrInvalid, j.Name, v.Options.Provider, defaultStr(o.Provider, clusters.Default().Name))
		}
		out = append(out, v)
	}
	return out, nil
}

// RunBatch runs jobs as a batch (see Job): validate every job, resolve its
// kubelets, lock the host, then for each cluster the jobs need, bring it
// up with BATCH_NODES test nodes, run the jobs on them at once, and end
// it. Each job's report is written as Run writes it; the batch's schedule
// goes to its own directory. The error joins the jobs' errors (exitcode.Of
// picks the worst) with the batch's own.
func RunBatch(ctx context.Context, o Options, jobs []Job) (*BatchResult, error) {
	start := time.Now()
	vs, err := validateBatch(o, jobs)
	if err != nil {
		return nil, err
	}
	logger := vs[0].Options.Logger
	bjs := make([]*batchJob, len(jobs))
	for i, j := range jobs {
		bjs[i] = &batchJob{index: i, job: j, v: vs[i], group: clusterKey(vs[i]),
			demand: reconstruction.DemandOf(vs[i].Plan, vs[i].Fault, vs[i].Shapes),
			result: JobResult{Job: j}}
		bjs[i].record = &reports.BatchJob{Name: j.Name, Hold: bjs[i].demand.Hold}
	}
	// Jobs of one plan and kubelet sources share their binaries: each
	// distinct set is resolved (and its cached binaries hashed) once.
	resolved := map[string][]binaries.Binary{}
	for _, j := range bjs {
		key := j.v.Plan.String() + "\x00" + strings.Join(j.v.Specs, "\x00")
		if k, ok := resolved[key]; ok {
			j.kubelets = k
			continue
		}
		if j.kubelets, err = resolveKubelets(ctx, j.v); err != nil {
			return nil, fmt.Errorf("run %q of the batch: %w", j.job.Name, interrupted(ctx, err))
		}
		resolved[key] = j.kubelets
	}
	b := &batch{o: vs[0].Options, start: start, jobs: bjs, groups: &groups{},
		record: &reports.Batch{ID: reports.NewRunID(start), Provider: vs[0].Options.Provider, Started: start, Nodes: batchNodes(o, len(jobs))}}
	b.nodes = b.record.Nodes
	b.dir = filepath.Join(vs[0].ArtifactsRoot, b.record.ID)
	lock, err := lockHost(vs[0], b.record.ID)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	logger.Info("batch starts", "runs", len(jobs), "nodes", b.nodes, "dir", b.dir)
	batchErr := b.run(ctx)
	b.record.Finished = time.Now()
	res := &BatchResult{Record: b.record, Dir: b.dir}
	var errs []error
	for _, j := range bjs {
		b.record.Jobs = append(b.record.Jobs, *j.record)
		res.Jobs = append(res.Jobs, j.result)
		errs = append(errs, j.result.Err)
	}
	if batchErr != nil {
		b.record.Failure = batchErr.Error()
		errs = append(errs, batchErr)
	}
	if _, err := reports.WriteBatch(b.dir, b.record); err != nil {
		errs = append(errs, classify(err, exitcode.ErrInfrastructure))
	}
	fmt.Fprintf(b.o.Out, "batch %s: %d runs on %d nodes in %s (one after another: %s); schedule: %s\n",
		b.record.ID, len(jobs), b.nodes, b.record.Took().Round(100*time.Millisecond), b.record.SumOfRuns().Round(100*time.Millisecond), filepath.Join(b.dir, reports.BatchMarkdownFileName))
	return res, errors.Join(errs...)
}

// batch is a batch being run.
type batch struct {
	o      Options
	start  time.Time
	jobs   []*batchJob
	nodes  int
	dir    string
	record *reports.Batch
	groups *groups
}

// run runs every group of jobs, each on as many clusters as it takes, one
// cluster at a time; it returns the batch's own failure.
func (b *batch) run(ctx context.Context) error {
	groups, byGroup := clusterOrder(b.jobs)
	var errs []error
	for _, g := range groups {
		pending := byGroup[g]
		for {
			if pending = b.groups.pending(pending); len(pending) == 0 {
				break
			}
			if ctx.Err() != nil {
				notRun(pending, fmt.Sprintf("the batch was interrupted (%v) before it started", context.Cause(ctx)), interrupted(ctx, ctx.Err()))
				break
			}
			left, kept, err := b.cluster(ctx, pending)
			if err != nil {
				errs = append(errs, err)
			}
			if kept != "" && len(left) > 0 {
				notRun(left, "the batch's cluster was kept after a failure (KEEP_CLUSTER_ON_FAILURE), and another beside it would share its subnet and sockets: "+kept,
					classify(errors.New("not run: the batch's failed cluster was kept"), exitcode.ErrInfrastructure))
				return errors.Join(errs...)
			}
			if len(left) == len(pending) {
				// No job started on the cluster: its bring-up failed, and
				// cluster() said so on each.
				break
			}
			pending = left
		}
	}
	return errors.Join(errs...)
}

// clusterOrder groups jobs by the cluster they need, in the order the
// clusters come up: the order of the jobs, except in a batch with groups
// that stop at their first kubelet failure (Job.Group), where the cluster
// of fewest jobs comes first. A group whose failing run is on a later
// cluster then runs at most the earlier clusters' few jobs for nothing,
// not a large cluster's many (mutation testing: the block shape's cluster
// before the rest of the catalogue's).
func clusterOrder(jobs []*batchJob) ([]string, map[string][]*batchJob) {
	var order []string
	byGroup := map[string][]*batchJob{}
	stopping := false
	for _, j := range jobs {
		if _, ok := byGroup[j.group]; !ok {
			order = append(order, j.group)
		}
		byGroup[j.group] = append(byGroup[j.group], j)
		stopping = stopping || j.job.Group != ""
	}
	if stopping {
		slices.SortStableFunc(order, func(a, b string) int { return len(byGroup[a]) - len(byGroup[b]) })
	}
	return order, byGroup
}

// notRun marks jobs that never started, with why.
func notRun(jobs []*batchJob, why string, err error) {
	for _, j := range jobs {
		if j.result.Err == nil && j.result.Result == nil {
			j.record.Failure = why
			j.result.Err = err
		}
	}
}

// namespaceOf is the namespace of job i's workload, whose run has ID run:
// skewtest-<run>-<n>-<name>, a DNS label of that run alone
// (workloads.Namespace).
func namespaceOf(run string, i int, name string) string {
	return workloads.Namespace(run, fmt.Sprint(i+1), name)
}

// gated tells whether plan entry i sets feature gates.
func (j *batchJob) gated(i int) bool { return len(j.v.Plan.GatesOf(i)) > 0 }
