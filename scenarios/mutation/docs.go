package mutation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"sigs.k8s.io/skewtest/reports"
)

// DocsSection is docs/mutation.md's generated part: the set, each
// mutant's area, what it breaks, what it reverts and the way through it
// proves closed; the equivalent mutants with their reasons; the ways
// through, each with its mutants.
func DocsSection(set []Mutant) string {
	var b strings.Builder
	var rows [][]string
	byWay := map[string][]string{}
	var equivalent []string
	for _, m := range set {
		way := ""
		if m.Way != "" {
			way = m.Way
			byWay[m.Way] = append(byWay[m.Way], reports.MarkdownCode(m.Name))
		}
		rows = append(rows, []string{reports.MarkdownCode(m.Name), reports.MarkdownText(m.Area), reports.MarkdownText(m.Breaks), reports.MarkdownText(m.Reverts), way})
		if m.Equivalent != "" {
			equivalent = append(equivalent, fmt.Sprintf("- %s: %s", reports.MarkdownCode(m.Name), reports.MarkdownText(m.Equivalent)))
		}
	}
	fmt.Fprintf(&b, "The set: %d mutants.\n\n", len(set))
	b.WriteString(reports.MarkdownTable([]string{"mutant", "area", "breaks", "reverts", "way"}, rows))
	b.WriteString("Equivalent mutants, with their reasons: ")
	if len(equivalent) == 0 {
		b.WriteString("none.\n\n")
	} else {
		b.WriteString("\n\n" + strings.Join(equivalent, "\n") + "\n\n")
	}
	rows = nil
	for _, w := range slices.Sorted(maps.Keys(Ways)) {
		rows = append(rows, []string{reports.MarkdownCode(w), reports.MarkdownText(Ways[w]), strings.Join(byWay[w], ", ")})
	}
	b.WriteString("The ways through the checks that mutants once took, each proved closed by the mutants that name it:\n\n")
	b.WriteString(reports.MarkdownTable([]string{"way", "what passed", "mutants"}, rows))
	return b.String()
}
