package catalogue

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// Observation is what one hop of an entry saw of the entry's bug.
type Observation struct {
	// Seen says whether the entry's own check saw a sign of the bug that
	// it does not give as Traces (a clean expectation's symptom).
	Seen bool
	// Detail is what was observed, with the UID, path, metric or log line.
	Detail string
	// Traces are what the hop's pods left or had changed (their
	// leftovers, a running pod's unmounted volume, pods that did not run),
	// paths relative to the kubelet root.
	Traces []Trace
	// Bind are the values the symptom's placeholders take on this hop
	// (OldUID: the pods it deleted; PV: the workload's PVs; ...).
	Bind map[string][]string
	// Log is the kubelet's log since its start; Logged says whether the
	// node could show it.
	Log    string
	Logged bool
	// Counters are the kubelet's counters as the hop's metric step read
	// them, by canonical name; a counter the kubelet does not expose is
	// absent.
	Counters map[string]Reading
	// Counts are the numbers the symptom's counters are compared with,
	// as the run measured them.
	Counts map[Count]int
}

// sawAnything tells whether the hop showed any sign of a bug.
func (o Observation) sawAnything() bool { return o.Seen || len(o.Traces) > 0 }

// detail is the observation's detail, or its traces when it has none.
func (o Observation) detail() string {
	if o.Detail != "" || len(o.Traces) == 0 {
		return o.Detail
	}
	var ts []string
	for _, t := range o.Traces {
		ts = append(ts, t.String())
	}
	return strings.Join(ts, "; ")
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

// UnexpectedError is a hop on a kubelet with a known bug that showed
// something the bug's symptom does not name: another bug, or the known
// one by another mechanism.
type UnexpectedError struct {
	Entry, Version string
	Expectation    Expectation
	// Things are what showed beyond the symptom.
	Things []string
	Phase  string
}

func (e *UnexpectedError) Error() string {
	return fmt.Sprintf("%s%s on kubelet %s: %s, which the expected %s symptom (%s) does not name", e.Entry, e.Phase, e.Version, strings.Join(e.Things, "; "), e.Expectation.RefIDs(), e.Expectation.Bug)
}

// PartialError is a known bug's symptom that showed in part: the bug does
// not count as seen, and the rest is another failure.
type PartialError struct {
	Entry, Version string
	Expectation    Expectation
	Shown, Missing []string
	Phase          string
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("%s%s on kubelet %s: the expected %s symptom (%s) showed in part: %s, but not %s", e.Entry, e.Phase, e.Version, e.Expectation.RefIDs(), e.Expectation.Bug, strings.Join(e.Shown, "; "), strings.Join(e.Missing, "; "))
}

// Judge turns one hop's observation into its place in the report, for the
// kubelet version that started on the planted state, run with its plan
// entry's feature gates (nil for the version's defaults):
//   - a known bug whose symptom shows exactly: an expected deviation
//     citing the references;
//   - a known bug with nothing of its symptom seen: a deviation that says
//     so and asks for the expectation to be updated (never a silent pass);
//   - a known bug with anything its symptom does not name
//     (UnexpectedError), or with its symptom in part (PartialError): an
//     error, the run fails;
//   - a clean expectation and no symptom: nothing (a pass);
//   - a clean expectation and any sign of a bug: an error (the run fails).
func Judge(e Entry, kubelet *version.Version, gates map[string]bool, o Observation) (*reports.Deviation, error) {
	return judge(e, kubelet, gates, o, "", func(x Expectation) Symptom { return x.Symptom })
}

// JudgeAfterDelete judges what an entry's bug left once the workload was
// deleted (the CSI global mounts still mounted), on the plan's last
// kubelet, against its symptom's AfterDelete part: a known bug whose
// symptom names nothing then fails on anything left.
func JudgeAfterDelete(e Entry, kubelet *version.Version, gates map[string]bool, o Observation) (*reports.Deviation, error) {
	return judge(e, kubelet, gates, o, " after the workload's deletion", func(x Expectation) Symptom {
		if x.Symptom.AfterDelete == nil {
			return Symptom{}
		}
		return *x.Symptom.AfterDelete
	})
}

func judge(e Entry, kubelet *version.Version, gates map[string]bool, o Observation, phase string, symptomOf func(Expectation) Symptom) (*reports.Deviation, error) {
	v := "v" + kubelet.String() + plan.FormatGates(gates)
	x, ok := e.ExpectationForKubelet(kubelet, gates)
	if !ok {
		return nil, &NotCoveredError{Entry: e.Name, Version: v}
	}
	check := fmt.Sprintf("catalogue %s %s", e.Kind, e.Name)
	if x.Outcome != KnownBug {
		if o.sawAnything() {
			return nil, &BugSeenError{Entry: e.Name + phase, Version: v, Expectation: x, Detail: o.detail()}
		}
		return nil, nil
	}
	sy := symptomOf(x)
	m := sy.match(o)
	if len(m.unexpected) > 0 {
		return nil, &UnexpectedError{Entry: e.Name, Version: v, Expectation: x, Things: m.unexpected, Phase: phase}
	}
	expected := fmt.Sprintf("known bug on %s: %s", x.Versions(), x.Bug)
	if s := sy.String(); s != "" {
		expected += " (" + s + ")"
	}
	detail := o.detail()
	if len(m.notes) > 0 {
		detail += " [" + strings.Join(m.notes, "; ") + "]"
	}
	switch {
	case len(m.shown) == 0 && sy.IsZero():
		// A symptom that names nothing in this phase: nothing to see.
		return nil, nil
	case len(m.shown) == 0 && (len(sy.Traces) > 0 || len(sy.Logs) > 0 || len(m.counted) == 0):
		// Nothing the hop left or logged: counters alone (which earlier
		// hops' leftovers can move) do not make the bug seen.
		if len(m.counted) > 0 {
			detail += " (" + strings.Join(m.counted, "; ") + ")"
		}
		return &reports.Deviation{Check: check, Expected: expected, Observed: reports.NotSeenPrefix + detail,
			Reason: fmt.Sprintf("expected %s %s not seen on kubelet %s%s: fixed upstream? update the expectation in scenarios/catalogue", x.RefIDs(), x.Bug, v, phase)}, nil
	case len(m.missing) > 0:
		return nil, &PartialError{Entry: e.Name, Version: v, Expectation: x, Shown: append(m.shown, m.counted...), Missing: m.missing, Phase: phase}
	}
	return &reports.Deviation{Check: check, Expected: expected, Observed: detail + "; the symptom showed: " + strings.Join(append(m.shown, m.counted...), "; "),
		Reason: fmt.Sprintf("known bug %s reproduces on kubelet %s%s (affected: %s; fixed in: %s): %s", x.RefIDs(), v, phase, x.Versions(), fixedIn(x), x.Says)}, nil
}

func fixedIn(x Expectation) string {
	if x.FixedIn == "" {
		return "not yet"
	}
	return x.FixedIn
}
