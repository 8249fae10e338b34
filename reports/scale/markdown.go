package scale

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"sigs.k8s.io/skewtest/reports"
)

// Markdown is the result's tables, a section per panel under a heading of
// level: its chart (an image linked by link, none when link returns ""),
// one row per point, then one row per fit.
func (r *Result) Markdown(level int, link func(Panel) string) string {
	var b strings.Builder
	h := strings.Repeat("#", level)
	text, code := reports.MarkdownText, reports.MarkdownCode
	header := []string{"N", "pods × volumes", "hop"}
	for _, q := range Quantities {
		header = append(header, fmt.Sprintf("%s (%s)", q.Name, q.Unit))
	}
	header = append(header, "found at start", "reconstructed (errors)", "counters", "run")
	for _, pn := range r.Panels() {
		fmt.Fprintf(&b, "%s %s\n\n", h, text(pn.Title()))
		if l := link(pn); l != "" {
			fmt.Fprintf(&b, "![%s](%s)\n\n", text(pn.Title()), reports.MarkdownLinkDest(l))
		}
		var rows [][]string
		for _, p := range r.PointsOf(pn) {
			row := []string{strconv.Itoa(p.Volumes), fmt.Sprintf("%d × %d", p.Pods, p.VolumesPerPod), text(SeriesOf(p).HopLabel())}
			for _, q := range Quantities {
				row = append(row, cellValue(p.Values, q))
			}
			check, why := p.Counters.Check()
			counted := "—"
			if p.Counters.Present {
				counted = fmt.Sprintf("%g (%g)", p.Counters.Reconstructed, p.Counters.Errors)
			}
			row = append(row, strconv.Itoa(p.Counters.VolumesAtStart), counted, text(counterSymbol(check)+" "+why), code(p.RunID))
			rows = append(rows, row)
		}
		b.WriteString(reports.MarkdownTable(header, rows))
		rows = nil
		for _, s := range seriesIn(r.PointsOf(pn)) {
			for _, q := range Quantities {
				f, ok := r.FitOf(s, q.Name)
				if !ok {
					continue
				}
				rows = append(rows, []string{text(s.HopLabel()), text(q.Name), perVolume(f), fmtFitValue(f.Intercept, f.Unit, f), fitR2(f), fmtFitValue(f.Rise, f.Unit, f), "**" + f.Verdict + "**: " + text(f.Why)})
			}
		}
		b.WriteString(reports.MarkdownTable([]string{"hop", "quantity", "per volume", "at 0 volumes", "R²", "rise over the range", "growth"}, rows))
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
	fmt.Fprintf(&b, "Times are from the kubelet's start, the cleanup polled every %s; CPU time and peak RSS are the kubelet's own, from its start to the hop's metrics check. ", r.PollInterval)
	b.WriteString("The counters are `reconstruct_volume_operations_total` (its errors in brackets) against the old pods' volume directories the kubelet found at its start, which they must equal unless the kubelet's metrics registration race took increments, which the run then names.\n\n")
	fmt.Fprintf(&b, "Growth: %s.", text(Rule))
	return b.String()
}

func counterSymbol(check string) string {
	switch check {
	case CountersEqual:
		return "✅"
	case CountersRace:
		return "⚠️"
	case CountersNotExposed:
		return "·"
	}
	return "❌"
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
