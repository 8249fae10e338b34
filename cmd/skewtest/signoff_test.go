package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/reports/scale"
	"sigs.k8s.io/skewtest/reports/signoff"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// failedRun is a run whose only hop failed: the page must still be
// written, and say FAIL.
func failedRun() *reports.Run {
	r := &reports.Run{ID: "20261201-010000-abcd", Scenario: reports.ReconstructionScenarioPrefix + "csi", Provider: "local",
		Plan: []string{"v1.37.2", "v1.36.3"}, Started: time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC),
		Hops: []reports.Hop{{Number: 1, From: "v1.37.2", To: "v1.36.3", Direction: "downgrade", Verdict: reports.Fail,
			Timings: []reports.Timing{{Phase: reports.PhaseKubeletStop, Duration: 50 * time.Millisecond}}}}}
	r.ComputeVerdict()
	return r
}

func TestSignoffCommand(t *testing.T) {
	dir := t.TempDir()
	if _, err := reports.WriteAll(filepath.Join(dir, "20261201-010000-abcd"), failedRun()); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "page")
	var stdout bytes.Buffer
	// Flags after DIR, as the Makefile passes them.
	if err := signoffCmd(t.Context(), streams{out: &stdout}, []string{dir, "-out", out}); err != nil {
		t.Fatalf("signoff of a failed run = %v, want the page written and no error", err)
	}
	if !strings.HasPrefix(stdout.String(), "FAIL: 1 run, 1 cell (1 fail)") {
		t.Errorf("stdout = %q, want the verdict line first", stdout.String())
	}
	for _, name := range []string{signoff.MarkdownFileName, signoff.HTMLFileName} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "20261201-010000-abcd") {
			t.Errorf("%s does not list the run", name)
		}
	}
	// A baseline that is the same night: compared, no warning.
	stdout.Reset()
	if err := signoffCmd(t.Context(), streams{out: &stdout}, []string{"-baseline", dir, dir, "-out", out}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stdout.String(), "warning") {
		t.Errorf("a night compared with itself warned: %s", stdout.String())
	}
}

func TestSignoffCommandBadInput(t *testing.T) {
	empty := t.TempDir()
	good := t.TempDir()
	if _, err := reports.WriteAll(filepath.Join(good, "r"), failedRun()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no dir", nil, []string{"usage: skewtest signoff DIR"}},
		{"two dirs", []string{empty, good}, []string{"want one runs dir, got 2"}},
		{"no run.json", []string{empty}, []string{"no run.json under " + empty, "make test-skew"}},
		{"missing dir", []string{filepath.Join(empty, "nope")}, []string{filepath.Join(empty, "nope")}},
		{"baseline without runs", []string{good, "-baseline", empty}, []string{"-baseline", "no run.json under " + empty}},
		{"unknown flag", []string{good, "-nope"}, []string{"-nope", "usage: skewtest signoff"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "page")
			err := signoffCmd(t.Context(), streams{out: &bytes.Buffer{}}, append(tc.args, "-out", out))
			if !errors.Is(err, exitcode.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid (exit 2)", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("bad input left %s behind", out)
			}
		})
	}
}

func TestSignoffExitCode(t *testing.T) {
	empty := t.TempDir()
	r := runCLI(t, nil, "signoff", empty)
	if r.code != 2 || !strings.Contains(r.stderr, "no run.json under "+empty) {
		t.Errorf("skewtest signoff EMPTYDIR: exit %d, stderr %q; want 2 naming the dir", r.code, r.stderr)
	}
}

// A bench-scale result under DIR goes on the page: its table, and its
// chart linked from the Markdown and drawn in the HTML; one that cannot
// be read is bad input naming it.
func TestSignoffCommandWithBenchScale(t *testing.T) {
	dir := t.TempDir()
	if _, err := reports.WriteAll(filepath.Join(dir, "20261201-010000-abcd"), failedRun()); err != nil {
		t.Fatal(err)
	}
	r := &scale.Result{Started: time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC), Provider: "local", Plan: []string{"v1.37.2", "v1.34.4"}, Command: "skewtest bench-scale", PollInterval: 250 * time.Millisecond}
	for _, n := range []int{10, 30, 60} {
		r.Points = append(r.Points, scale.Point{Mode: "tmpfs", Shape: scale.ShapePods, Volumes: n, Pods: n, VolumesPerPod: 1, Hop: 1, Kubelet: "v1.34.4", RunID: "r",
			Values: map[string]float64{reports.PhasePodDirsGone: 4 + 0.1*float64(n)}})
	}
	r.FitAll()
	res := filepath.Join(dir, "bench-scale", "20261203-180000")
	if _, err := scale.Write(res, r); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "page")
	var stdout bytes.Buffer
	if err := signoffCmd(t.Context(), streams{out: &stdout}, []string{dir, "-out", out}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, signoff.MarkdownFileName))
	if err != nil {
		t.Fatal(err)
	}
	chart, _ := filepath.Rel(out, filepath.Join(res, "pods-tmpfs.svg"))
	for _, want := range []string{"## Reconstruction at scale", "![tmpfs · N pods, one volume each](" + filepath.ToSlash(chart) + ")", "| 60 | 60 × 1 | hop 1 → v1.34.4 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("signoff.md lacks %q", want)
		}
	}
	html, err := os.ReadFile(filepath.Join(out, signoff.HTMLFileName))
	if err != nil || !strings.Contains(string(html), `<svg xmlns="http://www.w3.org/2000/svg" class="scale-chart"`) {
		t.Errorf("signoff.html does not draw the chart (%v)", err)
	}

	if err := os.WriteFile(filepath.Join(res, scale.JSONFileName), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = signoffCmd(t.Context(), streams{out: &stdout}, []string{dir, "-out", out})
	if !errors.Is(err, exitcode.ErrInvalid) || !strings.Contains(err.Error(), scale.JSONFileName) {
		t.Errorf("a broken bench-scale result: %v, want bad input naming it", err)
	}
}

