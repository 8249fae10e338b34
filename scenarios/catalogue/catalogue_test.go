package catalogue

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

func TestCatalogueIsWellFormed(t *testing.T) {
	all := All()
	if len(all) < 12 {
		t.Errorf("%d entries, want at least 12", len(all))
	}
	names, labels := map[string]bool{}, map[string]bool{}
	items := map[int]bool{}
	for _, e := range all {
		if names[e.Name] || labels[e.Label()] {
			t.Errorf("duplicate entry %s", e.Name)
		}
		names[e.Name], labels[e.Label()] = true, true
		if e.Kind != Shape && e.Kind != Fault {
			t.Errorf("%s: kind %q", e.Name, e.Kind)
		}
		if e.Kind == Fault {
			items[e.Item] = true
		}
		if e.Plants == "" || e.Checks == "" || len(e.Expect) == 0 {
			t.Errorf("%s: says nothing of what it plants, checks or expects", e.Name)
		}
		switch e.Status {
		case Runs:
			if len(e.Providers) == 0 {
				t.Errorf("%s runs on no provider", e.Name)
			}
		case NeedsDriver, NotYet:
			if len(e.Providers) > 0 {
				t.Errorf("%s does not run yet but lists providers", e.Name)
			}
		default:
			t.Errorf("%s: status %q", e.Name, e.Status)
		}
		for _, x := range e.Expect {
			for _, b := range []string{x.From, x.Before} {
				if b != "" {
					if _, err := version.ParseGeneric(b); err != nil {
						t.Errorf("%s: bound %q: %v", e.Name, b, err)
					}
				}
			}
			if x.Outcome == KnownBug && (x.Bug == "" || len(x.Refs) == 0) {
				t.Errorf("%s: a known bug needs its symptom and a reference", e.Name)
			}
			for _, r := range x.Refs {
				if r.ID == "" || r.URL == "" {
					t.Errorf("%s: reference %+v", e.Name, r)
				}
			}
		}
		// Ranges do not overlap: each version has at most one expectation.
		for _, v := range []string{"1.26.0", "1.30.0", "1.34.4", "1.35.4", "1.36.3", "1.37.2", "1.38.0"} {
			n := 0
			for _, x := range e.Expect {
				if x.Covers(version.MustParseSemantic(v)) {
					n++
				}
			}
			if n > 1 {
				t.Errorf("%s: %d expectations cover %s", e.Name, n, v)
			}
		}
	}
	for i := 1; i <= 12; i++ {
		if !items[i] {
			t.Errorf("issue 9's fault %d has no entry", i)
		}
	}
	if _, ok := Lookup("reboot"); !ok {
		t.Error("Lookup(reboot) found nothing")
	}
}

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

func TestJudge(t *testing.T) {
	bug := Entry{Name: "leak", Kind: Fault, Expect: []Expectation{{From: "1.34", Outcome: KnownBug, Bug: "global-mount leak", Says: "leaks", Refs: []Ref{issue(85476)}}}}
	clean := Entry{Name: "fine", Kind: Fault, Expect: []Expectation{{From: "1.30", Outcome: Clean, Refs: []Ref{issue(124057)}, FixedIn: "1.30"}}}
	v := version.MustParseSemantic("1.37.2")

	d, err := Judge(bug, v, Observation{Seen: true, Detail: "globalmount of pv-1 still mounted"})
	if err != nil || d == nil || !d.IsExpected() || !strings.Contains(d.Reason, "#85476 reproduces on kubelet v1.37.2") || d.Observed != "globalmount of pv-1 still mounted" {
		t.Errorf("known bug seen: %+v, %v", d, err)
	}
	d, err = Judge(bug, v, Observation{Detail: "globalmount unmounted"})
	if err != nil || d == nil || !d.IsExpected() || !strings.Contains(d.Reason, "expected #85476 global-mount leak not seen on kubelet v1.37.2: fixed upstream? update the expectation") {
		t.Errorf("known bug not seen must be said, not passed: %+v, %v", d, err)
	}
	if d, err := Judge(clean, v, Observation{Detail: "clean"}); d != nil || err != nil {
		t.Errorf("clean: %+v, %v", d, err)
	}
	_, err = Judge(clean, v, Observation{Seen: true, Detail: "pods/u1 still present"})
	var bse *BugSeenError
	if !errors.As(err, &bse) || !strings.Contains(err.Error(), "pods/u1 still present") || !strings.Contains(err.Error(), "fixed in 1.30") {
		t.Errorf("clean expectation, bug seen: %v", err)
	}
	_, err = Judge(bug, version.MustParseSemantic("1.33.0"), Observation{})
	var nce *NotCoveredError
	if !errors.As(err, &nce) {
		t.Errorf("uncovered version: %v", err)
	}
}

func TestWrite(t *testing.T) {
	var b strings.Builder
	if err := Write(&b, All()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, e := range All() {
		if !strings.Contains(out, "\n"+e.Name+" (") || !strings.Contains(out, "label "+e.Label()) {
			t.Errorf("entry %s or its label missing", e.Name)
		}
		for _, x := range e.Expect {
			for _, r := range x.Refs {
				if !strings.Contains(out, r.ID+" "+r.URL) {
					t.Errorf("%s: reference %s missing", e.Name, r.ID)
				}
			}
		}
	}
	for _, want := range []string{"(fault 5)", "known bug", "not fixed yet", "label-filter=catalogue"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}

	// Every entry runs today; an entry added before its code must still
	// print what it waits for.
	waiting := All()[0]
	waiting.Name, waiting.Status, waiting.Waits = "waiting-entry", NeedsDriver, "a stall knob"
	b.Reset()
	if err := Write(&b, []Entry{waiting}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "needs driver: a stall knob") {
		t.Errorf("an entry waiting for the driver prints %q", b.String())
	}
}
