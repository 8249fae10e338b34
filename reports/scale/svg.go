package scale

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"

	"sigs.k8s.io/skewtest/reports"
)

// The chart's geometry, in SVG user units: the plot area, and the legend
// to its right.
const (
	chartWidth  = 780
	chartHeight = 430
	plotLeft    = 64
	plotRight   = 540
	plotTop     = 48
	plotBottom  = 370
	legendLeft  = 560
	legendRow   = 18
	tickLength  = 5
	pointRadius = 3.5
	// targetTicks is about how many steps an axis is cut into.
	targetTicks = 5
)

// quantityColour tells the plotted quantities apart, in the sign-off
// page's colours for the same phases.
var quantityColour = map[string]string{
	reports.PhaseNodeReady:   "#0969da",
	reports.PhaseMountsGone:  "#8250df",
	reports.PhasePodDirsGone: "#1a7f37",
	reports.PhasePodsRunning: "#bf8700",
}

// hopDash tells a chart's hops apart by line style: solid, dashed, dotted,
// dash-dot.
var hopDash = []string{"", "7 4", "2 3", "10 3 2 3"}

// niceAxis is a round step (1, 2 or 5 times a power of ten) cutting 0 to
// at least max into about targetTicks steps, and the axis's end, a whole
// number of steps.
func niceAxis(max float64) (step, end float64) {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		max = 1
	}
	raw := max / targetTicks
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	return step, math.Ceil(max/step-1e-9) * step
}

// plotted are the quantities on the plot.
func plotted() []Quantity {
	var out []Quantity
	for _, q := range Quantities {
		if q.Plotted {
			out = append(out, q)
		}
	}
	return out
}

// WriteSVG draws the panel's points: each plotted time against the number
// of volumes, a line per quantity (by colour) and hop (by line style),
// with axes, ticks and a legend. Each point's title says its value.
func (r *Result) WriteSVG(w io.Writer, pn Panel) error {
	_, err := io.WriteString(w, r.SVG(pn))
	return err
}

