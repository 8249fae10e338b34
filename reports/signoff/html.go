package signoff

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/reports/scale"
)

//go:embed signoff.html.tmpl
var htmlSource string

var htmlTemplate = template.Must(template.New(HTMLFileName).Funcs(template.FuncMap{
	"label":   func(s status) string { return s.Label() },
	"symbol":  htmlSymbol,
	"seconds": reports.FormatSeconds,
	"time":    reports.FormatTime,
	"verdict": func(v reports.Verdict) status { return hopStatus(v) },
	"upper":   verdictWords,
	"plural":  plural,
	"inc":     func(i int) int { return i + 1 },
	"hsym":    htmlHistorySymbol,
	// svg inlines a bench-scale chart, which reports/scale draws with
	// every text escaped.
	"svg":       func(s string) template.HTML { return template.HTML(s) },
	"scaleRule": func() string { return scale.Rule },
	"msym":      htmlMutantSymbol,
	"mcell":     htmlMutantCell,
	"mslug":     slug,
	"kills":     reports.MutantKills,
	"msummary":  reports.MutationSummaryLine,
	"wbr":       commaBreaks,
}).Parse(htmlSource))

// commaBreaks lets a comma-separated name (a catalogue entry that groups
// shapes) wrap after its commas.
func commaBreaks(s string) template.HTML {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = template.HTMLEscapeString(p)
	}
	return template.HTML(strings.Join(parts, ",<wbr>"))
}

// htmlMutantSymbol marks a mutant's outcome, or a mutation grid cell's
// look, with characters common text fonts have.
func htmlMutantSymbol(look string) string {
	switch look {
	case reports.MutantKilled:
		return "☠"
	case reports.MutantMasked:
		return "≠"
	case reports.MutantSurvived:
		return "="
	case reports.MutantEquivalent:
		return "≡"
	case reports.CellNotRun:
		return "–"
	case reports.MutantUndecided, reports.CellControlFailed:
		return "?"
	case reports.CellError:
		return "!"
	}
	return "·"
}

// mutantCell is how the HTML shows one cell of a mutation grid.
type mutantCell struct {
	// Class colours it: mc-killed, mc-masked, mc-survived, ...; the
	// control's runs that passed are mc-control.
	Class, Symbol string
	// Title is the entry, the look in words and the cell's detail.
	Title string
}

// htmlMutantCell is a grid cell's class, symbol and title; the
// control's runs that passed show their verdict.
func htmlMutantCell(control bool, c reports.MutationGridCell) mutantCell {
	v := mutantCell{Class: "mc-" + slug(c.Look), Symbol: htmlMutantSymbol(c.Look), Title: c.Entry + ": " + c.Look}
	if control && c.Look == reports.CellSame {
		st := hopStatus(c.Verdict)
		v.Class, v.Symbol, v.Title = "mc-control", htmlSymbol(st), c.Entry+": "+st.Label()
	}
	if c.Detail != "" {
		v.Title += ": " + reports.OneLine(c.Detail)
	}
	return v
}

// htmlHistorySymbol marks a history cell's outcome with characters common
// text fonts have.
func htmlHistorySymbol(outcome string) string {
	switch outcome {
	case historyReproduced:
		return "●"
	case historyClean:
		return "✓"
	case historyNotReproduced:
		return "?"
	case historyFail:
		return "✗"
	}
	return "⊘"
}

// htmlSymbol tells statuses apart without colour, with characters that
// common text fonts have (no emoji font needed).
func htmlSymbol(s status) string {
	switch s {
	case pass:
		return "✓"
	case deviated:
		return "⚠"
	case fail:
		return "✗"
	case unreached:
		return "⊘"
	}
	return "·"
}

// Timeline geometry, in SVG user units: a label column, then bars scaled
// so the longest phase of the matrix fills barWidth.
const (
	tlLabelWidth = 150
	tlBarWidth   = 250
	tlRowHeight  = 20
	tlBarHeight  = 12
	tlTextWidth  = 64
)

// htmlPage is what the template renders.
type htmlPage struct {
	*Page
	Timelines map[*matrix][]timeline
	Geometry  struct{ Width, LabelWidth, BarWidth int }
}

// timeline is one hop's phases as bars.
type timeline struct {
	Hop    *hopRef
	Height int
	Bars   []bar
}

type bar struct {
	Phase    string
	Class    string
	Y, TextY int
	Width    float64
	TextX    float64
	// Text is the duration ("3.90 s"), or "not measured" for a scenario
	// phase the hop did not reach.
	Text string
}

// phaseClass is the CSS class of a phase's bar: the scenario's four phases
// have their own colours, any other phase a neutral one.
var phaseClass = map[string]string{
	reports.PhaseKubeletStop: "ph-stop",
	reports.PhaseNodeReady:   "ph-ready",
	reports.PhaseMountsGone:  "ph-mounts",
	reports.PhasePodDirsGone: "ph-dirs",
}

// writeHTML writes the sign-off page as one self-contained HTML file: no
// external stylesheet, script, font or image.
func writeHTML(w io.Writer, p *Page) error {
	v := htmlPage{Page: p, Timelines: map[*matrix][]timeline{}}
	v.Geometry.Width = tlLabelWidth + tlBarWidth + tlTextWidth
	v.Geometry.LabelWidth = tlLabelWidth
	v.Geometry.BarWidth = tlBarWidth
	for _, m := range p.Matrices {
		v.Timelines[m] = timelines(m)
	}
	if err := htmlTemplate.Execute(w, v); err != nil {
		return fmt.Errorf("signoff: rendering HTML: %w", err)
	}
	return nil
}

// timelines are the matrix's hops as bar charts on one scale, grouped by
// cell in matrix order. A scenario phase a hop did not record is shown as
// not measured.
func timelines(m *matrix) []timeline {
	var longest time.Duration
	for _, h := range m.Hops {
		for _, t := range h.Hop.Timings {
			longest = max(longest, t.Duration)
		}
	}
	var out []timeline
	for _, row := range m.Cells {
		for _, c := range row {
			for _, h := range c.Hops {
				out = append(out, hopTimeline(h, longest))
			}
		}
	}
	return out
}

func hopTimeline(h *hopRef, longest time.Duration) timeline {
	tl := timeline{Hop: h}
	recorded := map[string]time.Duration{}
	for _, t := range h.Hop.Timings {
		recorded[t.Phase] = t.Duration
	}
	names := phases(recorded)
	for _, ph := range reports.HopPhases {
		if _, ok := recorded[ph]; !ok {
			names = append(names, ph)
		}
	}
	for i, ph := range names {
		b := bar{Phase: ph, Class: phaseClass[ph], Y: i*tlRowHeight + (tlRowHeight-tlBarHeight)/2, TextY: i*tlRowHeight + tlRowHeight/2 + 4}
		if b.Class == "" {
			b.Class = "ph-other"
		}
		d, ok := recorded[ph]
		switch {
		case !ok:
			b.Class, b.Text, b.TextX = "ph-missing", "not measured", tlLabelWidth
		default:
			if longest > 0 {
				b.Width = round1(float64(tlBarWidth) * float64(max(d, 0)) / float64(longest))
			}
			b.Text, b.TextX = reports.FormatSeconds(d)+" s", round1(float64(tlLabelWidth)+b.Width+4)
		}
		tl.Bars = append(tl.Bars, b)
	}
	tl.Height = max(len(tl.Bars), 1) * tlRowHeight
	return tl
}

func round1(f float64) float64 { return float64(int(f*10+0.5)) / 10 }
