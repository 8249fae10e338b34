package catalogue

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// checkVersions are the kubelets an entry's expectations must not cover
// twice: each minor skewtest has run, and one beyond.
var checkVersions = []string{"1.26.0", "1.30.0", "1.34.4", "1.35.4", "1.36.3", "1.37.2", "1.38.0"}

// Check reports what is wrong with an entry as written: its kind and
// status, the texts a report prints, its expectations' bounds, known bugs
// without a symptom or a reference, clean expectations with one, symptom
// patterns that cannot be matched, and versions two expectations cover.
func (e Entry) Check() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{e.Name}, args...)...))
	}
	if e.Kind != Shape && e.Kind != Fault {
		bad("kind %q", e.Kind)
	}
	if e.Plants == "" || e.Checks == "" || len(e.Expect) == 0 {
		bad("says nothing of what it plants, checks or expects")
	}
	switch e.Status {
	case Runs:
	case NeedsDriver, NotYet:
		if len(e.Needs) > 0 {
			bad("does not run yet but says what it needs of a node")
		}
	default:
		bad("status %q", e.Status)
	}
	for _, x := range e.Expect {
		for _, b := range []string{x.From, x.Before} {
			if b != "" {
				if _, err := version.ParseGeneric(b); err != nil {
					bad("bound %q: %v", b, err)
				}
			}
		}
		if x.Outcome == KnownBug && (x.Bug == "" || len(x.Refs) == 0) {
			bad("a known bug needs its name and a reference")
		}
		if x.Outcome == KnownBug && len(x.Symptom.Traces) == 0 && len(x.Symptom.Counters) == 0 {
			bad("%s: a known bug's symptom names neither what it leaves nor a counter", x.Versions())
		}
		if x.Outcome != KnownBug && !x.Symptom.IsZero() {
			bad("%s: a clean expectation has no symptom", x.Versions())
		}
		if err := x.Symptom.check(); err != nil {
			bad("%s: %v", x.Versions(), err)
		}
		for _, r := range x.Refs {
			if r.ID == "" || r.URL == "" {
				bad("reference %+v", r)
			}
		}
	}
	// Ranges do not overlap: each version has at most one expectation
	// (Covers needs bounds that parse).
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, v := range checkVersions {
		n := 0
		for _, x := range e.Expect {
			if x.Covers(version.MustParseSemantic(v)) {
				n++
			}
		}
		if n > 1 {
			bad("%d expectations cover %s", n, v)
		}
	}
	return errors.Join(errs...)
}

// check checks a symptom's patterns: each names at most one placeholder a
// trace must show for each value of (each), and each compiles.
func (sy Symptom) check() (err error) {
	var patterns []string
	for _, tr := range sy.Traces {
		patterns = append(patterns, tr.Path)
	}
	patterns = append(append(append(patterns, sy.Logs...), sy.MayLog...), sy.Absent...)
	for _, p := range patterns {
		n := 0
		for _, ph := range each {
			n += strings.Count(p, ph)
		}
		if n > 1 {
			return fmt.Errorf("pattern %q names %d placeholders a trace must show for each value of; at most one", p, n)
		}
		if err := compiles(p); err != nil {
			return err
		}
	}
	if sy.AfterDelete != nil {
		if err := sy.AfterDelete.check(); err != nil {
			return fmt.Errorf("after delete: %w", err)
		}
	}
	return nil
}

// compiles tells whether compile takes pattern.
func compiles(pattern string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pattern %q: %v", pattern, r)
		}
	}()
	compile(pattern, nil, "", "", `[^/]+`, true)
	return nil
}

// LogMatches tells whether line, a line of the kubelet's log, matches one
// of the symptom's log patterns, with placeholders bound to bind's values.
func (sy Symptom) LogMatches(line string, bind map[string][]string) bool {
	for _, p := range sy.Logs {
		if lineMatches(p, line, bind, "", "") {
			return true
		}
	}
	return false
}
