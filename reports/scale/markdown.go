package scale

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"sigs.k8s.io/skewtest/reports"
)

// Table is a table of plain text cells, for a page to render and escape
// as it does.
type Table struct {
	Header []string
	Rows   [][]string
}

// PointsTable is the panel's points, one row per point: its size, hop,
// each quantity, and its counters against the volumes found.
func (r *Result) PointsTable(pn Panel) Table {
	t := Table{Header: []string{"N", "pods × volumes", "hop"}}
	for _, q := range Quantities {
		t.Header = append(t.Header, fmt.Sprintf("%s (%s)", q.Name, q.Unit))
	}
	t.Header = append(t.Header, "found at start", "reconstructed (errors)", "counters", "run")
	for _, p := range r.PointsOf(pn) {
		row := []string{strconv.Itoa(p.Volumes), fmt.Sprintf("%d × %d", p.Pods, p.VolumesPerPod), SeriesOf(p).HopLabel()}
		for _, q := range Quantities {
			row = append(row, cellValue(p.Values, q))
		}
		check, why := p.Counters.Check()
		counted := "—"
		if p.Counters.Present {
			counted = fmt.Sprintf("%g (%g)", p.Counters.Reconstructed, p.Counters.Errors)
		}
		t.Rows = append(t.Rows, append(row, strconv.Itoa(p.Counters.VolumesAtStart), counted, counterSymbol(check)+" "+why, p.RunID))
	}
	return t
}

// FitsTable is the panel's fits, one row per hop and quantity.
func (r *Result) FitsTable(pn Panel) Table {
	t := Table{Header: []string{"hop", "quantity", "per volume", "at 0 volumes", "R²", "rise over the range", "growth", "why"}}
	for _, s := range seriesIn(r.PointsOf(pn)) {
		for _, q := range Quantities {
			f, ok := r.FitOf(s, q.Name)
			if !ok {
				continue
			}
			t.Rows = append(t.Rows, []string{s.HopLabel(), q.Name, perVolume(f), fmtFitValue(f.Intercept, f.Unit, f), fitR2(f), fmtFitValue(f.Rise, f.Unit, f), f.Verdict, f.Why})
		}
	}
	return t
}

// Markdown is the result's tables, a section per panel under a heading of
// level: its chart (an image linked by link, none when link returns ""),
// its points, then its fits; then the failed runs.
func (r *Result) Markdown(level int, link func(Panel) string) string {
	var b strings.Builder
	h := strings.Repeat("#", level)
	text := reports.MarkdownText
	table := func(t Table) {
		var rows [][]string
		for _, row := range t.Rows {
			cells := make([]string, len(row))
			for i, c := range row {
				cells[i] = text(c)
			}
			rows = append(rows, cells)
		}
		b.WriteString(reports.MarkdownTable(t.Header, rows))
	}
	for _, pn := range r.Panels() {
		fmt.Fprintf(&b, "%s %s\n\n", h, text(pn.Title()))
		if l := link(pn); l != "" {
			fmt.Fprintf(&b, "![%s](%s)\n\n", text(pn.Title()), reports.MarkdownLinkDest(l))
		}
		table(r.PointsTable(pn))
		table(r.FitsTable(pn))
	}
	if len(r.Failures) > 0 {
		fmt.Fprintf(&b, "%s Failed runs\n\n", h)
		for _, f := range r.Failures {
			fmt.Fprintf(&b, "- %s\n", text(f))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// WriteMarkdown writes the result's page: what it measured, how, the rule
// of the fits, and Markdown with each panel's chart file beside it.
func (r *Result) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Reconstruction at scale: %s on %s\n\n", reports.MarkdownCode(strings.Join(r.Plan, " → ")), reports.MarkdownText(r.Provider))
	b.WriteString(r.Intro() + "\n\n")
	b.WriteString(r.Markdown(2, func(p Panel) string { return p.ChartFile() }))
	_, err := io.WriteString(w, b.String())
	return err
}

// Intro says what the result measured, from when to when, how to make it
// again, and the fits' rule.
func (r *Result) Intro() string {
	text, code := reports.MarkdownText, reports.MarkdownCode
	var b strings.Builder
	fmt.Fprintf(&b, "Measured from %s to %s", reports.FormatTime(r.Started), reports.FormatTime(r.Finished))
	if r.Host != "" {
		fmt.Fprintf(&b, " on %s", text(r.Host))
	}
	fmt.Fprintf(&b, "; made again with %s. ", code(r.Command))
	fmt.Fprintf(&b, "Each row is one hop of one run: the hop's kubelet started over N volumes of pods force-deleted while it was down (the CSI driver takes %d volumes per node, the kubelet %d pods). ", r.VolumeLimit, r.MaxPods)
	fmt.Fprintf(&b, "Times are from the kubelet's start, the cleanup polled every %s; CPU time and peak RSS are the kubelet's own, from its start until the re-created pods ran and the old pods' state was gone. ", r.PollInterval)
	b.WriteString("The counters are `reconstruct_volume_operations_total` (its errors in brackets) against the old pods' volume directories the kubelet found at its start, which they must equal unless the kubelet's metrics registration race took increments, which the run then names.\n\n")
	fmt.Fprintf(&b, "Growth: %s.", text(Rule))
	return b.String()
}

// counterSymbol marks a counters check with a character common text
// fonts have, for the HTML page as for Markdown.
func counterSymbol(check string) string {
	switch check {
	case CountersEqual:
		return "✓"
	case CountersRace:
		return "⚠"
	case CountersNotExposed:
		return "·"
	}
	return "✗"
}

// cellValue is a point's value of q in q's unit, "—" when not measured.
func cellValue(values map[string]float64, q Quantity) string {
	v, ok := values[q.Name]
	if !ok {
		return "—"
	}
	if q.Unit == "MiB" {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// perVolume is a fit's slope as the cost of one volume: milliseconds for
// times, KiB for memory.
func perVolume(f Fit) string {
	if f.Verdict == TooFew {
		return "—"
	}
	switch f.Unit {
	case "s":
		return strconv.FormatFloat(1000*f.Slope, 'f', 1, 64) + " ms"
	case "MiB":
		return strconv.FormatFloat(1024*f.Slope, 'f', 0, 64) + " KiB"
	}
	return fmtValue(f.Slope, f.Unit)
}

func fmtFitValue(v float64, unit string, f Fit) string {
	if f.Verdict == TooFew {
		return "—"
	}
	return fmtValue(v, unit)
}

func fitR2(f Fit) string {
	if f.Verdict == TooFew {
		return "—"
	}
	return strconv.FormatFloat(f.R2, 'f', 2, 64)
}