// writeMeasurement writes a mutation measurement under dir as skewtest
// mutants does: one mutant, which survived its one run (written beside
// the measurement, its hop as quick as given), and no control runs.
func writeMeasurement(t *testing.T, dir string, stop time.Duration) {
	t.Helper()
	run := failedRun()
	run.ID, run.Verdict = "20261205-200000-mrun", reports.Pass
	run.Hops[0].Verdict = reports.Pass
	run.Hops[0].Timings = []reports.Timing{{Phase: reports.PhaseKubeletStop, Duration: stop}}
	if _, err := reports.WriteAll(filepath.Join(dir, run.ID), run); err != nil {
		t.Fatal(err)
	}
	m := &reports.Mutation{ID: "20261205-200000-mut1", Started: time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC), Provider: "local", Base: "v1.37.2", Partner: "v1.36.3",
		Placements: []reports.MutationPlacement{{Name: "upgrade-target"}}, Entries: []string{"reboot"},
		Mutants: []reports.MutantRecord{{Name: "quiet", Breaks: "Nothing the checks see.", Outcome: reports.MutantSurvived,
			Placements: []reports.MutantPlacementRecord{{Placement: "upgrade-target", Outcome: reports.MutantSurvived,
				Cells: []reports.MutantCell{{Entry: "reboot", Outcome: reports.CellSame, Verdict: reports.Pass, Report: run.ID}}}}}}}
	if _, err := reports.WriteMutation(filepath.Join(dir, "mutation-"+m.ID), m); err != nil {
		t.Fatal(err)
	}
}

// A mutation measurement under DIR goes on the page and beside the
// verdict, which stays the runs' (its mutant's run left out), here and in
// the baseline; a dir holding only a measurement makes a page; a
// mutation.json that cannot be read is bad input naming it.
func TestSignoffCommandWithMutation(t *testing.T) {
	dir := t.TempDir()
	if _, err := reports.WriteAll(filepath.Join(dir, "20261201-010000-abcd"), failedRun()); err != nil {
		t.Fatal(err)
	}
	writeMeasurement(t, dir, 50*time.Millisecond)
	// A baseline whose only run is a mutant's, far quicker than tonight's:
	// compared with it, tonight would warn.
	base := t.TempDir()
	writeMeasurement(t, base, time.Millisecond)
	slow := failedRun()
	slow.ID = "20261201-020000-slow"
	slow.Hops[0].Timings = []reports.Timing{{Phase: reports.PhaseKubeletStop, Duration: 5 * time.Second}}
	if _, err := reports.WriteAll(filepath.Join(dir, slow.ID), slow); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "page")
	var stdout bytes.Buffer
	if err := signoffCmd(t.Context(), streams{out: &stdout}, []string{dir, "-baseline", base, "-out", out}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"FAIL: 2 runs, 1 cell (1 fail); 0 of 1 mutant killed in every placement (1 survived)\n",
		"warning: the checks did not kill mutant quiet: survived (measurement 20261205-200000-mut1)\n",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout = %q, want %q in it", stdout.String(), want)
		}
	}
	if strings.Contains(stdout.String(), "slower than the baseline") {
		t.Errorf("compared with a mutant's run: %s", stdout.String())
	}
	for _, name := range []string{signoff.MarkdownFileName, signoff.HTMLFileName} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "How strong the verdicts are") || !strings.Contains(string(b), "quiet") {
			t.Errorf("%s lacks the measurement", name)
		}
	}

	stdout.Reset()
	if err := signoffCmd(t.Context(), streams{out: &stdout}, []string{base}); err != nil {
		t.Fatalf("signoff of a measurement alone = %v, want a page", err)
	}
	if !strings.HasPrefix(stdout.String(), "FAIL: 0 runs, 0 cells; 0 of 1 mutant killed") {
		t.Errorf("stdout = %q, want no runs and the score", stdout.String())
	}

	bad := filepath.Join(dir, "mutation-20261205-200000-mut1", reports.MutationJSONFileName)
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := signoffCmd(t.Context(), streams{out: &stdout}, []string{dir, "-out", filepath.Join(t.TempDir(), "page")})
	if !errors.Is(err, exitcode.ErrInvalid) || !strings.Contains(err.Error(), bad) {
		t.Errorf("a broken mutation.json: %v, want bad input naming %s", err, bad)
	}
}
