package skewrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/timeouts"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// teardownTimeout bounds Down, which runs even after a signal;
// logsTimeout bounds collecting the cluster's logs and API objects before
// it. Both are scaled by SKEWTEST_TIMEOUT_FACTOR (restores under TCG take
// minutes).
const (
	teardownTimeout = timeouts.Teardown
	logsTimeout     = timeouts.Logs
)

// finishRun ends a run whose cluster c was made, whatever happened (runErr is
// the run's error so far, nil on a pass): it collects the cluster's logs if
// it came up, tears it down (or keeps it when it failed and
// KeepClusterOnFailure is set, unless the run was interrupted: the user
// asked it to stop), removes what the scenarios left in a cluster the
// run shares with its owner, records the timings, marks an infrastructure failure,
// writes the reports into run.ArtifactsDir, publishes the JUnit file to the
// artifacts root and prints the summary. It returns the run's result and
// runErr joined with any failure of its own.
func finishRun(ctx context.Context, c *runCluster, run *reports.Run, runErr error) (*Result, error) {
	o := c.v.Options
	res := &Result{Run: run, ArtifactsDir: run.ArtifactsDir}
	teardown := time.Now()
	kept, endErr := c.end(ctx, filepath.Join(run.ArtifactsDir, "logs"), runErr)
	res.Kept = kept
	if endErr != nil {
		runErr = errors.Join(runErr, endErr)
		run.Fail(firstNonEmpty(run.Failure, "teardown failed: "+endErr.Error()))
	}
	run.Timings = append(run.Timings, reports.Timing{Phase: "teardown", Duration: time.Since(teardown)})
	if fp, ok := c.Provider.(capabilities.WithRunFacts); ok {
		run.Environment = append(run.Environment, fp.RunFacts()...)
	}
	run.Finished = time.Now()
	run.Timings = append(run.Timings, reports.Timing{Phase: "whole run", Duration: run.Finished.Sub(run.Started)})
	run.Infrastructure = exitcode.Of(runErr) == exitcode.Infrastructure
	files, werr := writeReports(c.v.ArtifactsRoot, run)
	res.Files = files
	if werr != nil {
		runErr = errors.Join(runErr, classify(werr, exitcode.ErrInfrastructure))
	}
	fmt.Fprintln(o.Out, reports.Summary(run))
	return res, runErr
}

// end ends the cluster, whatever happened (runErr is the run's error so
// far): it collects the cluster's logs into logsDir if it came up, tears
// it down (or keeps it when the run failed and KeepClusterOnFailure is
// set, unless the run was interrupted: the user asked it to stop, and
// returns how to reach it), and removes what the scenarios left in a
// cluster the run shares with its owner. The error is teardown's own.
func (c *runCluster) end(ctx context.Context, logsDir string, runErr error) (kept string, err error) {
	o := c.v.Options
	// Logs and teardown must happen even when ctx was cancelled by a
	// signal.
	wctx := context.WithoutCancel(ctx)
	if c.up {
		c.collectLogsBounded(wctx, logsDir)
	}
	if runErr != nil && o.KeepClusterOnFailure && ctx.Err() == nil {
		kept = c.keptMessage()
		fmt.Fprintln(o.Out, kept)
		return kept, nil
	}
	if err := c.Down(wctx); err != nil {
		return "", err
	}
	return "", c.removeLeftWorkloads(wctx)
}

