package catalogue

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/nodes"
)

func TestCovers(t *testing.T) {
	x := Expectation{From: "1.28", Before: "1.37"}
	for v, want := range map[string]bool{"1.27.9": false, "1.28.0": true, "1.36.3": true, "1.37.0": false, "1.37.2": false} {
		if got := x.Covers(version.MustParseSemantic(v)); got != want {
			t.Errorf("[1.28, 1.37) covers %s = %v", v, got)
		}
	}
	if got := (Expectation{}).Versions(); got != "every version" {
		t.Errorf("Versions of an unbounded range = %q", got)
	}
}

// leakSymptom is a global-mount leak's symptom, for the judge's tests.
var leakSymptom = Symptom{Traces: []Trace{{Kind: Mounted, Path: "plugins/kubernetes.io/csi/" + Driver + "/" + VolumeHash + "/globalmount"}}}

// leaked is an observation of that leak for one PV.
func leaked(detail string) Observation {
	return Observation{Detail: detail, Traces: []Trace{{Kind: Mounted, Path: "plugins/kubernetes.io/csi/drv/h1/globalmount"}},
		Bind: map[string][]string{Driver: {"drv"}, VolumeHash: {"h1"}}}
}

func TestJudge(t *testing.T) {
	bug := Entry{Name: "leak", Kind: Fault, Expect: []Expectation{{From: "1.34", Outcome: KnownBug, Bug: "global-mount leak", Says: "leaks", Symptom: leakSymptom, Refs: []Ref{Issue(85476)}}}}
	clean := Entry{Name: "fine", Kind: Fault, Expect: []Expectation{{From: "1.30", Outcome: Clean, Refs: []Ref{Issue(124057)}, FixedIn: "1.30"}}}
	v := version.MustParseSemantic("1.37.2")

	d, err := Judge(bug, v, nil, leaked("globalmount of pv-1 still mounted"))
	if err != nil || d == nil || !d.IsExpected() || !strings.Contains(d.Reason, "#85476 reproduces on kubelet v1.37.2") || !strings.HasPrefix(d.Observed, "globalmount of pv-1 still mounted") {
		t.Errorf("known bug seen: %+v, %v", d, err)
	}
	d, err = Judge(bug, v, nil, Observation{Detail: "globalmount unmounted"})
	if err != nil || d == nil || !d.IsExpected() || !strings.Contains(d.Reason, "expected #85476 global-mount leak not seen on kubelet v1.37.2: fixed upstream? update the expectation") {
		t.Errorf("known bug not seen must be said, not passed: %+v, %v", d, err)
	}
	if d, err := Judge(clean, v, nil, Observation{Detail: "clean"}); d != nil || err != nil {
		t.Errorf("clean: %+v, %v", d, err)
	}
	_, err = Judge(clean, v, nil, Observation{Seen: true, Detail: "pods/u1 still present"})
	var bse *BugSeenError
	if !errors.As(err, &bse) || !strings.Contains(err.Error(), "pods/u1 still present") || !strings.Contains(err.Error(), "fixed in 1.30") {
		t.Errorf("clean expectation, bug seen: %v", err)
	}
	_, err = Judge(bug, version.MustParseSemantic("1.33.0"), nil, Observation{})
	var nce *NotCoveredError
	if !errors.As(err, &nce) {
		t.Errorf("uncovered version: %v", err)
	}
}

// Patch bounds compare the release; minor bounds the minor.
func TestCoversPatchBounds(t *testing.T) {
	x := Expectation{From: "1.32.4", Before: "1.33"}
	for v, want := range map[string]bool{"1.32.2": false, "1.32.3": false, "1.32.4": true, "1.32.4-rc.0": true, "1.32.13": true, "1.33.0": false, "1.31.14": false} {
		if got := x.Covers(version.MustParseSemantic(v)); got != want {
			t.Errorf("[1.32.4, 1.33) covers %s = %v, want %v", v, got, want)
		}
	}
}

// PR #130335's backports: the bug on every patch before each minor's fix,
// none from it; 1.29, which got no backport, keeps the bug.
func TestByFix(t *testing.T) {
	exps := ByFix("1.26", Expectation{Outcome: KnownBug, Bug: "unmounted"}, Expectation{Outcome: Clean},
		"1.30.12", "1.31.8", "1.32.4", "1.33.0")
	e := Entry{Name: "pvc-terminating", Expect: exps}
	for v, want := range map[string]Outcome{
		"1.26.15": KnownBug, "1.29.6": KnownBug, "1.30.0": KnownBug, "1.30.11": KnownBug, "1.30.12": Clean, "1.30.14": Clean,
		"1.31.0": KnownBug, "1.31.7": KnownBug, "1.31.8": Clean, "1.32.2": KnownBug, "1.32.4": Clean, "1.32.13": Clean,
		"1.33.0": Clean, "1.37.2": Clean,
	} {
		x, ok := e.ExpectationFor(version.MustParseSemantic(v))
		if !ok || x.Outcome != want {
			t.Errorf("%s: %v (covered %v), want %v; ranges %v", v, x.Outcome, ok, want, ranges(exps))
		}
		if ok && x.FixedIn != "1.30.12, 1.31.8, 1.32.4, 1.33.0" {
			t.Errorf("%s: FixedIn %q", v, x.FixedIn)
		}
	}
	if _, ok := e.ExpectationFor(version.MustParseSemantic("1.25.16")); ok {
		t.Errorf("1.25.16 is before the expectations' start and must not be covered")
	}
	// A fix released in a minor's .0 between backports ends the bug there.
	exps = ByFix("1.26", Expectation{Outcome: KnownBug}, Expectation{Outcome: Clean}, "1.26.13", "1.27.10", "1.28.6", "1.29.1", "1.30.0")
	e = Entry{Expect: exps}
	for v, want := range map[string]Outcome{"1.26.12": KnownBug, "1.26.15": Clean, "1.27.9": KnownBug, "1.28.5": KnownBug, "1.28.15": Clean, "1.29.0": KnownBug, "1.29.6": Clean, "1.30.0": Clean, "1.37.2": Clean} {
		if x, ok := e.ExpectationFor(version.MustParseSemantic(v)); !ok || x.Outcome != want {
			t.Errorf("#119923 %s: %v, want %v; ranges %v", v, x.Outcome, want, ranges(exps))
		}
	}
}

