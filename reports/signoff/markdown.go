package signoff

import (
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/skewtest/reports"
)

// statusSymbol tells statuses apart without colour.
func statusSymbol(s status) string {
	switch s {
	case pass:
		return "✅"
	case deviated:
		return "⚠️"
	case fail:
		return "❌"
	case unreached:
		return "🚫"
	}
	return "·"
}

// VerdictLine is the page's verdict and counts on one line, for terminals
// and the page's first line.
func (p *Page) VerdictLine() string {
	s := fmt.Sprintf("%s: %s, %s", verdictWords(p.Verdict), plural(len(p.Runs), "run"), plural(p.Cells(), "cell"))
	if c := p.CountsText(); c != "" {
		s += " (" + c + ")"
	}
	if p.Baseline != nil && len(p.Baseline.Warnings) > 0 {
		s += ", " + plural(len(p.Baseline.Warnings), "slowdown warning")
	}
	// The mutants do not change the runs' verdict, but a verdict is only
	// as strong as the checks behind it: say where they stand beside it.
	if p.MutantScore != nil {
		s += "; " + p.MutantScore.Text()
	}
	return s
}

// SourcesText is what the page was made from: "6 runs", "6 runs and 1
// mutation measurement".
func (p *Page) SourcesText() string {
	s := plural(len(p.Runs), "run")
	if n := len(p.Mutations); n > 0 {
		s += " and " + plural(n, "mutation measurement")
	}
	return s
}

