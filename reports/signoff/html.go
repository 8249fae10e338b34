package signoff

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"time"

	"sigs.k8s.io/skewtest/reports"
)

//go:embed signoff.html.tmpl
var htmlSource string

var htmlTemplate = template.Must(template.New(HTMLFileName).Funcs(template.FuncMap{
	"label":   func(s Status) string { return s.Label() },
	"symbol":  statusSymbol,
	"seconds": reports.FormatSeconds,
	"time":    reports.FormatTime,
	"verdict": func(v reports.Verdict) Status { return hopStatus(v) },
	"upper":   verdictWords,
	"plural":  plural,
	"inc":     func(i int) int { return i + 1 },
}).Parse(htmlSource))

// Timeline geometry, in SVG user units: a label column, then bars scaled
// so the longest phase of the matrix fills barWidth.
const (
	tlLabelWidth = 124
	tlBarWidth   = 250
	tlRowHeight  = 20
	tlBarHeight  = 12
	tlTextWidth  = 64
)

// htmlPage is what the template renders.
type htmlPage struct {
	*Page
	Timelines map[*Matrix][]timeline
	Geometry  struct{ Width, LabelWidth, BarWidth int }
}

// timeline is one hop's phases as bars.
type timeline struct {
	Hop    *HopRef
	Height int
	Bars   []bar
}

type bar struct {
	Phase    string
	Class    string
	Y, TextY int
	Width    float64
	TextX    float64
	Seconds  string
}

// phaseClass is the CSS class of a phase's bar: the scenario's four phases
// have their own colours, any other phase a neutral one.
var phaseClass = map[string]string{
	reports.PhaseKubeletStop: "ph-stop",
	reports.PhaseNodeReady:   "ph-ready",
	reports.PhaseMountsGone:  "ph-mounts",
	reports.PhasePodDirsGone: "ph-dirs",
}

// WriteHTML writes the sign-off page as one self-contained HTML file: no
// external stylesheet, script, font or image.
func WriteHTML(w io.Writer, p *Page) error {
	v := htmlPage{Page: p, Timelines: map[*Matrix][]timeline{}}
	v.Geometry.Width = tlLabelWidth + tlBarWidth + tlTextWidth
	v.Geometry.LabelWidth = tlLabelWidth
	v.Geometry.BarWidth = tlBarWidth
	for _, m := range p.Matrices {
		var longest time.Duration
		for _, h := range m.Hops {
			for _, t := range h.Hop.Timings {
				longest = max(longest, t.Duration)
			}
		}
		for _, h := range m.Hops {
			tl := timeline{Hop: h}
			medians := map[string]time.Duration{}
			for _, t := range h.Hop.Timings {
				medians[t.Phase] = t.Duration
			}
			for i, ph := range phases(medians) {
				d := medians[ph]
				width := 0.0
				if longest > 0 {
					width = float64(tlBarWidth) * float64(max(d, 0)) / float64(longest)
				}
				class := phaseClass[ph]
				if class == "" {
					class = "ph-other"
				}
				y := i*tlRowHeight + (tlRowHeight-tlBarHeight)/2
				tl.Bars = append(tl.Bars, bar{Phase: ph, Class: class, Y: y, TextY: i*tlRowHeight + tlRowHeight/2 + 4,
					Width: round1(width), TextX: round1(float64(tlLabelWidth) + width + 4), Seconds: reports.FormatSeconds(d) + " s"})
			}
			tl.Height = max(len(tl.Bars), 1) * tlRowHeight
			v.Timelines[m] = append(v.Timelines[m], tl)
		}
	}
	if err := htmlTemplate.Execute(w, v); err != nil {
		return fmt.Errorf("signoff: rendering HTML: %w", err)
	}
	return nil
}

func round1(f float64) float64 { return float64(int(f*10+0.5)) / 10 }
