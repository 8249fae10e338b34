package skewrun

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// runJob runs job j on slot s of cluster c (the batch's cluster-th) and
// writes its reports, as Run would: its own run record, steps, hops and
// verdict, with the cluster's logs in the batch's directory. Its outcome
// goes into j.result and j.record.
func (b *batch) runJob(ctx context.Context, c *runCluster, cluster int, s *slot, j *batchJob) {
	j.attempts++
	start := time.Now()
	run := j.v.NewRun(start, j.kubelets)
	logger := j.log().With("node", s.node.String())
	logger.Info("batch run starts", "plan", j.v.Plan.String(), "report", run.ArtifactsDir)
	*j.record = reports.BatchJob{Name: j.job.Name, Scenario: run.Scenario, RunID: run.ID, Cluster: cluster, Node: s.node.String(),
		Started: start, Hold: j.demand.Hold, Attempt: j.attempts}
	err := func() (err error) {
		defer recoverRun(run, &err)
		return runScenario(ctx, c, s.node, nodeScenario{Plan: j.v.Plan, Kubelets: j.kubelets, Fault: j.v.Fault, Shapes: j.v.Shapes,
			Name: "web", Namespace: namespaceOf(run.ID, j.index, j.job.Name), Replicas: j.v.Options.Replicas, Kind: j.v.VolumeKind,
			VolumeGroup: fmt.Sprintf("b%d", j.index+1)}, run)
	}()
	err = interrupted(ctx, err)
	logsDir, _ := filepath.Rel(run.ArtifactsDir, filepath.Join(b.dir, fmt.Sprintf("cluster-%d", cluster), "logs"))
	run.Environment = append(run.Environment,
		reports.KeyValue{Key: "Batch", Value: fmt.Sprintf("%s: cluster %d, shared by %d runs on %d nodes at once", b.record.ID, cluster, len(b.jobs), b.nodes)},
		reports.KeyValue{Key: "runCluster logs", Value: logsDir})
	run.Finished = time.Now()
	run.Timings = append(run.Timings, reports.Timing{Phase: "whole run", Duration: run.Finished.Sub(run.Started)})
	run.Infrastructure = exitcode.Of(err) == exitcode.Infrastructure
	files, werr := writeReports(j.v.ArtifactsRoot, run)
	if werr != nil {
		err = errors.Join(err, classify(werr, exitcode.ErrInfrastructure))
	}
	fmt.Fprintln(j.v.Options.Out, reports.Summary(run))
	j.record.Finished, j.record.Verdict, j.record.Failure = run.Finished, run.Verdict, run.Failure
	j.result = JobResult{Job: j.job, Result: &Result{Run: run, ArtifactsDir: run.ArtifactsDir, Files: files}, Err: err, Attempts: j.attempts}
	logger.Info("batch run done", "verdict", run.Verdict, "took", run.Finished.Sub(start).Round(100*time.Millisecond))
}
