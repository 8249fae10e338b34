package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// ReadMutation reads a mutation.json.
func ReadMutation(path string) (*Mutation, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Mutation
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

// cellSymbols are the grid's symbols, one per cell outcome.
var cellSymbols = map[string]string{
	MutantKilled:      "💀",
	MutantMasked:      "🎭",
	CellSame:          "·",
	CellNotRun:        "–",
	CellControlFailed: "❓",
	CellError:         "⚠️",
}

// MutationLegend explains the grid's symbols.
const MutationLegend = "💀 killed: the run failed on a check the control's same run passed · 🎭 masked: it passed with deviations the control's run lacks (or without the control's) · `·` the control's verdict and deviations · – not run: already killed in that placement · ❓ the control's same run did not pass · ⚠️ an infrastructure failure or an interrupt"

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
	killed, scored := m.Score()
	md.printf("# skewtest mutation score: %d of %d mutants killed\n\n", killed, scored)
	md.printf("Kubelet %s, changed by each mutant, against the unmutated control built the same way; partner %s; provider %s. %s\n\n",
		mdCode(m.Base), mdCode(m.Partner), m.Provider, MutationSummaryLine(m))
	if m.Failure != "" {
		md.printf("**%s**\n\n", mdText(m.Failure))
	}
	md.line("## The mutants")
	md.line("")
	md.table([]string{"Mutant", "Area", "Breaks", "Reverts", "Outcome", "Killed by"}, MutantRows(m))
	for _, p := range m.Placements {
		md.printf("## %s\n\n%s: %s.\n\n", mdText(p.Name), mdText(p.Says), mdText(p.Plan))
		header, rows := MutationGrid(m, p.Name)
		md.table(header, rows)
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

// MutantRows are the mutants' table rows: name, area, what it breaks,
// what it reverts, its outcome and the first kill of each placement.
func MutantRows(m *Mutation) [][]string {
	var rows [][]string
	for _, r := range m.Mutants {
		var kills []string
		for _, p := range r.Placements {
			if p.KilledBy != "" {
				kills = append(kills, p.Placement+": "+oneLineCut(p.KilledBy, 200))
			}
		}
		breaks := r.Breaks
		if r.Equivalent != "" {
			breaks += " Equivalent: " + r.Equivalent
		}
		rows = append(rows, []string{mdCode(r.Name), mdText(r.Area), mdText(breaks), mdText(r.Reverts), MutantOutcomeLabel(r.Outcome), mdText(strings.Join(kills, "; "))})
	}
	return rows
}

// MutationGrid is one placement's grid: a row per kubelet under test
// (the control first, with its verdicts), a column per entry.
func MutationGrid(m *Mutation, placement string) ([]string, [][]string) {
	header := append([]string{"kubelet"}, m.Entries...)
	for i := range header[1:] {
		header[i+1] = mdCode(header[i+1])
	}
	var rows [][]string
	for i, r := range append([]MutantRecord{m.Control}, m.Mutants...) {
		row := []string{mdCode(r.Name)}
		var cells []MutantCell
		for _, p := range r.Placements {
			if p.Placement == placement {
				cells = p.Cells
			}
		}
		if len(cells) == 0 {
			continue
		}
		for _, c := range cells {
			sym := cellSymbols[c.Outcome]
			if i == 0 && c.Outcome == CellSame {
				sym = verdictSymbol(c.Verdict)
			}
			if c.Report != "" {
				sym = "[" + sym + "](" + linkDest(filepath.ToSlash(filepath.Join("..", c.Report, "report.md"))) + ")"
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
