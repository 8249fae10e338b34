package signoff

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/reports"
)

// realRun reads a run.json cut from a real run (reports/testdata/runs).
func realRun(t *testing.T, name string) *reports.Run {
	t.Helper()
	f, err := os.Open("../testdata/runs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := reports.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A real night of a sign-off plan on local volumes and a catalogue fault:
// each scenario gets a grid of its own, the fault's hops do not land in
// the sign-off plan's cells, and the local-volume deviations are listed
// once each.
func TestRealRunsGroupedByScenario(t *testing.T) {
	dir := t.TempDir()
	local, reboot := realRun(t, "local-volume.run.json"), realRun(t, "catalogue-reboot.run.json")
	writeRuns(t, dir, []*reports.Run{local, reboot})
	srcs, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := Build(srcs, dir)
	var titles []string
	for _, m := range p.Matrices {
		titles = append(titles, m.Title())
	}
	want := []string{"local · csi · scenario reboot", "local · local"}
	if strings.Join(titles, "|") != strings.Join(want, "|") {
		t.Errorf("matrices %q, want %q", titles, want)
	}
	for _, m := range p.Matrices {
		n := 0
		for _, row := range m.Cells {
			for _, c := range row {
				n += len(c.Hops)
			}
		}
		if n != 2 {
			t.Errorf("matrix %s holds %d hops, want its run's 2", m.Title(), n)
		}
	}
	checks := map[string]int{}
	for _, d := range p.Deviations {
		checks[d.Check]++
	}
	for c, n := range checks {
		if n > 1 {
			t.Errorf("deviation %s listed %d times", c, n)
		}
	}
	if len(p.Deviations) != 2 {
		t.Errorf("%d deviation rows, want the 2 local-volume metrics: %+v", len(p.Deviations), p.Deviations)
	}
}
