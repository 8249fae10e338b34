package matrix

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/scenarios/plan"
)

func versions(t *testing.T, s string) Versions {
	t.Helper()
	vs, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return vs
}

func TestParse(t *testing.T) {
	vs := versions(t, " v1.36.3, 1.34.4,v1.37.2,v1.35.4")
	if got, want := vs.String(), "v1.37.2,v1.36.3,v1.35.4,v1.34.4"; got != want {
		t.Errorf("Parse sorted newest first to %s, want %s", got, want)
	}
	if got := vs.Pairs(); got != 12 {
		t.Errorf("Pairs() = %d, want 12", got)
	}
	if got := versions(t, Default).String(); got != "v1.37.2,v1.36.3,v1.35.4,v1.34.4" {
		t.Errorf("Default parses to %s", got)
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"v1.37.2", "at least two"},
		{"v1.37.2,banana", `"banana" is not a version`},
		{"v1.37.2,v1.36.3,v1.37.2", "entry 3 v1.37.2 repeats entry 1"},
		{"v1.37.2,v1.33.0", "outside the version skew policy"},
		{"v1.37.2,v2.0.0", "has major version 1 but the API server (v2.0.0)"},
		{"v1.37.2,v1.36.3+SELinuxMount=true", "entry 2 v1.36.3+SELinuxMount=true sets feature gates"},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

// checkCircuit checks what makes a tour: every ordered pair of distinct
// versions exactly once, no hop to the same version, newest at both ends.
func checkCircuit(t *testing.T, vs Versions, c plan.Plan) {
	t.Helper()
	n := len(vs)
	if got, want := len(c.Versions), n*(n-1)+1; got != want {
		t.Fatalf("%d versions: circuit has %d entries, want %d: %s", n, got, want, c)
	}
	if !c.Versions[0].EqualTo(vs[0]) || !c.Versions[len(c.Versions)-1].EqualTo(vs[0]) {
		t.Errorf("%d versions: circuit %s does not start and end at the newest %s", n, c, plan.V(vs[0]))
	}
	seen := map[string]int{}
	for _, h := range c.Hops() {
		if h.From.EqualTo(h.To) {
			t.Errorf("%d versions: %s repeats a version", n, h)
		}
		seen[plan.V(h.From)+">"+plan.V(h.To)]++
	}
	for _, a := range vs {
		for _, b := range vs {
			if a.EqualTo(b) {
				continue
			}
			if k := plan.V(a) + ">" + plan.V(b); seen[k] != 1 {
				t.Errorf("%d versions: pair %s visited %d times in %s, want once", n, k, seen[k], c)
			}
		}
	}
	if len(c.Raw) != len(c.Versions) {
		t.Errorf("circuit has %d raw entries for %d versions", len(c.Raw), len(c.Versions))
	}
}

func TestCircuit(t *testing.T) {
	all := []string{"v1.37.2", "v1.37.1", "v1.36.3", "v1.35.4", "v1.34.4"}
	for n := 2; n <= len(all); n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			vs := versions(t, strings.Join(all[:n], ","))
			c := Circuit(vs)
			checkCircuit(t, vs, c)
			if again := Circuit(vs); again.String() != c.String() {
				t.Errorf("Circuit is not deterministic: %s, then %s", c, again)
			}
		})
	}
}

func TestCircuitDefault(t *testing.T) {
	// The default tour, pinned so a change of order shows in review.
	got := Circuit(versions(t, Default)).String()
	want := "v1.37.2 → v1.36.3 → v1.35.4 → v1.34.4 → v1.37.2 → v1.35.4 → v1.37.2 → v1.34.4 → v1.36.3 → v1.34.4 → v1.35.4 → v1.36.3 → v1.37.2"
	if got != want {
		t.Errorf("Circuit(Default) = %s, want %s", got, want)
	}
}

func TestSplit(t *testing.T) {
	c := Circuit(versions(t, Default)) // 12 hops
	for _, tc := range []struct {
		k     int
		sizes []int
	}{
		{1, []int{12}}, {2, []int{6, 6}}, {3, []int{4, 4, 4}}, {4, []int{3, 3, 3, 3}},
		{5, []int{3, 3, 2, 2, 2}}, {0, []int{12}}, {20, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
	} {
		trails := Split(c, tc.k)
		var sizes []int
		var joined []*version.Version
		for i, tr := range trails {
			sizes = append(sizes, len(tr.Versions)-1)
			if i > 0 && !tr.Versions[0].EqualTo(trails[i-1].Versions[len(trails[i-1].Versions)-1]) {
				t.Errorf("k=%d: trail %d starts at %s, not where trail %d ended", tc.k, i+1, plan.V(tr.Versions[0]), i)
			}
			if len(tr.Raw) != len(tr.Versions) {
				t.Errorf("k=%d: trail %d has %d raw entries for %d versions", tc.k, i+1, len(tr.Raw), len(tr.Versions))
			}
			start := 1
			if i == 0 {
				start = 0
			}
			joined = append(joined, tr.Versions[start:]...)
		}
		if fmt.Sprint(sizes) != fmt.Sprint(tc.sizes) {
			t.Errorf("Split(12 hops, %d) hop counts = %v, want %v", tc.k, sizes, tc.sizes)
		}
		if got := planOf(joined).String(); got != c.String() {
			t.Errorf("k=%d: trails joined are %s, want the circuit %s", tc.k, got, c)
		}
	}
	if got := Split(planOf(nil), 3); got != nil {
		t.Errorf("Split of an empty circuit = %v, want none", got)
	}
}
