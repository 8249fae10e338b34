package scenarios

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes/nodestest"
	"sigs.k8s.io/skewtest/reports"
)

// stepRecord is the part of a reports.Step a case checks.
type stepRecord struct {
	name    string
	verdict reports.Verdict
	// errSub must be in Step.Error; empty means Error must be empty.
	errSub string
}

func TestExecuteVerdicts(t *testing.T) {
	pass := func(context.Context, *StepContext) error { return nil }
	boom := errors.New("boom")
	expected := reports.Deviation{Check: "old mounts gone", Expected: "<= 10s", Observed: "12s", Reason: "documented slowness"}
	unexpected := reports.Deviation{Check: "orphaned volume dirs", Expected: "0", Observed: "2"}

	tests := []struct {
		name  string
		steps []Step
		want  []stepRecord
		// wantErr are substrings of Execute's error; nil means no error.
		wantErr []string
		// wantIs is a target errors.Is must find in Execute's error.
		wantIs error
	}{
		{
			name:  "all pass",
			steps: []Step{{Name: "one", Run: pass}, {Name: "two", Run: pass}, {Name: "three", Run: pass}},
			want:  []stepRecord{{"one", reports.Pass, ""}, {"two", reports.Pass, ""}, {"three", reports.Pass, ""}},
		},
		{
			name: "failure skips the rest",
			steps: []Step{
				{Name: "one", Run: pass},
				{Name: "two", Run: func(context.Context, *StepContext) error { return boom }},
				{Name: "three", Run: pass},
				{Name: "four", Run: pass},
			},
			want: []stepRecord{
				{"one", reports.Pass, ""},
				{"two", reports.Fail, "boom"},
				{"three", reports.Skipped, ""},
				{"four", reports.Skipped, ""},
			},
			wantErr: []string{`step 2 "two": boom`},
			wantIs:  boom,
		},
		{
			name: "first step fails",
			steps: []Step{
				{Name: "setup", Run: func(context.Context, *StepContext) error { return boom }},
				{Name: "after", Run: pass},
			},
			want:    []stepRecord{{"setup", reports.Fail, "boom"}, {"after", reports.Skipped, ""}},
			wantErr: []string{`step 1 "setup"`},
			wantIs:  boom,
		},
		{
			name: "panic is the step's failure",
			steps: []Step{
				{Name: "one", Run: pass},
				{Name: "panics", Run: func(context.Context, *StepContext) error { panic("kaboom") }},
				{Name: "three", Run: pass},
			},
			want: []stepRecord{
				{"one", reports.Pass, ""},
				{"panics", reports.Fail, "panic: kaboom"},
				{"three", reports.Skipped, ""},
			},
			wantErr: []string{`step 2 "panics": panic: kaboom`},
		},
		{
			name: "nil pointer panic",
			steps: []Step{
				{Name: "derefs nil", Run: func(context.Context, *StepContext) error {
					var m map[string]int
					m["x"] = 1
					return nil
				}},
			},
			want:    []stepRecord{{"derefs nil", reports.Fail, "panic: assignment to entry in nil map"}},
			wantErr: []string{`step 1 "derefs nil": panic:`},
		},
		{
			name: "unexpected deviation fails a step that returned nil",
			steps: []Step{
				{Name: "check", Run: func(_ context.Context, s *StepContext) error { s.Deviation(unexpected); return nil }},
				{Name: "later", Run: pass},
			},
			want: []stepRecord{
				{"check", reports.Fail, "orphaned volume dirs: expected 0, observed 2"},
				{"later", reports.Skipped, ""},
			},
			wantErr: []string{`step 1 "check": orphaned volume dirs: expected 0, observed 2`},
		},
		{
			name: "expected deviation passes with expected deviations",
			steps: []Step{
				{Name: "check", Run: func(_ context.Context, s *StepContext) error { s.Deviation(expected); return nil }},
				{Name: "later", Run: pass},
			},
			want: []stepRecord{{"check", reports.PassWithExpectedDeviations, ""}, {"later", reports.Pass, ""}},
		},
		{
			name: "one unexpected among expected deviations fails",
			steps: []Step{
				{Name: "check", Run: func(_ context.Context, s *StepContext) error {
					s.Deviation(expected)
					s.Deviation(unexpected)
					return nil
				}},
			},
			want:    []stepRecord{{"check", reports.Fail, "orphaned volume dirs"}},
			wantErr: []string{"orphaned volume dirs"},
		},
		{
			name: "step error wins over deviations",
			steps: []Step{
				{Name: "check", Run: func(_ context.Context, s *StepContext) error {
					s.Deviation(unexpected)
					return boom
				}},
			},
			want:    []stepRecord{{"check", reports.Fail, "boom"}},
			wantErr: []string{`step 1 "check": boom`},
			wantIs:  boom,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Wrap every step to log which ones ran.
			var ran []string
			steps := make([]Step, len(tc.steps))
			for i, st := range tc.steps {
				steps[i] = Step{Name: st.Name, Hop: i % 2, Run: func(ctx context.Context, s *StepContext) error {
					ran = append(ran, st.Name)
					return st.Run(ctx, s)
				}}
			}
			run := &reports.Run{}
			r := &Runner{Run: run, ArtifactsDir: t.TempDir()}
			err := r.Execute(t.Context(), steps)

			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Execute() = %v, want nil", err)
				}
			} else {
				if err == nil {
					t.Fatalf("Execute() = nil, want an error containing %q", tc.wantErr)
				}
				for _, sub := range tc.wantErr {
					if !strings.Contains(err.Error(), sub) {
						t.Errorf("Execute() = %q, want it to contain %q", err, sub)
					}
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("Execute() = %v does not wrap %v", err, tc.wantIs)
			}

			if len(run.Steps) != len(tc.want) {
				t.Fatalf("recorded %d steps, want %d", len(run.Steps), len(tc.want))
			}
			var wantRan []string
			for i, w := range tc.want {
				got := run.Steps[i]
				if got.Index != i+1 || got.Name != w.name || got.Hop != i%2 {
					t.Errorf("step %d recorded as index %d name %q hop %d, want %d %q %d", i, got.Index, got.Name, got.Hop, i+1, w.name, i%2)
				}
				if got.Verdict != w.verdict {
					t.Errorf("step %d %q verdict %q, want %q", i+1, w.name, got.Verdict, w.verdict)
				}
				if w.errSub == "" && got.Error != "" {
					t.Errorf("step %d %q error %q, want none", i+1, w.name, got.Error)
				}
				if w.errSub != "" && !strings.Contains(got.Error, w.errSub) {
					t.Errorf("step %d %q error %q, want it to contain %q", i+1, w.name, got.Error, w.errSub)
				}
				if w.verdict == reports.Skipped {
					if !got.Started.IsZero() || !got.Finished.IsZero() {
						t.Errorf("skipped step %d has times %v..%v", i+1, got.Started, got.Finished)
					}
					continue
				}
				wantRan = append(wantRan, w.name)
				if got.Started.IsZero() || got.Finished.Before(got.Started) {
					t.Errorf("step %d times %v..%v", i+1, got.Started, got.Finished)
				}
				if i > 0 && got.Started.Before(run.Steps[i-1].Finished) {
					t.Errorf("step %d started before step %d finished", i+1, i)
				}
			}
			if !slices.Equal(ran, wantRan) {
				t.Errorf("ran steps %q, want %q in that order", ran, wantRan)
			}
		})
	}
}

