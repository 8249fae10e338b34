package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Files a mutation measurement writes into its directory.
const (
	MutationJSONFileName     = "mutation.json"
	MutationMarkdownFileName = "mutation.md"
)

// WriteMutation writes mutation.json and mutation.md into dir and
// returns their paths (Markdown first).
func WriteMutation(dir string, m *Mutation) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("reports: creating mutation dir: %w", err)
	}
	var paths []string
	var errs []error
	for _, f := range []struct {
		name  string
		write func(io.Writer, *Mutation) error
	}{
		{MutationMarkdownFileName, WriteMutationMarkdown},
		{MutationJSONFileName, func(w io.Writer, m *Mutation) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(m)
		}},
	} {
		p := filepath.Join(dir, f.name)
		if err := WriteFileAtomic(p, func(w io.Writer) error { return f.write(w, m) }); err != nil {
			errs = append(errs, fmt.Errorf("reports: writing %s: %w", p, err))
			continue
		}
		paths = append(paths, p)
	}
	return paths, errors.Join(errs...)
}

// ReadMutation reads a mutation.json; the measurement's Dir is the
// file's.
func ReadMutation(path string) (*Mutation, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Mutation
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.Dir = filepath.Dir(path)
	return &m, nil
}

// FindMutations reads every mutation.json under dir, recursively, one per
// measurement ID (the first in lexical order), oldest first. A symlink
// such as $ARTIFACTS/latest is not followed. A dir without any gives none;
// one that cannot be read is an error naming its path.
func FindMutations(dir string) ([]*Mutation, error) {
	var out []*Mutation
	seen := map[string]bool{}
	err := FindFiles(dir, MutationJSONFileName, func(path string) error {
		m, err := ReadMutation(path)
		if err != nil {
			return fmt.Errorf("%w; remove it, or measure again (make test-mutants)", err)
		}
		id := m.ID
		if id == "" {
			id = path
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reports: looking for %s under %s: %w", MutationJSONFileName, dir, err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out, nil
}

// cellSymbols are the grid's symbols, one per cell look.
var cellSymbols = map[string]string{
	MutantKilled:      "💀",
	MutantMasked:      "🎭",
	MutantSurvived:    "🧟",
	CellSame:          "·",
	CellNotRun:        "–",
	CellControlFailed: "❓",
	CellError:         "⚠️",
}

// MutationLegend explains the grid's symbols.
const MutationLegend = "💀 killed: the run failed on a check the control's same run passed · 🎭 masked: it passed with deviations the control's run lacks (or without the control's) · 🧟 survived: the control's verdict and deviations, in a placement that did not kill the mutant · `·` the control's verdict and deviations, before the run that killed it · – not run: already killed in that placement · ❓ the control's same run did not pass · ⚠️ an infrastructure failure or an interrupt"

// outcomeLabels are a mutant's outcomes as the pages write them.
var outcomeLabels = map[string]string{
	MutantKilled:     "💀 killed",
	MutantMasked:     "🎭 masked",
	MutantSurvived:   "🧟 survived",
	MutantUndecided:  "⚠️ undecided",
	MutantEquivalent: "≡ equivalent",
}

// MutantOutcomeLabel is a mutant's outcome with its symbol.
func MutantOutcomeLabel(o string) string {
	if l, ok := outcomeLabels[o]; ok {
		return l
	}
	return o
}

// WriteMutationMarkdown writes the measurement: the score, what each
// mutant breaks and what killed it, and the mutant × entry grid of each
// placement.
func WriteMutationMarkdown(w io.Writer, m *Mutation) error {
	md := &mdWriter{}
	md.printf("# skewtest mutation score: %s\n\n", m.ScoreText())
	md.printf("Kubelet %s, changed by each mutant, against the unmutated control built the same way; partner %s; provider %s. %s\n\n",
		mdCode(m.Base), mdCode(m.Partner), m.Provider, MutationSummaryLine(m))
	if m.Failure != "" {
		md.printf("**%s**\n\n", mdText(m.Failure))
	}
	md.line("## The mutants")
	md.line("")
	md.table(MutantTable(m))
	// The runs' directories are siblings of the measurement's.
	link := func(report string) string {
		return linkDest(filepath.ToSlash(filepath.Join("..", report, MarkdownFileName)))
	}
	for _, p := range m.Placements {
		md.printf("## %s\n\n%s: %s.\n\n", mdText(p.Name), mdText(p.Says), mdText(p.Plan))
		md.table(MutationGrid(m, p.Name, link))
	}
	md.line(MutationLegend)
	md.line("")
	_, err := io.WriteString(w, md.b.String())
	return err
}

// MutationSummaryLine says how long the measurement took, beside the
// time its runs would have taken one after another.
func MutationSummaryLine(m *Mutation) string {
	runs := 0
	for _, r := range append([]MutantRecord{m.Control}, m.Mutants...) {
		for _, p := range r.Placements {
			for _, c := range p.Cells {
				if c.Outcome != CellNotRun && c.Report != "" {
					runs++
				}
			}
		}
	}
	return fmt.Sprintf("%d runs as one batch in %ss (one after another: %ss), after %ss of builds; %ss in all.",
		runs, fmtSeconds(m.BatchTook), fmtSeconds(m.SumOfRuns), fmtSeconds(m.Builds), fmtSeconds(m.Finished.Sub(m.Started)))
}

// MutantKill is what first killed a mutant in one placement.
type MutantKill struct {
	Placement string
	// By is the entry and the check that failed, on one line, cut short.
	By string
}

// MutantKills are what killed the mutant in each placement that killed
// it, in placement order.
func MutantKills(r MutantRecord) []MutantKill {
	var kills []MutantKill
	for _, p := range r.Placements {
		if p.KilledBy != "" {
			kills = append(kills, MutantKill{Placement: p.Placement, By: oneLineCut(p.KilledBy, 200)})
		}
	}
	return kills
}

// MutantTable is the mutants' table: name, area, what it breaks (and why
// an equivalent one is not scored), what it reverts, its outcome and the
// first kill of each placement.
func MutantTable(m *Mutation) ([]string, [][]string) {
	var rows [][]string
	for _, r := range m.Mutants {
		var kills []string
		for _, k := range MutantKills(r) {
			kills = append(kills, k.Placement+": "+k.By)
		}
		breaks := r.Breaks
		if r.Equivalent != "" {
			breaks += " Equivalent: " + r.Equivalent
		}
		rows = append(rows, []string{mdCode(r.Name), mdText(r.Area), mdText(breaks), mdText(r.Reverts), MutantOutcomeLabel(r.Outcome), mdText(strings.Join(kills, "; "))})
	}
	return []string{"Mutant", "Area", "Breaks", "Reverts", "Outcome", "Killed by"}, rows
}

// MutationGridRow is one kubelet's runs in one placement.
type MutationGridRow struct {
	Kubelet string
	// Control marks the unmutated control's row, whose cells show its
	// verdicts.
	Control bool
	// Outcome is the mutant's in this placement; "" for the control.
	Outcome string
	Cells   []MutationGridCell
}

// MutationGridCell is one run of the grid as the pages show it.
type MutationGridCell struct {
	MutantCell
	// Look is what the cell shows: its outcome, except that a mutant's
	// run like the control's is MutantSurvived in a placement that did
	// not kill it (the checks let it through there).
	Look string
	// Link is the run's report, as the page's link function made it; ""
	// without one.
	Link string
}

// MutationGridRows are one placement's rows, the control first; link
// turns a cell's Report (relative to the artifacts root) into the page's
// link to the run's report.md. A kubelet that did not run in the
// placement (an equivalent mutant) has no row.
func MutationGridRows(m *Mutation, placement string, link func(report string) string) []MutationGridRow {
	var rows []MutationGridRow
	for i, r := range append([]MutantRecord{m.Control}, m.Mutants...) {
		for _, p := range r.Placements {
			if p.Placement != placement || len(p.Cells) == 0 {
				continue
			}
			row := MutationGridRow{Kubelet: r.Name, Control: i == 0}
			if !row.Control {
				row.Outcome = p.Outcome
			}
			for _, c := range p.Cells {
				gc := MutationGridCell{MutantCell: c, Look: c.Outcome}
				if !row.Control && c.Outcome == CellSame && p.Outcome != MutantKilled {
					gc.Look = MutantSurvived
				}
				if c.Report != "" {
					gc.Link = link(c.Report)
				}
				row.Cells = append(row.Cells, gc)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// MutationGrid is one placement's grid in Markdown: a row per kubelet
// under test (the control first, with its verdicts), a column per entry,
// each cell linked to its run's report (see MutationGridRows).
func MutationGrid(m *Mutation, placement string, link func(report string) string) ([]string, [][]string) {
	header := []string{"kubelet"}
	for _, e := range m.Entries {
		header = append(header, mdCode(e))
	}
	var rows [][]string
	for _, r := range MutationGridRows(m, placement, link) {
		row := []string{mdCode(r.Kubelet)}
		for _, c := range r.Cells {
			sym := cellSymbols[c.Look]
			if r.Control && c.Look == CellSame {
				sym = verdictSymbol(c.Verdict)
			}
			if c.Link != "" {
				sym = "[" + sym + "](" + c.Link + ")"
			}
			row = append(row, sym)
		}
		rows = append(rows, row)
	}
	return header, rows
}

// verdictSymbol is a verdict's symbol alone.
func verdictSymbol(v Verdict) string {
	return strings.Fields(verdictLabel(v) + " ?")[0]
}

func oneLineCut(s string, n int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
