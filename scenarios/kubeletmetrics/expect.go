package kubeletmetrics

import (
	"fmt"
	"strconv"
	"strings"
)

// Check operators.
const (
	OpEqual   = "=="
	OpAtLeast = ">="
	OpAtMost  = "<="
	OpAny     = "any"
)

// Verdicts of a Result.
const (
	Pass                       = "pass"
	PassWithExpectedDeviations = "pass-with-expected-deviations"
	Fail                       = "fail"
)

// NotExposed begins the Reason of a Result whose metric the kubelet's
// version does not register (Exposed): the only metric allowed to be
// absent from a scrape.
const NotExposed = "not exposed by this kubelet version"

// LocalVolumeReconstructionReason documents why local-volume PVs fail
// reconstruction on the kubelets skewtest runs.
const LocalVolumeReconstructionReason = "kubelets 1.36/1.37 cannot reconstruct kubernetes.io/local-volume PVs (reconstructVolume.NewMounter failed: local volume source is nil or local path is not set) and fall back to force cleanup (kubernetes#121675)"

// Check is a predicate on a metric value.
type Check struct {
	Op    string // OpEqual, OpAtLeast, OpAtMost or OpAny
	Value float64
}

// Equal wants the value to be exactly v.
func Equal(v float64) Check { return Check{Op: OpEqual, Value: v} }

// AtLeast wants the value to be v or more.
func AtLeast(v float64) Check { return Check{Op: OpAtLeast, Value: v} }

// AtMost wants the value to be v or less.
func AtMost(v float64) Check { return Check{Op: OpAtMost, Value: v} }

// Any accepts every value: the metric is recorded only.
func Any() Check { return Check{Op: OpAny} }

// Holds reports whether v satisfies the check. An unknown operator never
// holds.
func (c Check) Holds(v float64) bool {
	switch c.Op {
	case OpEqual:
		return v == c.Value
	case OpAtLeast:
		return v >= c.Value
	case OpAtMost:
		return v <= c.Value
	case OpAny:
		return true
	}
	return false
}

// String renders the check as "== 0", ">= 3", "<= 3" or "any".
func (c Check) String() string {
	if c.Op == OpAny {
		return OpAny
	}
	return c.Op + " " + strconv.FormatFloat(c.Value, 'g', -1, 64)
}

// Deviation documents an expected non-ideal value.
type Deviation struct {
	Check  Check
	Reason string
}

// Expectation is what a scenario wants of one metric.
type Expectation struct {
	Metric string // canonical name, in the table of Exposed
	Check  Check
	// Deviation documents an expected non-ideal value: when Check fails but
	// Deviation.Check holds, the result is an expected deviation with
	// Deviation.Reason, not a failure.
	Deviation *Deviation
}

// Expected renders the expectation, e.g. "== 0 (expected deviation: <= 3)".
func (e Expectation) Expected() string {
	if e.Deviation == nil {
		return e.Check.String()
	}
	return fmt.Sprintf("%s (expected deviation: %s)", e.Check, e.Deviation.Check)
}

// Result is the outcome of one Expectation against one scrape.
type Result struct {
	Metric string // canonical name
	// Name is the exposition name: the one the kubelet's version
	// registers (present or missing), "" when it registers none.
	Name     string
	Value    float64 // 0 when not present
	Present  bool
	Expected string
	Verdict  string // Pass, PassWithExpectedDeviations or Fail
	Reason   string
}