// CollectLogs copies the cluster's component logs into dir, each cut at
// reports.MaxLogBytes, the API objects of pods and volumes into dir/api, and the CSI calls its driver
// served where the provider records them. Failures are
// logged: logs are evidence, not a verdict.
func (c *runCluster) CollectLogs(ctx context.Context, dir string) {
	logger := c.v.Options.Logger
	if err := c.Provider.DumpClusterLogs(ctx, dir); err != nil {
		logger.Warn("could not collect cluster logs", "err", err)
	}
	// Whatever the provider's own collection wrote (kind's, kops toolbox
	// dump's) is bounded as skewtest's own logs are: nightly jobs upload
	// it whole.
	if cut, err := reports.CapFiles(dir, reports.MaxLogBytes); err != nil {
		logger.Warn("could not bound the cluster logs' size", "dir", dir, "err", err)
	} else if len(cut) > 0 {
		logger.Info("cluster logs cut to their first bytes", "limit", reports.MaxLogBytes, "files", cut)
	}
	cs, err := c.clientset()
	if err == nil {
		err = dumpAPIObjects(ctx, cs, dir, c.apiScope(ctx), reports.MaxLogBytes)
	}
	if err != nil {
		logger.Warn("could not write the API objects", "dir", filepath.Join(dir, "api"), "err", err)
	}
	if cp, ok := c.Provider.(capabilities.WithCSICalls); ok {
		var b strings.Builder
		for _, call := range cp.CSICalls() {
			// The node column tells a matrix tour's nodes apart.
			fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\t%s\n", call.Time.Format("15:04:05.000"), call.Node, call.Method, call.VolumeID, call.Path, call.Err)
		}
		err := os.MkdirAll(dir, 0o755)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "csi-calls.tsv"), []byte(b.String()), 0o644)
		}
		if err != nil {
			logger.Warn("could not write the CSI call log", "err", err)
		}
	}
}

// collectLogsBounded is CollectLogs within logsTimeout: a provider whose
// log dump ignores its context (kind's) is left behind, with a warning,
// so that teardown is never held up by evidence.
func (c *runCluster) collectLogsBounded(ctx context.Context, dir string) {
	timeout := timeouts.Scale(logsTimeout, c.v.Options.TimeoutFactor)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.CollectLogs(ctx, dir)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		c.v.Options.Logger.Warn("collecting the cluster's logs took too long; tearing down without the rest", "timeout", timeout, "dir", dir)
	}
}

// Down tears the cluster down, even after a failed or partial Up; the
// error is exitcode.ErrInfrastructure. It is bounded by teardownTimeout, or the
// provider's own when it deletes cloud resources, scaled by
// SKEWTEST_TIMEOUT_FACTOR.
func (c *runCluster) Down(ctx context.Context) error {
	timeout := teardownTimeout
	if tp, ok := c.Provider.(capabilities.WithTeardownTimeout); ok {
		timeout = tp.TeardownTimeout()
	}
	ctx, cancel := context.WithTimeout(ctx, timeouts.Scale(timeout, c.v.Options.TimeoutFactor))
	defer cancel()
	if err := c.Provider.Down(ctx); err != nil {
		return classify(fmt.Errorf("tear down the %s cluster: %w", c.Provider.Name(), err), exitcode.ErrInfrastructure)
	}
	return nil
}

// keptMessage says how to reach a kept cluster and how to remove it.
func (c *runCluster) keptMessage() string {
	p := c.Provider
	msg := fmt.Sprintf("The failed %s cluster was kept (KEEP_CLUSTER_ON_FAILURE).\n  Reach it:     KUBECONFIG=%s kubectl get nodes,pods -A", p.Name(), p.KubeconfigPath())
	if rp, ok := p.(capabilities.WithRunDir); ok {
		msg += fmt.Sprintf("\n  Its files:    %s\n  Tear it down: go run ./cmd/skewtest clean %s", rp.RunDir(), rp.RunDir())
	}
	return msg
}

// writeReports writes run's reports (report.md, JUnit, run.json) into
// run.ArtifactsDir, copies its JUnit file to root (where Prow and TestGrid
// look) as junit_skewtest_<scenario>-<run-id>.xml, and points root/latest
// at the run.
func writeReports(root string, run *reports.Run) ([]string, error) {
	files, err := reports.WriteAll(run.ArtifactsDir, run)
	if err == nil {
		err = publish(root, run)
	}
	if err != nil {
		return files, fmt.Errorf("write reports to %s: %w", run.ArtifactsDir, err)
	}
	return files, nil
}

// publish copies the run's JUnit file to the artifacts root and points
// <root>/latest at the run.
func publish(root string, run *reports.Run) error {
	name := reports.JUnitFileName(run.Scenario)
	b, err := os.ReadFile(filepath.Join(run.ArtifactsDir, name))
	if err != nil {
		return err
	}
	top := strings.TrimSuffix(name, ".xml") + "-" + run.ID + ".xml"
	if err := os.WriteFile(filepath.Join(root, top), b, 0o644); err != nil {
		return err
	}
	latest := filepath.Join(root, "latest")
	os.Remove(latest)
	return os.Symlink(filepath.Base(run.ArtifactsDir), latest)
}