func verdictWords(v reports.Verdict) string {
	return strings.ToUpper(strings.ReplaceAll(string(v), "-", " "))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// writeMarkdown writes the sign-off page as GitHub-flavoured Markdown, to
// paste into the enhancement issue. Links are relative to the dir the page
// was built for.
func writeMarkdown(w io.Writer, p *Page) error {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	text, code := reports.MarkdownText, reports.MarkdownCode

	line("# %s %s", statusSymbol(status(p.Verdict)), text(p.VerdictLine()))
	line("")
	line("KEP-3756 kubelet skew sign-off of the runs from %s to %s. Each matrix cell is one kubelet version change (rows: from, columns: to) with its verdict and the median time until the old pods' directories were gone, from the kubelet's start; where several runs cover a cell it shows the worst verdict and the number of hops.", reports.FormatTime(p.First), reports.FormatTime(p.Last))
	line("")
	if p.Baseline != nil {
		if n := len(p.Baseline.Warnings); n > 0 {
			line("> [!WARNING]")
			line("> %s against the baseline %s (over %.0f%% and over %s s slower; a trend, not a failure):", plural(n, "phase"), code(p.Baseline.Dir), 100*(slowdownRatio-1), reports.FormatSeconds(slowdownMin))
			for _, w := range p.Baseline.Warnings {
				line("> - %s", text(w.Text()))
			}
			line("")
		} else {
			line("Trends: no slowdown against the baseline %s (%s of %s compared).", code(p.Baseline.Dir), plural(p.Baseline.Compared, "phase median"), plural(p.Baseline.Runs, "run"))
			line("")
		}
	}
	writeMutantsThroughMarkdown(&b, p)

	for _, m := range p.Matrices {
		line("## %s", text(m.Title()))
		line("")
		header := []string{"from \\ to"}
		for _, v := range m.Versions {
			header = append(header, text(v))
		}
		var rows [][]string
		var notes []string
		for i, from := range m.Versions {
			row := []string{"**" + text(from) + "**"}
			for j := range m.Versions {
				c := m.Cells[i][j]
				cell := mdCell(c)
				for _, u := range c.Unreached {
					notes = append(notes, fmt.Sprintf("%s → %s (run %s%s): %s", text(c.From), text(c.To), code(u.Run.Src.Run.ID), nodeSuffix(u.Node), text(u.Reason)))
					cell += fmt.Sprintf(" [%d]", len(notes))
				}
				row = append(row, cell)
			}
			rows = append(rows, row)
		}
		b.WriteString(reports.MarkdownTable(header, rows))
		for i, n := range notes {
			line("%d. 🚫 unreached: %s", i+1, n)
		}
		if len(notes) > 0 {
			line("")
		}
	}

	if failed := p.FailedRuns(); len(failed) > 0 {
		line("## ❌ Failures")
		line("")
		for _, r := range failed {
			failure := r.Src.Run.Failure
			if failure == "" {
				failure = "no failure recorded"
			}
			line("- %s (%s): %s", runLink(r), text(r.Provider+" · "+r.VolumeKind), text(failure))
		}
		line("")
	}

	if h := p.History; h != nil {
		line("## Kubelet history")
		line("")
		line("What each catalogue entry did on each kubelet: a bug the catalogue expects there reproduced, clean, not reproduced, failed or not reached, with the reconstruction path the kubelet's log showed; each links to its hop and cites the reference.")
		line("")
		header := append([]string{"kubelet"}, h.Entries...)
		for i := range header[1:] {
			header[i+1] = text(header[i+1])
		}
		var rows [][]string
		var notes []string
		for _, k := range h.Kubelets {
			row := []string{"**" + text(k) + "**"}
			for _, e := range h.Entries {
				var parts []string
				for _, it := range h.Cells[k][e] {
					cell := historySymbol(it.Outcome) + " " + it.Outcome
					if it.Path != "" {
						cell += " (" + text(it.Path) + ")"
					}
					if it.Link != "" {
						cell = "[" + cell + "](" + it.Link + ")"
					}
					if it.Why != "" {
						notes = append(notes, fmt.Sprintf("%s, %s (run %s, hop %d): %s", text(k), text(e), code(it.Run), it.Hop, text(it.Why)))
						cell += fmt.Sprintf(" [%d]", len(notes))
					}
					parts = append(parts, cell)
				}
				row = append(row, orDash(strings.Join(parts, "<br>")))
			}
			rows = append(rows, row)
		}
		b.WriteString(reports.MarkdownTable(header, rows))
		for i, n := range notes {
			line("%d. %s", i+1, n)
		}
		if len(notes) > 0 {
			line("")
		}
	}

	writeMutationMarkdown(&b, p)
	writeScaleMarkdown(&b, p)

	line("## ⚠️ Expected deviations")
	line("")
	if len(p.Deviations) == 0 {
		line("None.")
		line("")
	} else {
		var rows [][]string
		for _, d := range p.Deviations {
			rows = append(rows, []string{code(d.Check), orDash(text(d.Expected)), text(strings.Join(d.Observed, "; ")), orDash(text(d.Reason)), text(strings.Join(d.Where, "; "))})
		}
		b.WriteString(reports.MarkdownTable([]string{"Check", "Expected", "Observed", "Reference (why it is expected)", "Seen in"}, rows))
	}

	line("## Binaries")
	line("")
	if len(p.Binaries) == 0 {
		line("No binaries recorded.")
		line("")
	} else {
		var rows [][]string
		for _, bin := range p.Binaries {
			var srcs []string
			for _, s := range bin.Sources {
				srcs = append(srcs, code(s))
			}
			var ids []string
			for _, id := range bin.RunIDs {
				ids = append(ids, code(id))
			}
			rows = append(rows, []string{text(bin.Component), orDash(text(bin.Version)), orDash(code(bin.SHA256)), strings.Join(srcs, "<br>"), strings.Join(ids, " ")})
		}
		b.WriteString(reports.MarkdownTable([]string{"Component", "Version", "SHA-256", "Source", "Runs"}, rows))
	}

	line("## Environments")
	line("")
	for _, e := range p.Envs {
		line("### %s", text(e.Provider))
		line("")
		if len(e.Rows) == 0 {
			line("No environment recorded.")
			line("")
			continue
		}
		var rows [][]string
		for _, r := range e.Rows {
			var vals []string
			for _, v := range r.Values {
				s := orDash(text(v.Value))
				if len(r.Values) > 1 {
					s += fmt.Sprintf(" (%s)", plural(v.Runs, "run"))
				}
				vals = append(vals, s)
			}
			rows = append(rows, []string{text(r.Key), strings.Join(vals, "; ")})
		}
		b.WriteString(reports.MarkdownTable([]string{"Item", "Value"}, rows))
	}

	line("## Runs")
	line("")
	var rows [][]string
	for _, r := range p.Runs {
		run := r.Src.Run
		plan := text(strings.Join(run.Plan, " → "))
		if len(run.Trails) > 0 {
			var trails []string
			for _, tr := range run.Trails {
				trails = append(trails, code(tr.Node)+": "+text(strings.Join(tr.Plan, " → ")))
			}
			plan = strings.Join(trails, "<br>")
		}
		rows = append(rows, []string{runLink(r), text(r.Provider), text(r.VolumeKind), orDash(plan), reports.VerdictLabel(run.Verdict), reports.FormatTime(run.Started)})
	}
	b.WriteString(reports.MarkdownTable([]string{"Run", "Provider", "Volume kind", "Plan", "Verdict", "Started"}, rows))
	line("---")
	line("")
	line("_Generated by `skewtest signoff` from %s._", p.SourcesText())
	_, err := io.WriteString(w, b.String())
	return err
}

// mdCell is a matrix cell: symbol, verdict words, median time to cleanup
// and hop count, linked to the worst hop.
func mdCell(c *cell) string {
	if c.Status == notRun {
		return "·"
	}
	s := statusSymbol(c.Status) + " " + c.Status.Label()
	if d, ok := c.Cleanup(); ok {
		s += " " + reports.FormatSeconds(d) + " s"
	}
	if n := len(c.Hops); n > 1 {
		s += fmt.Sprintf(" ×%d", n)
	}
	if c.Worst != nil && c.Worst.Link != "" {
		s = "[" + s + "](" + c.Worst.Link + ")"
	}
	return s
}

// historySymbol marks a history cell's outcome.
func historySymbol(outcome string) string {
	switch outcome {
	case historyReproduced:
		return "🐞"
	case historyClean:
		return "✅"
	case historyNotReproduced:
		return "❔"
	case historyFail:
		return "❌"
	}
	return "🚫"
}

func runLink(r runRow) string {
	id := reports.MarkdownCode(r.Src.Run.ID)
	if id == "" {
		id = reports.MarkdownText(r.Src.Path)
	}
	if r.Link == "" {
		return id
	}
	return "[" + id + "](" + r.Link + ")"
}

func nodeSuffix(node string) string {
	if node == "" {
		return ""
	}
	return " on " + reports.MarkdownCode(node)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
