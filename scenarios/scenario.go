// Package scenarios runs a scenario: an ordered list of named steps over a
// cluster and one node. Each step records when it started and ended, every
// command it ran on the node (command line, stdout, stderr, exit code), its
// evidence and any deviations, into a reports.Run. The first failing step
// stops the scenario; the rest are reported as skipped. A step that finds
// its hop cannot be reached (ErrNotReached) skips the rest of the hops'
// steps, and the steps outside hops still run.
package scenarios

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/reports"
)

// ErrControlPlane marks a step that failed because the control plane did
// not do its part (a re-created pod its controller never created, or the
// scheduler never placed on the node), so the kubelet under test was never
// asked: the run's failure is the infrastructure's, not the kubelet's.
var ErrControlPlane = errors.New("the control plane did not act")

// ControlPlaneRetries is how many more times a job (and a suite's run)
// runs after a run the control plane failed (ErrControlPlane:
// it never created or scheduled the re-created pods while the node was
// Ready), so that such a flake does not hide the kubelet's verdict. A
// kubelet failure never runs again, nor any other infrastructure failure
// (running again would only repeat it, on kops at a cost). Every attempt
// keeps its own report.
const ControlPlaneRetries = 1

// ErrHarness marks a step that failed because of skewtest itself, not the
// kubelet nor the control plane: for example a re-created pod Pending
// because the PVs skewtest made for its claim were all taken. Such a
// failure is a bug to fix in skewtest, never retried as a flake.
var ErrHarness = errors.New("skewtest's own fault (a harness bug, not the kubelet's)")

// ErrNotReached marks a step that found, before its hop touched the node,
// that the hop cannot be run as planned: what it needs of the node cannot
// be brought about (an earlier hop's kubelet, with a known bug the
// catalogue expects of it, changed the workload, and restoring it failed).
// Nothing was judged, so nothing failed: the step is recorded skipped with
// why, the steps of its hop and of every later hop are skipped, and the
// steps outside hops (the run's closing checks and cleanup) still run. The
// step records the hops it leaves unreached in the run (Run.Unreached).
var ErrNotReached = errors.New("hop not reached")

// Step is one named step of a scenario.
type Step struct {
	Name string
	// Hop is the 1-based hop the step belongs to; 0 outside hops.
	Hop int
	Run func(ctx context.Context, s *StepContext) error
}

// StepContext is what a running step may use and record into.
type StepContext struct {
	// Node runs commands on the test node; each is recorded in the step.
	Node nodes.Node
	// QuietNode runs commands without recording them, for polling (a
	// snapshot every 250 ms would drown the report); record the final
	// observation as Evidence instead.
	QuietNode nodes.Node
	Logger    *slog.Logger
	artifacts string
	mu        sync.Mutex
	rec       *reports.Step
}

// Note records a short fact in the step and logs it.
func (s *StepContext) Note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.rec.Notes = append(s.rec.Notes, msg)
	s.mu.Unlock()
	s.Logger.Info(msg, "step", s.rec.Name)
}

// Evidence records something the step observed.
func (s *StepContext) Evidence(e reports.Evidence) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.Evidence = append(s.rec.Evidence, e)
}

// Deviation records a value that differs from the ideal; one without a
// Reason fails the run.
func (s *StepContext) Deviation(d reports.Deviation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.Deviations = append(s.rec.Deviations, d)
}

// Artifact writes data into the artifacts dir and returns its path
// relative to it, for Evidence.Path.
func (s *StepContext) Artifact(name string, data []byte) (string, error) {
	rel := filepath.Join("steps", fmt.Sprintf("%02d-%s", s.rec.Index, slug(s.rec.Name)), name)
	full := filepath.Join(s.artifacts, rel)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return "", err
	}
	return rel, os.WriteFile(full, data, 0o644)
}

// ArtifactsDir is the run's artifacts directory.
func (s *StepContext) ArtifactsDir() string { return s.artifacts }

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

