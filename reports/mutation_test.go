package reports

import (
	"bytes"
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
	if back.Mutants[0].Placements[0].KilledBy != m.Mutants[0].Placements[0].KilledBy || back.SumOfRuns != m.SumOfRuns {
		t.Errorf("mutation.json did not round-trip: %+v", back)
	}
}
