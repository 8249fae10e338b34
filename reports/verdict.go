package reports

import "fmt"

// ComputeVerdict sets every Hop.Verdict, then Run.Verdict and, when the run
// failed and Failure is empty, Failure.
//
// A hop fails when any of its metrics fails or any of its steps (Step.Hop
// equal to its Number) fails; it is Skipped when it has steps, all skipped,
// and no metrics; it passes with expected deviations when a metric has that
// verdict or one of its steps does or saw a documented deviation; otherwise
// it passes.
//
// The run fails when any step fails, any hop or metric fails, or any
// unexpected deviation was seen. A step counts as failed when its verdict is
// Fail, when it has no verdict (it never finished, so it proved nothing),
// or when it saw an unexpected deviation. Otherwise the run is Skipped when
// it has nothing to show (no steps and no hops, or every step skipped),
// PassWithExpectedDeviations when any expected deviation exists (in a step,
// or a metric with that verdict), else Pass.
//
// Unreached hops (Run.Unreached) do not decide a run's verdict: nothing
// was judged on them, and the verdict is that of the hops that were (a
// tour's merge fails a tour that left pairs unreached, which it set out
// to prove). The reports say which hops were not reached, and why.
//
// A failure is never turned into a pass: a hop or run already marked Fail
// (for example by a harness that aborted outside any step) stays Fail.
// Failure becomes the first failed step's "name: error", else the first
// failed metric ("hop N: metric NAME = V, expected E: reason"), else the
// first failed hop.
func (r *Run) ComputeVerdict() {
	for i := range r.Hops {
		r.Hops[i].Verdict = r.hopVerdict(r.Hops[i])
	}

	failure := ""
	failed := r.Verdict == Fail
	note := func(s string) {
		failed = true
		if failure == "" {
			failure = s
		}
	}
	for _, s := range r.Steps {
		if stepFailed(s) {
			note(stepFailure(s))
		}
	}
	for _, h := range r.Hops {
		for _, m := range h.Metrics {
			if metricFailed(m) {
				s := fmt.Sprintf("hop %d: %s", h.Number, metricText(m))
				if m.Reason != "" {
					s += ": " + oneLine(m.Reason)
				}
				note(s)
			}
		}
	}
	for _, h := range r.Hops {
		if h.Verdict == Fail {
			note(fmt.Sprintf("hop %d (%s → %s) failed", h.Number, oneLine(withGates(h.From, h.FromGates)), oneLine(withGates(h.To, h.ToGates))))
		}
	}
	if failed {
		r.Verdict = Fail
		if r.Failure == "" {
			r.Failure = failure
		}
		return
	}

	allSkipped := len(r.Steps) > 0
	for _, s := range r.Steps {
		if s.Verdict != Skipped {
			allSkipped = false
		}
	}
	if allSkipped || (len(r.Steps) == 0 && len(r.Hops) == 0) {
		r.Verdict = Skipped
		return
	}

	r.Verdict = Pass
	for _, s := range r.Steps {
		if s.Verdict == PassWithExpectedDeviations || (s.Verdict != Skipped && hasExpected(s)) {
			r.Verdict = PassWithExpectedDeviations
		}
	}
	for _, h := range r.Hops {
		if h.Verdict == PassWithExpectedDeviations {
			r.Verdict = PassWithExpectedDeviations
		}
	}
}

// hopVerdict computes one hop's verdict from its metrics and its steps.
func (r *Run) hopVerdict(h Hop) Verdict {
	if h.Verdict == Fail {
		return Fail
	}
	var steps []Step
	for _, s := range r.Steps {
		if s.Hop == h.Number && h.Number != 0 {
			steps = append(steps, s)
		}
	}
	for _, m := range h.Metrics {
		if metricFailed(m) {
			return Fail
		}
	}
	for _, s := range steps {
		if stepFailed(s) {
			return Fail
		}
	}
	if len(steps) > 0 && len(h.Metrics) == 0 {
		allSkipped := true
		for _, s := range steps {
			if s.Verdict != Skipped {
				allSkipped = false
			}
		}
		if allSkipped {
			return Skipped
		}
	}
	for _, m := range h.Metrics {
		if m.Verdict == PassWithExpectedDeviations {
			return PassWithExpectedDeviations
		}
	}
	for _, s := range steps {
		if s.Verdict == PassWithExpectedDeviations || (s.Verdict != Skipped && hasExpected(s)) {
			return PassWithExpectedDeviations
		}
	}
	return Pass
}
