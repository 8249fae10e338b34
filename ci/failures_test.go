package ci

import (
	"os"
	"os/exec" // runs the repository's own .ci/failures script, as .ci/run does
	"path/filepath"
	"strings"
	"testing"
)

// Logs of failed steps as the tools write them: go test's, and Ginkgo's in
// colour, with a teardown spec's deliberate "FAIL (plan" verdict that is
// not a failure.
const (
	goTestLog = `ok  	sigs.k8s.io/skewtest/clusters/local	12.1s
--- FAIL: TestFreePorts (0.02s)
    hostports_test.go:41: port 32001 handed out twice
--- FAIL: TestDaemon (68.26s)
    --- FAIL: TestDaemon/Seed (15.58s)
        time=2026-12-05T23:40:01Z level=INFO msg="starting dockerd"
        time=2026-12-05T23:40:02Z level=INFO msg="dockerd is up"
        time=2026-12-05T23:40:03Z level=INFO msg="stopping dockerd"
        dockerd_test.go:140: Stop took 1.738s
FAIL
FAIL	sigs.k8s.io/skewtest/clusters/internal/hostports	0.031s
ok  	sigs.k8s.io/skewtest/reports	0.2s
make: *** [Makefile:88: test] Error 1
`
	ginkgoLog = "  skewtest reconstruction-csi: FAIL (plan v1.37.2 → v1.36.3, on local node skewtest-worker, took 11.9s).\n" +
		"\x1b[38;5;10m• [36.329 seconds]\x1b[0m\n" +
		"------------------------------\n" +
		"\x1b[38;5;9m• [FAILED] [149.462 seconds]\x1b[0m\n" +
		"kubelet volume reconstruction across versions [It] runs the catalogue as one batch\n" +
		"/src/suites/reconstruction/batch_test.go:60\n" +
		"\n" +
		"  time=2026-12-04T17:26:16Z level=INFO msg=\"trail done\"\n" +
		"  \x1b[38;5;9m[FAILED] catalogue entry vol-data-empty: the old pod dir is still there after 90s\x1b[0m\n" +
		"  In [It] at: /src/suites/reconstruction/batch_test.go:120 @ 12/04/26 17:26:16.1\n" +
		"Summarizing 1 Failure:\n" +
		"  [FAIL] kubelet volume reconstruction across versions [It] runs the catalogue as one batch\n" +
		"  /src/suites/reconstruction/batch_test.go:120\n" +
		"make: *** [Makefile:93: test-skew] Error 1\n"
)

func runFailures(t *testing.T, env []string, logs ...string) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join(repoRoot, ".ci", "failures"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, logs...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

func TestFailuresSaysWhatFailed(t *testing.T) {
	dir := t.TempDir()
	goLog := filepath.Join(dir, "04-make-test.log")
	gkLog := filepath.Join(dir, "06-make-test-skew.log")
	for p, s := range map[string]string{goLog: goTestLog, gkLog: ginkgoLog} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := runFailures(t, nil, goLog, gkLog, filepath.Join(dir, "missing.log"))
	for _, want := range []string{
		"--- 04-make-test (whole log: " + goLog + ")",
		"    --- FAIL: TestFreePorts (0.02s)",
		"hostports_test.go:41: port 32001 handed out twice",
		// the test's own line, after more log lines of the code under
		// test than the context a failure line takes
		"dockerd_test.go:140: Stop took 1.738s",
		"FAIL\tsigs.k8s.io/skewtest/clusters/internal/hostports",
		"make: *** [Makefile:88: test] Error 1",
		"--- 06-make-test-skew",
		"[FAILED] catalogue entry vol-data-empty: the old pod dir is still there after 90s",
		"In [It] at: /src/suites/reconstruction/batch_test.go:120",
		"[FAIL] kubelet volume reconstruction across versions [It] runs the catalogue as one batch",
		"--- missing",
		"(no log)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf(".ci/failures does not say %q; it said:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"\x1b[", "FAIL (plan", "time=", "ok  \tsigs.k8s.io/skewtest/reports"} {
		if strings.Contains(out, unwanted) {
			t.Errorf(".ci/failures says %q, which is not a failure or not plain text; it said:\n%s", unwanted, out)
		}
	}
	if n := strings.Count(out, "[FAILED] catalogue entry vol-data-empty"); n != 1 {
		t.Errorf("the failure message is said %d times, want once:\n%s", n, out)
	}
}

func TestFailuresIsBounded(t *testing.T) {
	var b strings.Builder
	for range 100 {
		b.WriteString(goTestLog)
	}
	log := filepath.Join(t.TempDir(), "04-make-test.log")
	if err := os.WriteFile(log, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runFailures(t, []string{"FAILURE_LINES=5"}, log)
	// The heading and five lines.
	if lines := strings.Count(out, "\n"); lines != 6 {
		t.Errorf(".ci/failures with FAILURE_LINES=5 said %d lines, want 6:\n%s", lines, out)
	}
}

// TestCIRunEndsWithFailures checks that .ci/run says what failed after its
// last step and before its last line, where a CI system that keeps only
// the tail of a job's output still shows it.
func TestCIRunEndsWithFailures(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	lastStep := strings.LastIndex(s, "\nstep ")
	summary := strings.Index(s, ".ci/failures ")
	took := strings.LastIndex(s, "CI took")
	if lastStep < 0 || summary < lastStep || took < summary {
		t.Errorf(".ci/run: want its steps, then .ci/failures on the failed steps' logs, then the time it took (step at %d, failures at %d, took at %d)",
			lastStep, summary, took)
	}
}