func slug(s string) string {
	return strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

// Runner executes steps into a run record.
type Runner struct {
	Run          *reports.Run
	Node         nodes.Node
	ArtifactsDir string
	Logger       *slog.Logger
}

// Execute runs steps in order. It returns the first step's error, wrapped
// with the step's name; steps after it are recorded as skipped. A step
// that returns nil but recorded an unexpected deviation also fails. A step
// whose error wraps ErrNotReached does not fail: it is recorded skipped
// with its error, the later steps of any hop are skipped with a note
// naming it, and the later steps outside hops run.
func (r *Runner) Execute(ctx context.Context, steps []Step) error {
	logger := r.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var firstErr error
	notReached := ""
	for _, st := range steps {
		idx := len(r.Run.Steps) + 1
		rec := reports.Step{Index: idx, Name: st.Name, Hop: st.Hop}
		if firstErr != nil {
			rec.Verdict = reports.Skipped
			r.Run.Steps = append(r.Run.Steps, rec)
			continue
		}
		if notReached != "" && st.Hop != 0 {
			rec.Verdict, rec.Notes = reports.Skipped, []string{notReached}
			r.Run.Steps = append(r.Run.Steps, rec)
			continue
		}
		r.Run.Steps = append(r.Run.Steps, rec)
		sr := &r.Run.Steps[len(r.Run.Steps)-1]
		sc := &StepContext{QuietNode: r.Node, Logger: logger, artifacts: r.ArtifactsDir, rec: sr}
		if r.Node != nil {
			sc.Node = &recordingNode{Node: r.Node, rec: exec.NewRecorder(r.Node, func(res exec.Result) {
				sc.mu.Lock()
				defer sc.mu.Unlock()
				sr.Commands = append(sr.Commands, reports.Command{
					Node: res.Node, Command: res.CommandLine(), Stdout: res.Stdout, Stderr: res.Stderr,
					ExitCode: res.ExitCode, Started: res.Started, Duration: res.Duration,
				})
			})}
		}
		logger.Info(fmt.Sprintf("step %d: %s", idx, st.Name))
		sr.Started = time.Now()
		err := runStep(ctx, st, sc)
		sr.Finished = time.Now()
		if err != nil && errors.Is(err, ErrNotReached) && ctx.Err() == nil {
			sr.Verdict, sr.Error = reports.Skipped, err.Error()
			notReached = fmt.Sprintf("not run: step %d found hop %d cannot be reached", idx, st.Hop)
			logger.Warn(fmt.Sprintf("step %d: hop %d not reached; the later hops' steps are skipped: %s", idx, st.Hop, st.Name), "why", err)
			continue
		}
		if err == nil {
			for _, d := range sr.Deviations {
				if !d.IsExpected() {
					err = fmt.Errorf("%s: expected %s, observed %s", d.Check, d.Expected, d.Observed)
					break
				}
			}
		}
		switch {
		case err != nil:
			sr.Verdict, sr.Error = reports.Fail, err.Error()
			firstErr = fmt.Errorf("step %d %q: %w", idx, st.Name, err)
			logger.Error(fmt.Sprintf("step %d failed: %s", idx, st.Name), "err", err, "took", sr.Duration().Round(time.Millisecond))
		case len(sr.Deviations) > 0:
			sr.Verdict = reports.PassWithExpectedDeviations
			logger.Info(fmt.Sprintf("step %d passed with expected deviations: %s", idx, st.Name), "took", sr.Duration().Round(time.Millisecond))
		default:
			sr.Verdict = reports.Pass
			logger.Info(fmt.Sprintf("step %d passed: %s", idx, st.Name), "took", sr.Duration().Round(time.Millisecond))
		}
	}
	return firstErr
}

// runStep turns a panic in a step into its failure, so the run is still
// reported and torn down; its stack is the step's evidence, as a
// harness bug needs it to be found.
func runStep(ctx context.Context, st Step, sc *StepContext) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
			sc.Evidence(reports.Evidence{Name: "the harness's panic", Kind: "log", Text: fmt.Sprintf("panic: %v\n\n%s", p, debug.Stack())})
		}
	}()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("not started: %w", err)
	}
	err = st.Run(ctx, sc)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w (run interrupted: %v)", err, context.Cause(ctx))
	}
	return err
}

// recordingNode is a node whose commands are recorded in the step.
type recordingNode struct {
	nodes.Node
	rec *exec.Recorder
}

func (n *recordingNode) Command(ctx context.Context, name string, args ...string) exec.Cmd {
	return n.rec.Command(ctx, name, args...)
}
