package reports

import "time"

// The Markdown building blocks of report.md, for other pages built from
// runs (the sign-off page), so that every page escapes and formats alike.

// MarkdownText renders s as inline Markdown text on one line, escaped.
func MarkdownText(s string) string { return mdText(s) }

// MarkdownCode renders s as an inline code span; "" for an empty s.
func MarkdownCode(s string) string { return mdCode(s) }

// MarkdownLinkDest percent-encodes a relative slash-separated path for a
// Markdown link destination.
func MarkdownLinkDest(p string) string { return linkDest(p) }

// MarkdownTable renders a GitHub table followed by a blank line; cells are
// inline Markdown, "|" is escaped.
func MarkdownTable(header []string, rows [][]string) string {
	var m mdWriter
	m.table(header, rows)
	return m.b.String()
}

// VerdictLabel is a verdict's symbol and words, as report.md shows it
// ("✅ pass", "⚠️ pass with expected deviations", "❌ fail").
func VerdictLabel(v Verdict) string { return verdictLabel(v) }

// FormatSeconds formats a phase duration in seconds as report.md does: two
// decimals under ten seconds, one above.
func FormatSeconds(d time.Duration) string { return fmtSeconds(d) }

// FormatTime formats an instant in UTC (RFC 3339), or "—" when unset.
func FormatTime(t time.Time) string { return fmtTime(t) }

// OneLine sanitizes s (valid UTF-8, no control characters) and folds its
// whitespace into single spaces.
func OneLine(s string) string { return oneLine(s) }

// ExpectedDeviation is one documented deviation a run saw, in a step or a
// hop's metrics.
type ExpectedDeviation struct {
	Hop      int // the hop's Number; 0 outside hops
	Where    string
	Check    string
	Expected string
	Observed string
	Reason   string // the scenario's documented reference
}

// ExpectedDeviations lists the run's expected deviations in the order
// report.md shows them.
func ExpectedDeviations(run *Run) []ExpectedDeviation {
	exp, _ := deviations(run)
	out := make([]ExpectedDeviation, len(exp))
	for i, d := range exp {
		out[i] = ExpectedDeviation{Hop: d.Hop, Where: d.Where, Check: d.Check, Expected: d.Expected, Observed: d.Observed, Reason: d.Reason}
	}
	return out
}