// Evaluate checks every expectation against the scrape of kubelet (its
// version, such as v1.37.2), in order. What the kubelet's version
// registers, and under which name, is the table's (Exposed): a metric it
// registers must be in the scrape, and a missing one fails naming the
// metric, the version and the source file; one it does not register passes
// with Reason NotExposed, unless the scrape has it, which fails too (the
// table is wrong). A kubelet or metric outside the table is an error.
func Evaluate(s *Scrape, kubelet string, exps []Expectation) ([]Result, error) {
	out := make([]Result, 0, len(exps))
	for _, e := range exps {
		x, err := Exposed(kubelet, e.Metric)
		if err != nil {
			return nil, err
		}
		r := Result{Metric: e.Metric, Expected: e.Expected()}
		if !x.Registered() {
			if name, v, ok := s.Lookup(e.Metric, otherPrefix(e.Metric)); ok {
				r.Name, r.Value, r.Present, r.Verdict = name, v, true, Fail
				r.Reason = fmt.Sprintf("kubelet %s exposes %s (%s), which the table says it does not register (read from %s): correct the table in scenarios/kubeletmetrics/exposed.go", kubelet, name, strconv.FormatFloat(v, 'g', -1, 64), x.Source())
			} else {
				r.Verdict = Pass
				r.Reason = fmt.Sprintf("%s: kubelet %s does not register it (%s)", NotExposed, kubelet, x.Source())
			}
			out = append(out, r)
			continue
		}
		v, ok := s.Value(x.Name, nil)
		if !ok {
			r.Name, r.Verdict = x.Name, Fail
			r.Reason = fmt.Sprintf("%s is missing from the scrape of kubelet %s, which registers it (%s): the kubelet did not register it", x.Name, kubelet, x.Source())
			if other, _, ok := s.Lookup(otherPrefix(x.Name)); ok {
				r.Reason += fmt.Sprintf(" under that name; the scrape has %s, which the table does not give for this version", other)
			}
			out = append(out, r)
			continue
		}
		r.Name, r.Value, r.Present = x.Name, v, true
		val := strconv.FormatFloat(v, 'g', -1, 64)
		switch {
		case e.Check.Holds(v):
			r.Verdict = Pass
			if e.Check.Op == OpAny {
				r.Reason = "recorded: " + val
			}
		case e.Deviation != nil && e.Deviation.Check.Holds(v):
			r.Verdict = PassWithExpectedDeviations
			r.Reason = fmt.Sprintf("%s is %s, not %s; expected deviation (%s): %s", x.Name, val, e.Check, e.Deviation.Check, e.Deviation.Reason)
		default:
			r.Verdict = Fail
			r.Reason = fmt.Sprintf("%s is %s, want %s", x.Name, val, e.Expected())
		}
		out = append(out, r)
	}
	return out, nil
}

// Verdict folds results: Fail if any failed, else PassWithExpectedDeviations
// if any deviated, else Pass.
func Verdict(rs []Result) string {
	v := Pass
	for _, r := range rs {
		switch r.Verdict {
		case Fail:
			return Fail
		case PassWithExpectedDeviations:
			v = PassWithExpectedDeviations
		}
	}
	return v
}

// otherPrefix is name with the kubelet's subsystem prefix taken off, or
// put on.
func otherPrefix(name string) string {
	if n, ok := strings.CutPrefix(name, "kubelet_"); ok {
		return n
	}
	return "kubelet_" + name
}

func expect(metric string, c Check, d *Deviation) Expectation {
	return Expectation{Metric: metric, Check: c, Deviation: d}
}

// CSIExpectations is the expectation set for CSI volumes, for a kubelet start
// that found volumesAtStart volume directories: the KEP's error counters and
// the orphan error gauge stay 0, every volume was attempted, the rest is
// recorded.
func CSIExpectations(volumesAtStart int) []Expectation {
	return []Expectation{
		expect(ReconstructVolumeOperationsErrors, Equal(0), nil),
		expect(ForceCleanedFailedVolumeOpErrors, Equal(0), nil),
		expect(OrphanPodCleanedVolumesErrors, Equal(0), nil),
		expect(ReconstructVolumeOperations, AtLeast(float64(volumesAtStart)), nil),
		expect(ForceCleanedFailedVolumeOps, Any(), nil),
		expect(OrphanedRuntimePods, Any(), nil),
		expect(OrphanPodCleanedVolumes, Any(), nil),
	}
}

// LocalVolumeExpectations is CSIExpectations for kubernetes.io/local-volume
// PVs, which the kubelets skewtest runs cannot reconstruct: up to
// volumesAtStart reconstruction errors, and force cleanups, are expected
// deviations (LocalVolumeReconstructionReason). The force-cleanup error
// counter must still be 0.
func LocalVolumeExpectations(volumesAtStart int) []Expectation {
	exps := CSIExpectations(volumesAtStart)
	for i := range exps {
		switch exps[i].Metric {
		case ReconstructVolumeOperationsErrors:
			exps[i].Deviation = &Deviation{Check: AtMost(float64(volumesAtStart)), Reason: LocalVolumeReconstructionReason}
		case ForceCleanedFailedVolumeOps:
			exps[i].Check = Equal(0)
			exps[i].Deviation = &Deviation{Check: AtLeast(1), Reason: LocalVolumeReconstructionReason}
		}
	}
	return exps
}
