package scale

import (
	"encoding/xml"
	"math"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/reports"
)

// node is any element of the SVG, with its attributes and children.
type node struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Text     string     `xml:",chardata"`
	Children []node     `xml:",any"`
}

func (n node) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n node) hasClass(c string) bool {
	for _, f := range strings.Fields(n.attr("class")) {
		if f == c {
			return true
		}
	}
	return false
}

// all are n and its descendants that match, in document order.
func (n node) all(match func(node) bool) []node {
	var out []node
	if match(n) {
		out = append(out, n)
	}
	for _, c := range n.Children {
		out = append(out, c.all(match)...)
	}
	return out
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return f
}

func parseSVG(t *testing.T, s string) node {
	t.Helper()
	var root node
	if err := xml.Unmarshal([]byte(s), &root); err != nil {
		t.Fatalf("the chart is not XML: %v\n%s", err, s)
	}
	if root.XMLName.Local != "svg" || root.XMLName.Space != "http://www.w3.org/2000/svg" || root.attr("viewBox") == "" {
		t.Fatalf("root %v %v, want an svg element of the SVG namespace with a viewBox", root.XMLName, root.Attrs)
	}
	return root
}

// The chart is XML with two axes whose ticks are round numbers from 0 and
// cover the data, a line per plotted quantity and hop whose points sit
// where their values say (right for more volumes, up for more seconds),
// and a legend naming each quantity and hop.
func TestSVG(t *testing.T) {
	r := fixture()
	pn := Panel{Mode: "ebs", Shape: ShapePods}
	root := parseSVG(t, r.SVG(pn))

	ticks := map[string][]float64{}
	for _, axis := range []string{"x", "y"} {
		g := root.all(func(n node) bool { return n.XMLName.Local == "g" && n.hasClass("axis") && n.hasClass(axis) })
		if len(g) != 1 {
			t.Fatalf("%d %s axes, want 1", len(g), axis)
		}
		if len(g[0].all(func(n node) bool { return n.hasClass("axis-line") })) != 1 || len(g[0].all(func(n node) bool { return n.hasClass("axis-label") })) != 1 {
			t.Errorf("%s axis without its line or label", axis)
		}
		for _, l := range g[0].all(func(n node) bool { return n.hasClass("tick-label") }) {
			ticks[axis] = append(ticks[axis], num(t, l.Text))
		}
		if len(g[0].all(func(n node) bool { return n.hasClass("tick") })) != len(ticks[axis]) {
			t.Errorf("%s axis: tick marks and labels differ in number", axis)
		}
	}
	// x: 0 to 100 volumes; y: 0 to above the largest time, 6.01 s.
	if got := ticks["x"]; len(got) < 3 || got[0] != 0 || got[len(got)-1] < 100 || got[len(got)-1] > 200 {
		t.Errorf("x ticks %v, want 0 to about 100 volumes", got)
	}
	if got := ticks["y"]; len(got) < 3 || got[0] != 0 || got[len(got)-1] < 9.01 || got[len(got)-1] > 20 {
		t.Errorf("y ticks %v, want 0 to above 9.01 s", got)
	}
	for _, ts := range ticks {
		step := ts[1] - ts[0]
		for i := 1; i < len(ts); i++ {
			if math.Abs(ts[i]-ts[i-1]-step) > 1e-9 {
				t.Errorf("ticks %v are not evenly spaced", ts)
			}
		}
	}

	lines := root.all(func(n node) bool { return n.XMLName.Local == "g" && n.hasClass("series") })
	if len(lines) != 4*2 {
		t.Fatalf("%d lines, want 4 plotted quantities × 2 hops", len(lines))
	}
	dashes := map[string]string{}
	for _, l := range lines {
		q, hop := l.attr("data-quantity"), l.attr("data-hop")
		poly := l.all(func(n node) bool { return n.XMLName.Local == "polyline" })
		dots := l.all(func(n node) bool { return n.XMLName.Local == "circle" })
		if len(poly) != 1 || len(dots) != 4 || len(strings.Fields(poly[0].attr("points"))) != 4 {
			t.Fatalf("line %s hop %s: %d polylines, %d points", q, hop, len(poly), len(dots))
		}
		if prev, ok := dashes[hop]; ok && prev != poly[0].attr("stroke-dasharray") {
			t.Errorf("hop %s drawn in two styles", hop)
		}
		dashes[hop] = poly[0].attr("stroke-dasharray")
		for i := 1; i < len(dots); i++ {
			a, b := dots[i-1], dots[i]
			if num(t, b.attr("data-volumes")) <= num(t, a.attr("data-volumes")) || num(t, b.attr("cx")) <= num(t, a.attr("cx")) {
				t.Errorf("line %s hop %s: points not left to right by volumes", q, hop)
			}
			dv, dy := num(t, b.attr("data-value"))-num(t, a.attr("data-value")), num(t, b.attr("cy"))-num(t, a.attr("cy"))
			if dv*dy > 0 || (dv != 0 && dy == 0) {
				t.Errorf("line %s hop %s: value %s → %s drawn at y %s → %s", q, hop, a.attr("data-value"), b.attr("data-value"), a.attr("cy"), b.attr("cy"))
			}
		}
		if q == reports.PhasePodDirsGone && hop == "2" {
			// 4.01 + 0.05 × 100 = 9.01 s at 100 volumes, on the y scale.
			last := dots[3]
			yEnd := ticks["y"][len(ticks["y"])-1]
			want := float64(plotBottom) - float64(plotBottom-plotTop)*9.01/yEnd
			if math.Abs(num(t, last.attr("cy"))-want) > 0.1 || !strings.Contains(last.Children[0].Text, "9.01 s") {
				t.Errorf("old pod dirs gone at 100 volumes drawn at y %s (%q), want %.1f", last.attr("cy"), last.Children[0].Text, want)
			}
		}
	}
	if dashes["1"] == dashes["2"] {
		t.Error("both hops drawn alike")
	}

	var legend []string
	for _, tx := range root.all(func(n node) bool { return n.XMLName.Local == "text" }) {
		legend = append(legend, tx.Text)
	}
	for _, want := range []string{"node Ready", "old mounts gone", "old pod dirs gone", "pods Running", "hop 1 → v1.34.4", "hop 2 → v1.37.2", "ebs · N pods, one volume each"} {
		found := false
		for _, l := range legend {
			found = found || l == want
		}
		if !found {
			t.Errorf("no text %q in the chart: %q", want, legend)
		}
	}
}

