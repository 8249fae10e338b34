package scale

import (
	"math"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/reports"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestLeastSquares(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		xs, ys               []float64
		slope, intercept, r2 float64
	}{
		{"a line", []float64{10, 30, 60, 100}, []float64{4.2, 4.6, 5.2, 6.0}, 0.02, 4, 1},
		{"flat", []float64{10, 30, 60}, []float64{0.7, 0.7, 0.7}, 0, 0.7, 1},
		// y = x² at 0, 1, 2: slope 2, intercept -1/3, residuals 1/3,
		// -2/3, 1/3 against a spread of 78/9: R² 12/13.
		{"a parabola", []float64{0, 1, 2}, []float64{0, 1, 4}, 2, -1.0 / 3, 12.0 / 13},
	} {
		s, i, r2, err := LeastSquares(tc.xs, tc.ys)
		if err != nil || !near(s, tc.slope) || !near(i, tc.intercept) || !near(r2, tc.r2) {
			t.Errorf("%s: slope %g intercept %g R² %g (%v), want %g %g %g", tc.name, s, i, r2, err, tc.slope, tc.intercept, tc.r2)
		}
	}
	for _, bad := range [][2][]float64{{{1}, {1}}, {{5, 5, 5}, {1, 2, 3}}, {{1, 2}, {1}}} {
		if _, _, _, err := LeastSquares(bad[0], bad[1]); err == nil {
			t.Errorf("LeastSquares(%v, %v) fitted a line", bad[0], bad[1])
		}
	}
}

func series(values map[int]float64) (Series, []Point) {
	s := Series{Mode: "tmpfs", Shape: ShapePods, Hop: 1, Kubelet: "v1.34.4"}
	var pts []Point
	for n, v := range values {
		pts = append(pts, Point{Mode: s.Mode, Shape: s.Shape, Hop: s.Hop, Kubelet: s.Kubelet, Volumes: n, Values: map[string]float64{reports.PhasePodDirsGone: v}})
	}
	return s, pts
}

// The rule's verdicts, each on the shape it names, with a poll interval
// of 250 ms as the resolution.
func TestFitVerdicts(t *testing.T) {
	q := Quantities[2]
	if q.Name != reports.PhasePodDirsGone {
		t.Fatalf("Quantities[2] is %s", q.Name)
	}
	for _, tc := range []struct {
		name    string
		values  map[int]float64
		verdict string
		why     string
	}{
		{"a line with poll noise", map[int]float64{10: 4.25, 30: 4.5, 60: 5.25, 100: 6}, Linear, "R² 0.99"},
		{"flat at the poll's noise", map[int]float64{10: 4.5, 30: 4.25, 60: 4.5, 100: 4.75}, Flat, "rises by"},
		{"a parabola", map[int]float64{10: 1.1, 30: 1.9, 60: 4.6, 100: 11}, NotLinear, "bend up"},
		{"a square root", map[int]float64{10: 31.6, 30: 54.8, 60: 77.5, 100: 100}, NotLinear, "bend down"},
		{"scattered", map[int]float64{10: 2, 30: 9, 60: 3, 100: 10}, NotLinear, "R² 0.32"},
		{"two points", map[int]float64{10: 2, 100: 10}, TooFew, "a fit needs 3"},
	} {
		s, pts := series(tc.values)
		f := FitQuantity(s, q, pts, 0.25)
		if f.Verdict != tc.verdict || !strings.Contains(f.Why, tc.why) {
			t.Errorf("%s: %s (%s), want %s with %q; fit %+v", tc.name, f.Verdict, f.Why, tc.verdict, tc.why, f)
		}
	}
	// Another series' points are not this one's.
	s, pts := series(map[int]float64{10: 1, 30: 2, 60: 3.5, 100: 5.5})
	other := pts[0]
	other.Hop = 2
	other.Values = map[string]float64{q.Name: 100}
	if f := FitQuantity(s, q, append(pts, other), 0.25); f.Points != 4 || f.Verdict != Linear {
		t.Errorf("a fit took another hop's point: %+v", f)
	}
}

// FitAll fits every quantity of every series, with the poll interval as
// the times' resolution: the fixture's old pod dirs grow as a line, node
// Ready is flat, the one-pod shape bends up, and a quantity no point
// measured has too few points.
func TestFitAll(t *testing.T) {
	r := fixture()
	series := 2*2 + 1
	if len(r.Fits) != series*len(Quantities) {
		t.Fatalf("%d fits, want %d", len(r.Fits), series*len(Quantities))
	}
	s := Series{Mode: "ebs", Shape: ShapePods, Hop: 2, Kubelet: "v1.37.2"}
	for q, want := range map[string]string{reports.PhasePodDirsGone: Linear, reports.PhaseNodeReady: Flat, KubeletPeakRSS: Linear} {
		f, ok := r.FitOf(s, q)
		if !ok || f.Verdict != want {
			t.Errorf("%s of %+v: %+v, want %s", q, s, f, want)
		}
	}
	f, _ := r.FitOf(s, reports.PhasePodDirsGone)
	if !near(f.Slope, 0.05) || !near(f.Intercept, 4.01) || f.Points != 4 || !near(f.Rise, 4.5) {
		t.Errorf("old pod dirs gone fit %+v, want slope 0.05, intercept 4.01, rise 4.5 over 4 points", f)
	}
	v := Series{Mode: "tmpfs", Shape: ShapeVolumes, Hop: 1, Kubelet: "v1.34.4"}
	if f, _ := r.FitOf(v, reports.PhasePodDirsGone); f.Verdict != NotLinear {
		t.Errorf("a parabola of 5 points: %+v", f)
	}
	if f, _ := r.FitOf(v, KubeletCPU); f.Verdict != TooFew || f.Points != 0 {
		t.Errorf("a quantity never measured: %+v", f)
	}
}

func TestCountersCheck(t *testing.T) {
	for _, tc := range []struct {
		c    Counters
		want string
	}{
		{Counters{VolumesAtStart: 100, Present: true, Reconstructed: 100}, CountersEqual},
		{Counters{VolumesAtStart: 100, Present: true, Reconstructed: 100, Errors: 1}, CountersMismatch},
		{Counters{VolumesAtStart: 100, Present: true, Reconstructed: 101}, CountersMismatch},
		{Counters{VolumesAtStart: 100, Present: true, Reconstructed: 0, Race: "registration race"}, CountersRace},
		{Counters{VolumesAtStart: 100, Present: true, Reconstructed: 99}, CountersMismatch},
		{Counters{VolumesAtStart: 100}, CountersNotExposed},
	} {
		if got, why := tc.c.Check(); got != tc.want || why == "" {
			t.Errorf("%+v: %s (%s), want %s", tc.c, got, why, tc.want)
		}
	}
}
