package reports

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// readRealRun reads a run.json cut from a real run (testdata/runs), so
// that a test describes a run the harness produced.
func readRealRun(t *testing.T, name string) *Run {
	t.Helper()
	f, err := os.Open("testdata/runs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	run, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// realRunFunc reads a real run for the golden fixtures, which have no
// *testing.T: a missing or broken file panics the test binary, naming it.
func realRunFunc(name string) func() *Run {
	return func() *Run {
		b, err := os.ReadFile("testdata/runs/" + name)
		if err != nil {
			panic(err)
		}
		run, err := ReadJSON(bytes.NewReader(b))
		if err != nil {
			panic(fmt.Sprintf("testdata/runs/%s: %v", name, err))
		}
		return run
	}
}

// A real local-volume run records each deviating metric twice: on the hop
// (the metric row) and on the metrics step ("metric NAME"). The report
// lists it once.
func TestExpectedDeviationsOncePerMetric(t *testing.T) {
	run := readRealRun(t, "local-volume.run.json")
	stepDevs, metricDevs := 0, 0
	for _, s := range run.Steps {
		stepDevs += len(s.Deviations)
	}
	for _, h := range run.Hops {
		for _, m := range h.Metrics {
			if m.Verdict == PassWithExpectedDeviations {
				metricDevs++
			}
		}
	}
	if stepDevs == 0 || metricDevs == 0 {
		t.Fatalf("the real run has %d step and %d metric deviations; the test needs both", stepDevs, metricDevs)
	}
	got := ExpectedDeviations(run)
	if len(got) != metricDevs {
		t.Errorf("%d expected deviations listed, want %d (one per deviating metric):", len(got), metricDevs)
		for _, d := range got {
			t.Logf("  %s | %s", d.Where, d.Check)
		}
	}
	seen := map[string]bool{}
	for _, d := range got {
		k := d.Where + "|" + d.Check
		if seen[k] {
			t.Errorf("listed twice: %s", k)
		}
		seen[k] = true
	}
}
