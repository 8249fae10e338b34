package scale

import (
	"fmt"
	"math"
	"sort"
)

// Verdicts of a fit: how a quantity grows with the number of volumes.
const (
	// Linear: the points lie on a line that rises.
	Linear = "linear"
	// Flat: the line rises by too little to tell from the measurement's
	// noise; a constant cost.
	Flat = "flat"
	// NotLinear: the line rises, but the points do not lie on it.
	NotLinear = "not linear"
	// TooFew: fewer points than a fit needs.
	TooFew = "too few points"
)

// The rule that calls a fit linear (Rule says it in words).
const (
	// minFitPoints: a line through two points proves nothing.
	minFitPoints = 3
	// minR2 is the least R² of a linear fit.
	minR2 = 0.9
	// maxResidualShare bounds every point's distance from the line, as a
	// share of the line's rise over the measured range: over 10, 30, 60
	// and 100 volumes a parabola's points lie up to 12% of its rise off
	// their line and a square root's 7%, with R² of 0.95 and 0.98.
	maxResidualShare = 0.05
	// flatShare: a line that rises by less than this share of the mean
	// (or than flatResolutions times the resolution) is flat.
	flatShare       = 0.10
	flatResolutions = 1
	// flatEpsilon is float rounding, relative to the ys' size.
	flatEpsilon = 1e-12
)

// Rule is the rule of the verdicts, for the pages that print them.
var Rule = fmt.Sprintf("least squares of each quantity against the volumes at start, per mode, shape and hop; "+
	"flat when the line rises over the measured range by less than %d resolution (100 ms for node Ready and pods Running, the poll interval for the old mounts, the kubelet's 2 s housekeeping for the old pod dirs) or %.0f%% of the mean; "+
	"linear when, with at least %d points, R² ≥ %.1f and no point lies further from the line than %.0f%% of its rise (or one resolution, whichever is larger); "+
	"else not linear",
	flatResolutions, 100*flatShare, minFitPoints, minR2, 100*maxResidualShare)

// Fit is a least-squares line of one quantity of one series against the
// number of volumes, and its verdict.
type Fit struct {
	Series   Series `json:"series"`
	Quantity string `json:"quantity"`
	Unit     string `json:"unit"`
	Points   int    `json:"points"`
	// Slope is the cost of one more volume (unit per volume); Intercept
	// the line at no volume.
	Slope     float64 `json:"slope"`
	Intercept float64 `json:"intercept"`
	R2        float64 `json:"r2"`
	// Rise is the line's rise over the measured range of volumes.
	Rise float64 `json:"rise"`
	// MaxResidual is the farthest point's distance from the line, at
	// MaxResidualAt volumes.
	MaxResidual   float64 `json:"maxResidual"`
	MaxResidualAt int     `json:"maxResidualAt"`
	Verdict       string  `json:"verdict"`
	// Why says what decided the verdict.
	Why string `json:"why"`
}

// LeastSquares fits y = Slope·x + Intercept. R² is 1 when the ys do not
// vary (the line explains all there is). It needs two distinct xs.
func LeastSquares(xs, ys []float64) (slope, intercept, r2 float64, err error) {
	if len(xs) != len(ys) {
		return 0, 0, 0, fmt.Errorf("fit: %d xs, %d ys", len(xs), len(ys))
	}
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if len(xs) < 2 || sxx == 0 {
		return 0, 0, 0, fmt.Errorf("fit: %d points over %d distinct volumes; want two at least", len(xs), distinct(xs))
	}
	slope = sxy / sxx
	intercept = my - slope*mx
	if syy <= flatEpsilon*n*(my*my+1) {
		// The ys do not vary beyond float rounding.
		return slope, intercept, 1, nil
	}
	var ssr float64
	for i := range xs {
		r := ys[i] - (slope*xs[i] + intercept)
		ssr += r * r
	}
	return slope, intercept, 1 - ssr/syy, nil
}

func distinct(xs []float64) int {
	seen := map[float64]bool{}
	for _, x := range xs {
		seen[x] = true
	}
	return len(seen)
}

