package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func fakeMutation() *Mutation {
	cells := func(outcomes ...string) []MutantCell {
		var out []MutantCell
		for i, o := range outcomes {
			out = append(out, MutantCell{Entry: []string{"reboot", "pvc-terminating"}[i], Outcome: o, Verdict: Pass, Report: "20261205-1/run-" + o})
		}
		return out
	}
	start := time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)
	return &Mutation{ID: "m1", Started: start, Finished: start.Add(20 * time.Minute), Provider: "local", Base: "v1.37.2", Partner: "v1.36.3",
		Placements: []MutationPlacement{{Name: "upgrade-target", Says: "the mutant is the upgrade target", Plan: "v1.37.2 → v1.36.3 → kubelet under test"}},
		Entries:    []string{"reboot", "pvc-terminating"},
		Control:    MutantRecord{Name: "control", Placements: []MutantPlacementRecord{{Placement: "upgrade-target", Cells: cells(CellSame, CellSame)}}},
		Mutants: []MutantRecord{
			{Name: "revert-130335", Area: "volume manager", Breaks: "Unmounts a running pod's volume.", Reverts: "PR #130335", Outcome: MutantKilled,
				Placements: []MutantPlacementRecord{{Placement: "upgrade-target", Outcome: MutantKilled, KilledBy: "pvc-terminating: pod web-0 was unmounted", Cells: cells(CellSame, MutantKilled)}}},
			{Name: "quiet", Area: "CSI plugin", Breaks: "Nothing anyone sees.", Reverts: "none", Outcome: MutantSurvived,
				Placements: []MutantPlacementRecord{{Placement: "upgrade-target", Outcome: MutantSurvived, Cells: cells(CellSame, CellSame)}}},
			{Name: "same", Area: "emptyDir", Breaks: "Changes nothing kept.", Reverts: "none", Equivalent: "it renames a local variable", Outcome: MutantEquivalent},
		},
		BatchTook: 10 * time.Minute, SumOfRuns: 60 * time.Minute, Builds: 5 * time.Minute}
}

// The page gives the score (equivalent mutants not scored), what killed
// each mutant, and a grid per placement whose cells link the runs.
func TestWriteMutation(t *testing.T) {
	m := fakeMutation()
	if k, s := m.Score(); k != 1 || s != 2 {
		t.Errorf("Score() = %d of %d, want 1 of 2 (the equivalent one not scored)", k, s)
	}
	var b bytes.Buffer
	if err := WriteMutationMarkdown(&b, m); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"# skewtest mutation score: 1 of 2 mutants killed",
		"one after another: 3600.0s",
		"pvc-terminating: pod web-0 was unmounted",
		"🧟 survived",
		"Equivalent: it renames a local variable",
		"| `revert-130335` | [·](../20261205-1/run-same/report.md) | [💀](../20261205-1/run-killed/report.md) |",
		"| `control` | [✅](../20261205-1/run-same/report.md)",
		// Where no run killed it, its runs like the control's survived.
		"| `quiet` | [🧟](../20261205-1/run-same/report.md) | [🧟](../20261205-1/run-same/report.md) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("mutation.md lacks %q:\n%s", want, md)
		}
	}
	dir := t.TempDir()
	paths, err := WriteMutation(dir, m)
	if err != nil || len(paths) != 2 {
		t.Fatalf("WriteMutation: %v %v", paths, err)
	}
	back, err := ReadMutation(filepath.Join(dir, MutationJSONFileName))
	if err != nil {
		t.Fatal(err)
	}
	if back.Dir != dir || back.RunDir("20261205-1/run-killed") != filepath.Join(filepath.Dir(dir), "20261205-1", "run-killed") {
		t.Errorf("read back with Dir %q, RunDir %q; want %s and the run beside it", back.Dir, back.RunDir("20261205-1/run-killed"), dir)
	}
	if back.Mutants[0].Placements[0].KilledBy != m.Mutants[0].Placements[0].KilledBy || back.SumOfRuns != m.SumOfRuns {
		t.Errorf("mutation.json did not round-trip: %+v", back)
	}
}

// FindMutations reads every measurement under a dir, oldest first, once
// per ID, not through the latest symlink; one that cannot be read is an
// error naming it and the fix.
func TestFindMutations(t *testing.T) {
	root := t.TempDir()
	older, newer := fakeMutation(), fakeMutation()
	newer.ID, newer.Started = "m2", older.Started.Add(time.Hour)
	for dir, m := range map[string]*Mutation{"a/mutation-m2": newer, "b/mutation-m1": older, "c/copy-of-m1": older} {
		if _, err := WriteMutation(filepath.Join(root, dir), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "latest")); err != nil {
		t.Fatal(err)
	}
	found, err := FindMutations(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range found {
		got = append(got, m.ID+" "+strings.TrimPrefix(m.Dir, root))
	}
	if want := []string{"m1 /b/mutation-m1", "m2 /a/mutation-m2"}; strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("FindMutations = %v, want %v", got, want)
	}
	if found, err := FindMutations(t.TempDir()); err != nil || len(found) != 0 {
		t.Errorf("FindMutations(empty dir) = %v, %v; want none", found, err)
	}
	bad := filepath.Join(root, "d", MutationJSONFileName)
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FindMutations(root); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "make test-mutants") {
		t.Errorf("FindMutations with a broken file = %v, want an error naming %s and the fix", err, bad)
	}
}

// A metric the kubelet's version registers but its /metrics lacks is a
// failure, and the report says it is missing, not "not exposed".
func TestAbsentMetricText(t *testing.T) {
	missing := Metric{Name: "reconstruct_volume_operations_total", Verdict: Fail, Expected: ">= 2"}
	if got := metricText(missing); !strings.Contains(got, "missing from /metrics") {
		t.Errorf("metricText = %q", got)
	}
	if got := metricText(Metric{Name: "x", Verdict: Pass}); !strings.Contains(got, "not exposed") {
		t.Errorf("metricText of a metric the version lacks = %q", got)
	}
}