// SVG is WriteSVG's drawing as a string, to inline in a page.
func (r *Result) SVG(pn Panel) string {
	points := r.PointsOf(pn)
	series := seriesIn(points)
	qs := plotted()
	maxX, maxY := 0.0, 0.0
	for _, p := range points {
		maxX = math.Max(maxX, float64(p.Volumes))
		for _, q := range qs {
			if v, ok := p.Values[q.Name]; ok {
				maxY = math.Max(maxY, v)
			}
		}
	}
	xStep, xEnd := niceAxis(maxX)
	yStep, yEnd := niceAxis(maxY)
	x := func(v float64) float64 { return plotLeft + (plotRight-plotLeft)*v/xEnd }
	y := func(v float64) float64 { return plotBottom - (plotBottom-plotTop)*v/yEnd }
	esc := html.EscapeString
	title := pn.Title() + ": seconds from the kubelet's start against the volumes it found"

	var b strings.Builder
	f := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	f(`<svg xmlns="http://www.w3.org/2000/svg" class="scale-chart" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12" role="img" aria-label="%s">`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight, esc(title))
	f("<title>%s</title>\n", esc(title))
	f(`<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", chartWidth, chartHeight)
	f(`<text class="title" x="%d" y="24" font-size="14" font-weight="bold" fill="#1f2328">%s</text>`+"\n", plotLeft, esc(pn.Title()))

	f(`<g class="grid" stroke="#d1d9e0" stroke-width="1">`)
	for _, v := range axisTicks(yStep, yEnd)[1:] {
		f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, plotLeft, y(v), plotRight, y(v))
	}
	f("</g>\n")

	f(`<g class="axis x" stroke="#1f2328" fill="#1f2328">`)
	f(`<line class="axis-line" x1="%d" y1="%d" x2="%d" y2="%d"/>`, plotLeft, plotBottom, plotRight, plotBottom)
	for _, v := range axisTicks(xStep, xEnd) {
		f(`<line class="tick" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/><text class="tick-label" x="%.1f" y="%d" text-anchor="middle" stroke="none">%g</text>`,
			x(v), plotBottom, x(v), plotBottom+tickLength, x(v), plotBottom+tickLength+14, v)
	}
	f(`<text class="axis-label" x="%d" y="%d" text-anchor="middle" stroke="none">volumes of the force-deleted pods at the kubelet's start (N)</text>`, (plotLeft+plotRight)/2, plotBottom+42)
	f("</g>\n")

	f(`<g class="axis y" stroke="#1f2328" fill="#1f2328">`)
	f(`<line class="axis-line" x1="%d" y1="%d" x2="%d" y2="%d"/>`, plotLeft, plotTop, plotLeft, plotBottom)
	for _, v := range axisTicks(yStep, yEnd) {
		f(`<line class="tick" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/><text class="tick-label" x="%d" y="%.1f" text-anchor="end" stroke="none">%g</text>`,
			plotLeft-tickLength, y(v), plotLeft, y(v), plotLeft-tickLength-3, y(v)+4, v)
	}
	f(`<text class="axis-label" x="16" y="%d" text-anchor="middle" stroke="none" transform="rotate(-90 16 %d)">seconds from the kubelet's start</text>`, (plotTop+plotBottom)/2, (plotTop+plotBottom)/2)
	f("</g>\n")

	for i, s := range series {
		for _, q := range qs {
			var pts []Point
			for _, p := range points {
				if _, ok := p.Values[q.Name]; ok && SeriesOf(p) == s {
					pts = append(pts, p)
				}
			}
			if len(pts) == 0 {
				continue
			}
			sort.SliceStable(pts, func(a, b int) bool { return pts[a].Volumes < pts[b].Volumes })
			colour := quantityColour[q.Name]
			f(`<g class="series" data-quantity="%s" data-hop="%d" data-kubelet="%s">`, esc(q.Name), s.Hop, esc(s.Kubelet))
			var coords []string
			for _, p := range pts {
				coords = append(coords, fmt.Sprintf("%.1f,%.1f", x(float64(p.Volumes)), y(p.Values[q.Name])))
			}
			dash := ""
			if d := hopDash[i%len(hopDash)]; d != "" {
				dash = fmt.Sprintf(` stroke-dasharray="%s"`, d)
			}
			f(`<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`, colour, dash, strings.Join(coords, " "))
			for _, p := range pts {
				v := p.Values[q.Name]
				f(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s" data-volumes="%d" data-value="%g"><title>%s, %s at %d volumes: %s</title></circle>`,
					x(float64(p.Volumes)), y(v), pointRadius, colour, p.Volumes, v, esc(s.HopLabel()), esc(q.Name), p.Volumes, esc(fmtValue(v, q.Unit)))
			}
			f("</g>\n")
		}
	}

	f(`<g class="legend" font-size="12" fill="#1f2328">`)
	row := plotTop
	for _, q := range qs {
		f(`<g class="legend-quantity"><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text></g>`,
			legendLeft, row, legendLeft+24, row, quantityColour[q.Name], legendLeft+30, row+4, esc(q.Name))
		row += legendRow
	}
	row += legendRow / 2
	for i, s := range series {
		dash := ""
		if d := hopDash[i%len(hopDash)]; d != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, d)
		}
		f(`<g class="legend-hop"><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#59636e" stroke-width="2"%s/><text x="%d" y="%d">%s</text></g>`,
			legendLeft, row, legendLeft+24, row, dash, legendLeft+30, row+4, esc(s.HopLabel()))
		row += legendRow
	}
	f("</g>\n</svg>\n")
	return b.String()
}

// axisTicks are the tick values from 0 to end, step apart, rounded to the
// step's decimals (0.1 + 0.2 is 0.3 on an axis).
func axisTicks(step, end float64) []float64 {
	p := math.Pow(10, math.Max(0, -math.Floor(math.Log10(step))))
	var out []float64
	for i := 0; float64(i)*step <= end+step/2; i++ {
		out = append(out, math.Round(float64(i)*step*p)/p)
	}
	return out
}
