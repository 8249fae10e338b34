package catalogue

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// Observation is what one hop of an entry saw of the entry's bug.
type Observation struct {
	// Seen says whether the known bug's symptom showed.
	Seen bool
	// Detail is what was observed, with the UID, path, metric or log line.
	Detail string
}

// NotCoveredError is an entry run on a kubelet version it has no
// expectation for: the catalogue must say what that version does.
type NotCoveredError struct {
	Entry   string
	Version string
}

func (e *NotCoveredError) Error() string {
	return fmt.Sprintf("catalogue entry %s has no expectation for kubelet %s; add one to scenarios/catalogue", e.Entry, e.Version)
}

// BugSeenError is the symptom of a bug on a version the entry expects to
// handle it.
type BugSeenError struct {
	Entry, Version string
	Expectation    Expectation
	Detail         string
}

func (e *BugSeenError) Error() string {
	msg := fmt.Sprintf("%s on kubelet %s: %s", e.Entry, e.Version, e.Detail)
	if e.Expectation.FixedIn != "" {
		msg += fmt.Sprintf(" (expected clean: fixed in %s, %s)", e.Expectation.FixedIn, e.Expectation.RefIDs())
	} else {
		msg += " (expected clean)"
	}
	return msg
}

// Judge turns one hop's observation into its place in the report, for the
// kubelet version that started on the planted state, run with its plan
// entry's feature gates (nil for the version's defaults):
//   - a known bug seen: an expected deviation citing the references;
//   - a known bug not seen: a deviation that says so and asks for the
//     expectation to be updated (never a silent pass);
//   - a clean expectation and no symptom: nothing (a pass);
//   - a clean expectation and the symptom: an error (the run fails).
func Judge(e Entry, kubelet *version.Version, gates map[string]bool, o Observation) (*reports.Deviation, error) {
	v := "v" + kubelet.String() + plan.FormatGates(gates)
	x, ok := e.ExpectationForKubelet(kubelet, gates)
	if !ok {
		return nil, &NotCoveredError{Entry: e.Name, Version: v}
	}
	check := fmt.Sprintf("catalogue %s %s", e.Kind, e.Name)
	switch {
	case x.Outcome == KnownBug && o.Seen:
		return &reports.Deviation{Check: check, Expected: fmt.Sprintf("known bug on %s: %s", x.Versions(), x.Bug), Observed: o.Detail,
			Reason: fmt.Sprintf("known bug %s reproduces on kubelet %s (affected: %s; fixed in: %s): %s", x.RefIDs(), v, x.Versions(), fixedIn(x), x.Says)}, nil
	case x.Outcome == KnownBug:
		return &reports.Deviation{Check: check, Expected: fmt.Sprintf("known bug on %s: %s", x.Versions(), x.Bug), Observed: reports.NotSeenPrefix + o.Detail,
			Reason: fmt.Sprintf("expected %s %s not seen on kubelet %s: fixed upstream? update the expectation in scenarios/catalogue", x.RefIDs(), x.Bug, v)}, nil
	case o.Seen:
		return nil, &BugSeenError{Entry: e.Name, Version: v, Expectation: x, Detail: o.Detail}
	}
	return nil, nil
}

func fixedIn(x Expectation) string {
	if x.FixedIn == "" {
		return "not yet"
	}
	return x.FixedIn
}
