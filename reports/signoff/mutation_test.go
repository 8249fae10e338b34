package signoff

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/reports"
)

// cellReport is the run dir of a kubelet's cell in a placement.
func cellReport(t *testing.T, m *reports.Mutation, kubelet, placement, entry string) string {
	t.Helper()
	for _, r := range append([]reports.MutantRecord{m.Control}, m.Mutants...) {
		if r.Name != kubelet {
			continue
		}
		for _, p := range r.Placements {
			for _, c := range p.Cells {
				if p.Placement == placement && c.Entry == entry {
					return c.Report
				}
			}
		}
	}
	t.Fatalf("no cell %s %s %s", kubelet, placement, entry)
	return ""
}

// The page shows the measurement beside the night's runs: its score, the
// equivalent mutant with its reason, what killed each mutant, the
// survivors, and each placement's grid linked to the runs; the mutants
// it let through head the page. The runs' verdict and counts are the
// night's alone.
func TestMutationSection(t *testing.T) {
	night, _ := nightPage(t)
	p, dir, m := nightWithMutation(t)
	if len(p.Runs) != len(night.Runs) || p.Verdict != night.Verdict || p.Cells() != night.Cells() {
		t.Errorf("with the measurement: %d runs, %s, %d cells; want the night's %d runs, %s, %d cells (the mutants' runs left out)",
			len(p.Runs), p.Verdict, p.Cells(), len(night.Runs), night.Verdict, night.Cells())
	}
	var md, html bytes.Buffer
	if err := writeMarkdown(&md, p); err != nil {
		t.Fatal(err)
	}
	if err := writeHTML(&html, p); err != nil {
		t.Fatal(err)
	}
	killedRun := cellReport(t, m, "revert-130335-pvc-protection", "upgrade-target", "pvc-terminating")
	survivedRun := cellReport(t, m, "reconstruct-counter-never-incremented", "middle", "reboot")
	mdText := md.String()
	firstLine, _, _ := strings.Cut(mdText, "\n")
	for _, want := range []string{night.VerdictLine(), "; 14 of 17 mutants killed in every placement (1 survived, 1 masked, 1 undecided)"} {
		if !strings.Contains(firstLine, want) {
			t.Errorf("first line %q lacks %q", firstLine, want)
		}
	}
	for _, want := range []string{
		"> [!WARNING]\n> The checks did not kill 3 mutants: 14 of 17 mutants killed in every placement (1 survived, 1 masked, 1 undecided).",
		"> - `reconstruct-counter-never-incremented` 🧟 survived (measurement `20261205-200000-mut1`): The reconstruct counter never moves.",
		"(#how-strong-the-verdicts-are)",
		"## How strong the verdicts are\n",
		"**14 of 17 mutants killed in every placement.** 133 runs as one batch",
		"[Its page](mutation-20261205-200000-mut1/mutation.md)",
		"[The batch's schedule](20261205-200000-mut1-batch/batch.md)",
		"- `emptydir-memory-medium-from-spec`: the medium it reads is the same on every kubelet of the plan",
		"upgrade-target: pvc-terminating: hop 2: ",
		"| `reconstruct-counter-never-incremented` | metrics | The reconstruct counter never moves. | none | 🧟 survived |  |",
		"#### middle\n",
		"[💀](" + killedRun + "/report.md)",
		"[🧟](" + survivedRun + "/report.md)",
		"| `control` | [✅](",
	} {
		if !strings.Contains(mdText, want) {
			t.Errorf("signoff.md lacks %q", want)
		}
	}
	if i, j := strings.Index(mdText, "[!WARNING]\n> The checks did not kill"), strings.Index(mdText, "## "); i < 0 || i > j {
		t.Error("the mutants not killed are not above the matrices")
	}
	h := html.String()
	for _, want := range []string{
		`<div class="mutant-score weak" id="mutant-score"><a href="#mutation">14 of 17 mutants killed in every placement (1 survived, 1 masked, 1 undecided)</a></div>`,
		`<section class="warn" id="mutants-through"`,
		`<a href="#mutation-20261205-200000-mut1-reconstruct-counter-never-incremented"><code>reconstruct-counter-never-incremented</code></a> <span class="badge mo-survived">= survived</span>`,
		`<h2 id="mutation">How strong the verdicts are</h2>`,
		`<p class="score"><strong>14 of 17 mutants killed in every placement</strong></p>`,
		`<li class="equivalent"><code>emptydir-memory-medium-from-spec</code>: the medium it reads is the same on every kubelet of the plan</li>`,
		`<strong>upgrade-target</strong>: pvc-terminating: hop 2: `,
		`<tr id="mutation-20261205-200000-mut1-reconstruct-counter-never-incremented" data-outcome="survived">`,
		`<td class="mc mc-killed" data-look="killed" data-entry="pvc-terminating" title="pvc-terminating: killed: hop 2: `,
		`<a href="` + killedRun + `/report.md" aria-label="pvc-terminating: killed: hop 2: `,
		`<td class="mc mc-survived" data-look="survived" data-entry="reboot" title="reboot: survived"><a href="` + survivedRun + `/report.md"`,
		`<td class="mc mc-masked" data-look="masked"`,
		`<td class="mc mc-control" data-look="same" data-entry="reboot" title="reboot: pass with expected deviations">`,
		`<span>local-volume,<wbr>subpath,<wbr>emptydir-memory,`,
	} {
		if !strings.Contains(h, want) {
			t.Errorf("signoff.html lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, killedRun, reports.MarkdownFileName)); err != nil {
		t.Errorf("the grid links a report that is not there: %v", err)
	}
}

// A page without a measurement has no mutation section, warning or
// score.
func TestNoMutationSection(t *testing.T) {
	p, _ := nightPage(t)
	var md, html bytes.Buffer
	if err := writeMarkdown(&md, p); err != nil {
		t.Fatal(err)
	}
	if err := writeHTML(&html, p); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{md.String(), p.VerdictLine()} {
		if strings.Contains(s, "mutant") || strings.Contains(s, "How strong") {
			t.Errorf("a page without a measurement speaks of mutants: %s", s)
		}
	}
	for _, id := range []string{`id="mutant-score"`, `id="mutants-through"`, `id="mutation"`, `class="mgrid"`} {
		if strings.Contains(html.String(), id) {
			t.Errorf("signoff.html without a measurement has %s", id)
		}
	}
}

// A dir holding only a measurement (its control's and mutants' runs
// beside it) makes a page of the control's runs, whose verdict the
// mutants' failing runs do not change; one without any run.json makes a
// page with the measurement and no runs.
func TestMutationOnlyDir(t *testing.T) {
	dir := t.TempDir()
	m := writeMutation(t, dir, "20261205-200000-mut1", mutationNight, true)
	srcs, muts, err := LoadAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(muts) != 1 || muts[0].ID != m.ID || muts[0].Dir != m.Dir {
		t.Fatalf("LoadAll found %d measurements, want %s at %s", len(muts), m.ID, m.Dir)
	}
	controlRuns := 2 * len(mutationEntries)
	if len(srcs) != controlRuns {
		t.Errorf("LoadAll kept %d runs, want the control's %d", len(srcs), controlRuns)
	}
	p := Build(srcs, dir)
	p.AddMutations(muts, dir)
	if p.Verdict != reports.PassWithExpectedDeviations {
		t.Errorf("verdict %s, want the control's runs' %s", p.Verdict, reports.PassWithExpectedDeviations)
	}
	// Without leaving the mutants' runs out, their kills would fail it.
	all, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v := Build(all, dir).Verdict; v != reports.Fail {
		t.Errorf("the mutants' runs counted: verdict %s, want fail (the fixture's kills are failed runs)", v)
	}
	if _, err := Write(dir, p); err != nil {
		t.Fatal(err)
	}

	bare := t.TempDir()
	if _, err := reports.WriteMutation(filepath.Join(bare, "mutation-x"), &reports.Mutation{ID: "x", Base: "v1.37.2", Mutants: []reports.MutantRecord{{Name: "quiet", Outcome: reports.MutantSurvived}}}); err != nil {
		t.Fatal(err)
	}
	srcs, muts, err = LoadAll(bare)
	if err != nil || len(srcs) != 0 || len(muts) != 1 {
		t.Fatalf("LoadAll(a measurement alone) = %d runs, %d measurements, %v; want 0, 1, no error", len(srcs), len(muts), err)
	}
	p = Build(srcs, bare)
	p.AddMutations(muts, bare)
	if !strings.Contains(p.VerdictLine(), "; 0 of 1 mutant killed in every placement (1 survived)") {
		t.Errorf("verdict line %q lacks the score", p.VerdictLine())
	}
	if _, _, err := LoadAll(t.TempDir()); !errors.Is(err, ErrNoRuns) {
		t.Errorf("LoadAll(empty dir) = %v, want ErrNoRuns", err)
	}
}

func TestLoadBadMutationJSON(t *testing.T) {
	dir := t.TempDir()
	writeRuns(t, dir, nightRuns(t)[:1])
	bad := filepath.Join(dir, "mutation-x", reports.MutationJSONFileName)
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"id": "x", "mutants": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadAll(dir); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "make test-mutants") {
		t.Errorf("LoadAll = %v, want an error naming %s and the fix", err, bad)
	}
}

// Each mutant stands where its newest decided measurement put it: a
// later kill replaces an earlier survival, a later undecided run does not
// replace an earlier kill; a mutant of another provider stands apart.
func TestMutantScoreNewest(t *testing.T) {
	rec := func(name, outcome string) reports.MutantRecord {
		return reports.MutantRecord{Name: name, Outcome: outcome, Breaks: name + " breaks"}
	}
	older := &reports.Mutation{ID: "old", Provider: "local", Base: "v1.37.2", Started: mutationNight,
		Mutants: []reports.MutantRecord{rec("a", reports.MutantSurvived), rec("b", reports.MutantKilled), rec("c", reports.MutantMasked), rec("d", reports.MutantUndecided)}}
	newer := &reports.Mutation{ID: "new", Provider: "local", Base: "v1.37.2", Started: mutationNight.Add(24 * 60 * 60 * 1e9),
		Mutants: []reports.MutantRecord{rec("a", reports.MutantKilled), rec("b", reports.MutantUndecided), rec("d", reports.MutantSurvived), rec("e", reports.MutantEquivalent)}}
	kind := &reports.Mutation{ID: "kind", Provider: "kind", Base: "v1.37.2", Started: mutationNight.Add(48 * 60 * 60 * 1e9),
		Mutants: []reports.MutantRecord{rec("a", reports.MutantSurvived)}}
	p := &Page{}
	p.AddMutations([]*reports.Mutation{older, newer, kind}, ".")
	s := p.MutantScore
	var through []string
	for _, th := range s.Through {
		through = append(through, th.Measurement+":"+th.Mutant.Name+":"+th.Mutant.Outcome)
	}
	if s.Killed != 2 || s.Scored != 5 || strings.Join(through, " ") != "old:c:masked new:d:survived kind:a:survived" {
		t.Errorf("score %d of %d, through %v; want 2 of 5 (a and b killed on local), through old:c new:d kind:a", s.Killed, s.Scored, through)
	}
	if got, want := s.Text(), "2 of 5 mutants killed in every placement (2 survived, 1 masked)"; got != want {
		t.Errorf("Text() = %q, want %q", got, want)
	}
}

// What a measurement carries is escaped on the HTML page.
func TestMutationHTMLEscapes(t *testing.T) {
	m := &reports.Mutation{ID: "x", Base: "v1.37.2", Entries: []string{`a,<b>`}, Placements: []reports.MutationPlacement{{Name: "p"}},
		Mutants: []reports.MutantRecord{{Name: "m", Outcome: reports.MutantSurvived, Breaks: `<script>alert(1)</script>`,
			Placements: []reports.MutantPlacementRecord{{Placement: "p", Outcome: reports.MutantSurvived, Cells: []reports.MutantCell{{Entry: `a,<b>`, Outcome: reports.CellSame, Detail: `"><img src=x>`}}}}}}}
	p := Build(nil, ".")
	p.AddMutations([]*reports.Mutation{m}, ".")
	var b bytes.Buffer
	if err := writeHTML(&b, p); err != nil {
		t.Fatal(err)
	}
	checkEscaped(t, b.String())
	if !strings.Contains(b.String(), "a,<wbr>&lt;b&gt;") {
		t.Error("the entry's name is missing from the grid")
	}
}