// TestExecuteAppends checks that indexes continue after the steps a run
// already holds, and that the error names the step by that index.
func TestExecuteAppends(t *testing.T) {
	run := &reports.Run{Steps: []reports.Step{{Index: 1, Name: "earlier", Verdict: reports.Pass}}}
	r := &Runner{Run: run, ArtifactsDir: t.TempDir()}
	err := r.Execute(t.Context(), []Step{
		{Name: "a", Run: func(context.Context, *StepContext) error { return nil }},
		{Name: "b", Run: func(context.Context, *StepContext) error { return errors.New("bad") }},
	})
	if err == nil || !strings.Contains(err.Error(), `step 3 "b": bad`) {
		t.Fatalf("Execute() = %v, want step 3 \"b\" to fail", err)
	}
	var got []string
	for _, s := range run.Steps {
		got = append(got, strings.Join([]string{s.Name, string(s.Verdict)}, ":"))
		if s.Index != len(got) {
			t.Errorf("step %q has index %d, want %d", s.Name, s.Index, len(got))
		}
	}
	if want := []string{"earlier:pass", "a:pass", "b:fail"}; !slices.Equal(got, want) {
		t.Errorf("steps %q, want %q", got, want)
	}
}

func TestStepRecordsNodeCommands(t *testing.T) {
	node := nodestest.Idle{Cmder: exec.Local{}, Name: "node-1"}
	run := &reports.Run{}
	r := &Runner{Run: run, Node: node, ArtifactsDir: t.TempDir()}
	err := r.Execute(t.Context(), []Step{
		{Name: "runs commands", Run: func(ctx context.Context, s *StepContext) error {
			if s.Node == nil || s.QuietNode == nil {
				return errors.New("nodes not set")
			}
			if got := s.Node.String(); got != "node-1" {
				return errors.New("recorded node is named " + got)
			}
			if _, err := exec.Output(ctx, s.Node, "echo", "hello world"); err != nil {
				return err
			}
			// A failing command is recorded; the step decides it is fine.
			if _, err := exec.Output(ctx, s.Node, "sh", "-c", "echo out; echo err >&2; exit 4"); exec.ExitCode(err) != 4 {
				return errors.New("want exit 4")
			}
			// Polling through QuietNode is not recorded.
			for range 3 {
				if _, err := exec.Output(ctx, s.QuietNode, "echo", "poll"); err != nil {
					return err
				}
			}
			s.Note("saw %d polls", 3)
			s.Evidence(reports.Evidence{Name: "snapshot", Kind: "text", Text: "all clean"})
			// Kubelet methods are reachable through the recorded node.
			if got := s.Node.KubeletRootDir(); got != "/var/lib/kubelet" {
				return errors.New("KubeletRootDir " + got)
			}
			return s.Node.StopKubelet(ctx)
		}},
		{Name: "second step", Run: func(ctx context.Context, s *StepContext) error {
			_, err := exec.Output(ctx, s.Node, "true")
			return err
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	type cmd struct {
		line, stdout, stderr string
		code                 int
	}
	want := [][]cmd{
		{
			{"echo 'hello world'", "hello world\n", "", 0},
			{"sh -c 'echo out; echo err >&2; exit 4'", "out\n", "err\n", 4},
		},
		{{"true", "", "", 0}},
	}
	for i, st := range run.Steps {
		if st.Verdict != reports.Pass {
			t.Errorf("step %d verdict %q (%s)", i+1, st.Verdict, st.Error)
		}
		var got []cmd
		for _, c := range st.Commands {
			got = append(got, cmd{c.Command, c.Stdout, c.Stderr, c.ExitCode})
			if c.Node != "node-1" {
				t.Errorf("step %d command %q recorded on node %q, want node-1", i+1, c.Command, c.Node)
			}
			if c.Started.IsZero() || c.Duration <= 0 {
				t.Errorf("step %d command %q has no time: %v %v", i+1, c.Command, c.Started, c.Duration)
			}
		}
		if !slices.Equal(got, want[i]) {
			t.Errorf("step %d commands:\n got %+v\nwant %+v", i+1, got, want[i])
		}
	}
	if got := run.Steps[0].Notes; !slices.Equal(got, []string{"saw 3 polls"}) {
		t.Errorf("notes %q", got)
	}
	if got := run.Steps[0].Evidence; len(got) != 1 || got[0].Text != "all clean" {
		t.Errorf("evidence %+v", got)
	}
}

func TestStepWithoutNode(t *testing.T) {
	run := &reports.Run{}
	r := &Runner{Run: run, ArtifactsDir: t.TempDir()}
	err := r.Execute(t.Context(), []Step{{Name: "no node", Run: func(_ context.Context, s *StepContext) error {
		if s.Node != nil || s.QuietNode != nil {
			return errors.New("want nil nodes")
		}
		s.Note("ran")
		return nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if run.Steps[0].Verdict != reports.Pass {
		t.Errorf("verdict %q", run.Steps[0].Verdict)
	}
}

func TestArtifact(t *testing.T) {
	dir := t.TempDir()
	run := &reports.Run{}
	r := &Runner{Run: run, ArtifactsDir: dir}
	type written struct {
		rel  string
		data string
	}
	var got []written
	artifact := func(name, data string) func(context.Context, *StepContext) error {
		return func(_ context.Context, s *StepContext) error {
			if s.ArtifactsDir() != dir {
				return errors.New("ArtifactsDir " + s.ArtifactsDir())
			}
			rel, err := s.Artifact(name, []byte(data))
			if err != nil {
				return err
			}
			got = append(got, written{rel, data})
			return nil
		}
	}
	err := r.Execute(t.Context(), []Step{
		{Name: "setup", Run: artifact("a.txt", "first")},
		{Name: "Stop kubelet & force-delete pods!", Run: artifact("snapshot.json", `{"x":1}`)},
		{Name: "nested", Run: artifact("hop1/metrics.txt", "m 1\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"steps/01-setup/a.txt",
		"steps/02-stop-kubelet-force-delete-pods/snapshot.json",
		"steps/03-nested/hop1/metrics.txt",
	}
	if len(got) != len(want) {
		t.Fatalf("wrote %d artifacts, want %d", len(got), len(want))
	}
	for i, w := range got {
		if filepath.IsAbs(w.rel) {
			t.Errorf("artifact path %q is absolute, want relative to the artifacts dir", w.rel)
		}
		if filepath.ToSlash(w.rel) != want[i] {
			t.Errorf("artifact path %q, want %q", w.rel, want[i])
		}
		b, err := os.ReadFile(filepath.Join(dir, w.rel))
		if err != nil {
			t.Errorf("artifact %q: %v", w.rel, err)
			continue
		}
		if string(b) != w.data {
			t.Errorf("artifact %q holds %q, want %q", w.rel, b, w.data)
		}
	}
}

func TestArtifactError(t *testing.T) {
	// An artifacts "dir" that is a file: the step sees the error.
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run := &reports.Run{}
	r := &Runner{Run: run, ArtifactsDir: file}
	err := r.Execute(t.Context(), []Step{{Name: "write", Run: func(_ context.Context, s *StepContext) error {
		_, err := s.Artifact("x", []byte("y"))
		return err
	}}})
	if err == nil || run.Steps[0].Verdict != reports.Fail {
		t.Fatalf("Execute() = %v, verdict %q; want the artifact error to fail the step", err, run.Steps[0].Verdict)
	}
}

func TestCancelledContext(t *testing.T) {
	tests := []struct {
		name string
		// cancelIn is the 1-based step that cancels the context; 0 cancels
		// before Execute.
		cancelIn int
		// stepErr is what the cancelling step returns.
		stepErr error
		want    []stepRecord
		wantErr []string
	}{
		{
			name:     "cancelled before the run",
			cancelIn: 0,
			want: []stepRecord{
				{"one", reports.Fail, "not started: context canceled"},
				{"two", reports.Skipped, ""},
				{"three", reports.Skipped, ""},
			},
			wantErr: []string{`step 1 "one": not started: context canceled`},
		},
		{
			name:     "cancelled during a step that then passes",
			cancelIn: 1,
			want: []stepRecord{
				{"one", reports.Pass, ""},
				{"two", reports.Fail, "not started: context canceled"},
				{"three", reports.Skipped, ""},
			},
			wantErr: []string{`step 2 "two": not started`},
		},
		{
			name:     "step fails with its own error after cancel",
			cancelIn: 1,
			stepErr:  errors.New("kubectl failed"),
			want: []stepRecord{
				{"one", reports.Fail, "kubectl failed (run interrupted: context canceled)"},
				{"two", reports.Skipped, ""},
				{"three", reports.Skipped, ""},
			},
			wantErr: []string{`step 1 "one": kubectl failed (run interrupted`},
		},
		{
			name:     "step returns the context's error",
			cancelIn: 1,
			stepErr:  context.Canceled,
			want: []stepRecord{
				{"one", reports.Fail, "context canceled"},
				{"two", reports.Skipped, ""},
				{"three", reports.Skipped, ""},
			},
			wantErr: []string{`step 1 "one": context canceled`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancelIn == 0 {
				cancel()
			}
			var ran []string
			mk := func(i int, name string) Step {
				return Step{Name: name, Run: func(context.Context, *StepContext) error {
					ran = append(ran, name)
					if i == tc.cancelIn {
						cancel()
						return tc.stepErr
					}
					return nil
				}}
			}
			run := &reports.Run{}
			r := &Runner{Run: run, ArtifactsDir: t.TempDir()}
			err := r.Execute(ctx, []Step{mk(1, "one"), mk(2, "two"), mk(3, "three")})
			if err == nil {
				t.Fatal("Execute() = nil after cancel")
			}
			if !errors.Is(err, context.Canceled) && tc.stepErr == nil {
				t.Errorf("Execute() = %v does not wrap context.Canceled", err)
			}
			for _, sub := range tc.wantErr {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("Execute() = %q, want it to contain %q", err, sub)
				}
			}
			if len(run.Steps) != len(tc.want) {
				t.Fatalf("recorded %d steps, want %d", len(run.Steps), len(tc.want))
			}
			var wantRan []string
			for i, w := range tc.want {
				got := run.Steps[i]
				if got.Name != w.name || got.Verdict != w.verdict {
					t.Errorf("step %d = %q %q, want %q %q", i+1, got.Name, got.Verdict, w.name, w.verdict)
				}
				if w.errSub != "" && !strings.Contains(got.Error, w.errSub) {
					t.Errorf("step %d error %q, want it to contain %q", i+1, got.Error, w.errSub)
				}
				if i+1 <= tc.cancelIn {
					wantRan = append(wantRan, w.name)
				}
			}
			if !slices.Equal(ran, wantRan) {
				t.Errorf("ran %q, want %q (a step must not start after cancel)", ran, wantRan)
			}
		})
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ in, want string }{
		{"setup", "setup"},
		{"Stop kubelet & force-delete pods!", "stop-kubelet-force-delete-pods"},
		{"  --leading and trailing--  ", "leading-and-trailing"},
		{"v1.36 -> v1.37", "v1-36-v1-37"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := slug(tc.in); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A step's panic keeps its stack as the step's evidence: the error alone
// ("invalid memory address") does not say where the harness broke.
func TestPanicStackIsEvidence(t *testing.T) {
	run := &reports.Run{}
	r := &Runner{Run: run, ArtifactsDir: t.TempDir()}
	_ = r.Execute(t.Context(), []Step{{Name: "derefs nil", Run: func(context.Context, *StepContext) error {
		var m map[string]int
		m["x"] = 1
		return nil
	}}})
	if len(run.Steps) != 1 || len(run.Steps[0].Evidence) != 1 {
		t.Fatalf("steps = %+v; want one step with the panic's evidence", run.Steps)
	}
	if e := run.Steps[0].Evidence[0]; !strings.Contains(e.Text, "assignment to entry in nil map") || !strings.Contains(e.Text, "scenario_test.go") {
		t.Errorf("the panic's evidence %q names neither the panic nor the test's frame", e.Text)
	}
}

// A hop whose precondition cannot be restored after a known bug on the
// hop before is not reached: hop 1's expected deviation gives the run's
// verdict, the later hops' steps are skipped with why, and the steps
// outside hops (the workload's deletion) still run. The same step failing
// plainly fails the run, so the verdict is the not-reached one's own.
func TestNotReachedHopLeavesTheVerdictToJudgedHops(t *testing.T) {
	pass := func(context.Context, *StepContext) error { return nil }
	knownBug := func(_ context.Context, sc *StepContext) error {
		sc.Deviation(reports.Deviation{Check: "catalogue fault pvc-terminating", Expected: "known bug", Observed: "pod web-0: its volume unmounted",
			Reason: "known bug PR #130335 reproduces on kubelet v1.31.0"})
		return nil
	}
	steps := func(restore func(context.Context, *StepContext) error) ([]Step, *bool) {
		deleted := false
		return []Step{
			{Name: "deploy", Run: pass},
			{Hop: 1, Name: "hop 1: stop kubelet", Run: pass},
			{Hop: 1, Name: "hop 1: catalogue fault pvc-terminating on kubelet v1.31.0", Run: knownBug},
			{Hop: 2, Name: "hop 2: restore the pods", Run: restore},
			{Hop: 2, Name: "hop 2: stop kubelet", Run: func(context.Context, *StepContext) error { return errors.New("ran after its hop was not reached") }},
			{Hop: 3, Name: "hop 3: stop kubelet", Run: func(context.Context, *StepContext) error { return errors.New("ran after hop 2 was not reached") }},
			{Name: "delete the StatefulSet", Run: func(context.Context, *StepContext) error { deleted = true; return nil }},
		}, &deleted
	}
	cause := "kubelet v1.31.0's known bug left pod web-0 (uid u0): its volume pv-0 unmounted, and restoring them failed: pods not gone"

	run := &reports.Run{Plan: []string{"v1.34.4", "v1.31.0", "v1.34.4", "v1.31.0"}, Hops: []reports.Hop{{Number: 1, From: "v1.34.4", To: "v1.31.0"}}}
	list, deleted := steps(func(context.Context, *StepContext) error {
		run.Unreached = append(run.Unreached, reports.UnreachedHop{Number: 2, From: "v1.31.0", To: "v1.34.4", Reason: cause})
		return fmt.Errorf("%w: %s", ErrNotReached, cause)
	})
	err := (&Runner{Run: run}).Execute(t.Context(), list)
	if err != nil {
		t.Fatalf("Execute with a hop not reached: %v, want nil (nothing was judged on it)", err)
	}
	if !*deleted {
		t.Error("the step outside hops did not run after the hop was not reached")
	}
	got := map[string]reports.Step{}
	for _, s := range run.Steps {
		got[s.Name] = s
	}
	if s := got["hop 2: restore the pods"]; s.Verdict != reports.Skipped || !strings.Contains(s.Error, cause) {
		t.Errorf("the restore step: verdict %s, error %q; want skipped with its cause", s.Verdict, s.Error)
	}
	for _, name := range []string{"hop 2: stop kubelet", "hop 3: stop kubelet"} {
		if s := got[name]; s.Verdict != reports.Skipped || len(s.Notes) == 0 || !strings.Contains(s.Notes[0], "hop 2 cannot be reached") {
			t.Errorf("step %q: verdict %s, notes %q; want skipped, saying hop 2 cannot be reached", name, s.Verdict, s.Notes)
		}
	}
	run.ComputeVerdict()
	if run.Verdict != reports.PassWithExpectedDeviations || run.Failure != "" {
		t.Errorf("verdict %s (failure %q), want %s from hop 1's known bug", run.Verdict, run.Failure, reports.PassWithExpectedDeviations)
	}
	if r := reports.SkipReason(got["hop 2: restore the pods"]); !strings.HasPrefix(r, "not reached: ") {
		t.Errorf("skip reason of the restore step %q, want it not reached", r)
	}

	failed := &reports.Run{Hops: []reports.Hop{{Number: 1, From: "v1.34.4", To: "v1.31.0"}}}
	list, deleted = steps(func(context.Context, *StepContext) error { return errors.New(cause) })
	if err := (&Runner{Run: failed}).Execute(t.Context(), list); err == nil {
		t.Error("Execute with a plain failure of the restore step: nil error")
	}
	failed.ComputeVerdict()
	if failed.Verdict != reports.Fail || *deleted {
		t.Errorf("a plain failure: verdict %s, steps outside hops ran %t; want fail, and nothing after it run", failed.Verdict, *deleted)
	}
}