func ranges(exps []Expectation) []string {
	var out []string
	for _, x := range exps {
		out = append(out, x.Versions()+": "+string(x.Outcome))
	}
	return out
}

// An expectation that needs gates covers only a kubelet run with them,
// and the report says which.
func TestExpectationGates(t *testing.T) {
	off := map[string]bool{"NewVolumeManagerReconstruction": false}
	e := Entry{Name: "reboot", Kind: Fault, Expect: []Expectation{
		{From: "1.28", Before: "1.30", Gates: off, Outcome: KnownBug, Bug: "NodeStage skipped", Refs: []Ref{Issue(117513)}},
		{From: "1.28", Outcome: Clean},
	}}
	v := version.MustParseSemantic("1.28.15")
	if x, _ := e.ExpectationForKubelet(v, off); x.Outcome != KnownBug {
		t.Errorf("1.28.15 with the gate off: %v", x.Outcome)
	}
	if x, _ := e.ExpectationForKubelet(v, nil); x.Outcome != Clean {
		t.Errorf("1.28.15 with default gates: %v", x.Outcome)
	}
	if x, _ := e.ExpectationForKubelet(v, map[string]bool{"NewVolumeManagerReconstruction": true}); x.Outcome != Clean {
		t.Errorf("1.28.15 with the gate on: %v", x.Outcome)
	}
	if got := e.Expect[0].Versions(); got != "1.28 ≤ v < 1.30 with NewVolumeManagerReconstruction=false" {
		t.Errorf("Versions() = %q", got)
	}
	e.Expect[0].Symptom = Symptom{Traces: []Trace{{Kind: NotRunning}}}
	d, err := Judge(e, v, off, Observation{Detail: "no NodeStage", Traces: []Trace{{Kind: NotRunning}}})
	if err != nil || d == nil || !strings.Contains(d.Reason, "#117513 reproduces on kubelet v1.28.15+NewVolumeManagerReconstruction=false") {
		t.Errorf("Judge with gates: %+v, %v", d, err)
	}
}

func TestReproduced(t *testing.T) {
	bug := Entry{Name: "leak", Kind: Fault, Expect: []Expectation{{Outcome: KnownBug, Bug: "leak", Symptom: leakSymptom, Refs: []Ref{Issue(85476)}}}}
	v := version.MustParseSemantic("1.37.2")
	seen, _ := Judge(bug, v, nil, leaked("leaked"))
	missed, _ := Judge(bug, v, nil, Observation{Detail: "unmounted"})
	if !seen.Reproduced() || missed.Reproduced() {
		t.Errorf("Reproduced(seen) = %v, Reproduced(not seen) = %v", seen.Reproduced(), missed.Reproduced())
	}
}

// Check names each way an entry can be written wrong, and passes one
// written right.
func TestCheck(t *testing.T) {
	good := Entry{Name: "leak", Kind: Fault, Status: Runs, Plants: "p", Checks: "c",
		Expect: []Expectation{{From: "1.34", Outcome: KnownBug, Bug: "leak", Symptom: leakSymptom, Refs: []Ref{Issue(85476)}}, {Before: "1.34", Outcome: Clean}}}
	if err := good.Check(); err != nil {
		t.Fatalf("a well-formed entry: %v", err)
	}
	for want, mutate := range map[string]func(*Entry){
		`kind ""`:                        func(e *Entry) { e.Kind = "" },
		"says nothing of what it plants": func(e *Entry) { e.Plants = "" },
		`status "later"`:                 func(e *Entry) { e.Status = "later" },
		"does not run yet but says":      func(e *Entry) { e.Status, e.Needs = NotYet, []nodes.Capability{nodes.HostNode} },
		`bound "one.two"`:                func(e *Entry) { e.Expect[1].Before = "one.two" },
		"needs its name and a reference": func(e *Entry) { e.Expect[0].Refs = nil },
		"names neither what it leaves":   func(e *Entry) { e.Expect[0].Symptom = Symptom{Logs: []string{"x"}} },
		"a clean expectation has no":     func(e *Entry) { e.Expect[1].Symptom = leakSymptom },
		"placeholders a trace must show": func(e *Entry) { e.Expect[0].Symptom.Traces = []Trace{{Kind: Dir, Path: "pods/" + OldUID + "/" + UID}} },
		"2 expectations cover 1.37.2":    func(e *Entry) { e.Expect[1].Before = "" },
		"reference {ID:#1 URL:}":         func(e *Entry) { e.Expect[0].Refs = []Ref{{ID: "#1"}} },
	} {
		e := good
		e.Expect = append([]Expectation(nil), good.Expect...)
		mutate(&e)
		if err := e.Check(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Check() = %v", want, err)
		}
	}
}
