package history

import (
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

func TestRunsAreValid(t *testing.T) {
	if err := Validate(Runs()); err != nil {
		t.Fatal(err)
	}
}

// The history shows at least one shipped bug reproduced and the same
// entry clean on a fix release, as the catalogue's data says.
func TestRunsShowBugsAndFixes(t *testing.T) {
	bug, clean := map[string]bool{}, map[string]bool{}
	for _, r := range Runs() {
		checks, err := r.Checks()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range checks {
			switch {
			case !c.Covered:
			case c.Expectation.Outcome == catalogue.KnownBug:
				bug[r.Scenario] = true
			case c.Expectation.Outcome == catalogue.Clean:
				clean[r.Scenario] = true
			}
		}
	}
	for _, e := range []string{"pvc-terminating", "configmap-key-missing"} {
		if !bug[e] || !clean[e] {
			t.Errorf("%s: reproduced somewhere %v, clean somewhere %v; want both", e, bug[e], clean[e])
		}
	}
}

func TestValidateRefusesBadRuns(t *testing.T) {
	for _, tc := range []struct {
		run  Run
		want string
	}{
		{Run{Name: "skew", APIServer: "v1.35.4", Plan: "v1.28.15,v1.26.15", Proves: "x"}, "outside the version skew policy"},
		{Run{Name: "entry", APIServer: "v1.28.15", Plan: "v1.28.15,v1.26.15", Scenario: "no-such-entry", Proves: "x"}, `no catalogue entry "no-such-entry"`},
		{Run{Name: "uncovered", APIServer: "v1.28.15", Plan: "v1.28.15,v1.26.15", Scenario: "restart-no-delete", Proves: "x"}, "has no expectation for kubelet v1.26.15"},
		{Run{Name: "paths", APIServer: "v1.28.15", Plan: "v1.28.15,v1.26.15", Paths: []string{New}, Proves: "x"}, "1 paths for 2 plan entries"},
	} {
		err := Validate([]Run{tc.run})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.run.Name, err, tc.want)
		}
	}
}
