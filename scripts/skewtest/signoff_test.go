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
	"sigs.k8s.io/skewtest/reports/signoff"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
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
	if err := signoffCmd(&stdout, []string{dir, "-out", out}); err != nil {
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
	if err := signoffCmd(&stdout, []string{"-baseline", dir, dir, "-out", out}); err != nil {
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
			err := signoffCmd(&bytes.Buffer{}, append(tc.args, "-out", out))
			if !errors.Is(err, skewrun.ErrInvalid) {
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