// FitQuantity fits one quantity of the points of one series, and judges
// it by the Rule; resolution is the quantity's.
func FitQuantity(s Series, q Quantity, points []Point, resolution float64) Fit {
	f := Fit{Series: s, Quantity: q.Name, Unit: q.Unit}
	var xs, ys []float64
	for _, p := range points {
		if SeriesOf(p) != s {
			continue
		}
		if v, ok := p.Values[q.Name]; ok {
			xs = append(xs, float64(p.Volumes))
			ys = append(ys, v)
		}
	}
	f.Points = len(xs)
	if len(xs) < minFitPoints || distinct(xs) < minFitPoints {
		f.Verdict, f.Why = TooFew, fmt.Sprintf("%d points over %d volume counts; a fit needs %d", len(xs), distinct(xs), minFitPoints)
		return f
	}
	var err error
	if f.Slope, f.Intercept, f.R2, err = LeastSquares(xs, ys); err != nil {
		f.Verdict, f.Why = TooFew, err.Error()
		return f
	}
	lo, hi := xs[0], xs[0]
	mean := 0.0
	for i, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
		mean += ys[i] / float64(len(ys))
		r := ys[i] - (f.Slope*x + f.Intercept)
		if math.Abs(r) > math.Abs(f.MaxResidual) {
			f.MaxResidual, f.MaxResidualAt = r, int(x)
		}
	}
	f.Rise = f.Slope * (hi - lo)
	flat := math.Max(flatResolutions*resolution, flatShare*math.Abs(mean))
	bound := math.Max(maxResidualShare*math.Abs(f.Rise), resolution)
	switch {
	case math.Abs(f.Rise) < flat:
		f.Verdict = Flat
		f.Why = fmt.Sprintf("rises by %s over %g to %g volumes, under %s", fmtValue(f.Rise, q.Unit), lo, hi, fmtValue(flat, q.Unit))
	case f.R2 < minR2:
		f.Verdict = NotLinear
		f.Why = fmt.Sprintf("R² %.2f < %.1f", f.R2, minR2)
	case math.Abs(f.MaxResidual) > bound:
		f.Verdict = NotLinear
		f.Why = fmt.Sprintf("the point at %d volumes lies %s off the line, over %s; %s", f.MaxResidualAt, fmtValue(f.MaxResidual, q.Unit), fmtValue(bound, q.Unit), curvature(xs, ys, f))
	default:
		f.Verdict = Linear
		f.Why = fmt.Sprintf("R² %.2f, every point within %s of the line", f.R2, fmtValue(bound, q.Unit))
	}
	return f
}

// curvature tells from the residuals' signs at the ends and in the middle
// whether the points bend up (faster than linear) or down.
func curvature(xs, ys []float64, f Fit) string {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return xs[idx[a]] < xs[idx[b]] })
	res := func(i int) float64 { return ys[i] - (f.Slope*xs[i] + f.Intercept) }
	ends := res(idx[0]) + res(idx[len(idx)-1])
	var middle float64
	for _, i := range idx[1 : len(idx)-1] {
		middle += res(i)
	}
	switch {
	case ends > 0 && middle < 0:
		return "the points bend up: it grows faster than linearly"
	case ends < 0 && middle > 0:
		return "the points bend down: it grows slower than linearly"
	}
	return "the points scatter about the line"
}

// fmtValue is a quantity's value with its unit ("0.25 s", "3 MiB").
func fmtValue(v float64, unit string) string {
	return fmt.Sprintf("%.3g %s", v, unit)
}

// FitAll fits every quantity of every series of the result's points, and
// keeps the fits in r.Fits.
func (r *Result) FitAll() {
	r.Fits = nil
	for _, s := range seriesIn(r.Points) {
		for _, q := range Quantities {
			res := q.Resolution
			if res == 0 {
				res = r.PollInterval.Seconds()
			}
			r.Fits = append(r.Fits, FitQuantity(s, q, r.Points, res))
		}
	}
}

// FitOf is the result's fit of one quantity of a series, and false when it
// has none.
func (r *Result) FitOf(s Series, quantity string) (Fit, bool) {
	for _, f := range r.Fits {
		if f.Series == s && f.Quantity == quantity {
			return f, true
		}
	}
	return Fit{}, false
}