// A panel with nothing to plot is still a valid chart, with axes from 0.
func TestSVGOfNothing(t *testing.T) {
	r := &Result{Points: []Point{{Mode: "tmpfs", Shape: ShapeVolumes, Volumes: 0, Hop: 1, Kubelet: "v1.37.2", Values: map[string]float64{}}}}
	root := parseSVG(t, r.SVG(Panel{Mode: "tmpfs", Shape: ShapeVolumes}))
	if n := len(root.all(func(n node) bool { return n.hasClass("series") })); n != 0 {
		t.Errorf("%d lines of no values", n)
	}
	if n := len(root.all(func(n node) bool { return n.hasClass("tick-label") })); n < 4 {
		t.Errorf("%d tick labels, want both axes ticked", n)
	}
}

func TestNiceAxis(t *testing.T) {
	for _, tc := range []struct{ max, step, end float64 }{
		{100, 20, 100}, {128, 50, 150}, {9.01, 2, 10}, {0.7, 0.2, 0.8}, {0, 0.2, 1}, {1234, 500, 1500},
	} {
		if step, end := niceAxis(tc.max); !near(step, tc.step) || !near(end, tc.end) {
			t.Errorf("niceAxis(%g) = %g, %g; want %g, %g", tc.max, step, end, tc.step, tc.end)
		}
	}
	if got := axisTicks(0.2, 0.8); len(got) != 5 || got[3] != 0.6 {
		t.Errorf("axisTicks(0.2, 0.8) = %v, want 0, 0.2, 0.4, 0.6, 0.8 exactly", got)
	}
}
