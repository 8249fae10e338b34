// Package matrix is the matrix tour: every directed (from, to) pair of a
// set of kubelet versions, each hop with the reconstruction scenario's full
// checks, on one cluster at the newest version.
//
// The versions (MATRIX) expand to an Eulerian circuit of the complete
// directed graph on them, which visits every ordered pair exactly once: n
// versions make n(n-1) hops in n(n-1)+1 entries, starting and ending at
// the newest. The circuit is split into trails, contiguous segments each
// run by its own node at once; the trails' records are merged into one
// reports.Run whose report opens with a from × to table.
package matrix

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/scenarios/plan"
)

// Default is the newest buildable patch of each minor in the skew window of
// the newest one.
const Default = "v1.34.4,v1.35.4,v1.36.3,v1.37.2"

// DefaultNodes is how many trails (nodes) a tour runs at once unless told
// otherwise; chosen by measurement with make bench-skew
// (docs/measurements.md): with one pod per trail on 2 cores, 6 trails of
// two hops took 18-19 s, 8 trails 22 s and 12 trails of one hop 27 s
// (more kubelets' and containerds' own upkeep), one trail 60 s.
const DefaultNodes = 6

// Versions are a matrix's distinct kubelet versions, newest first.
type Versions []*version.Version

// Parse parses and validates MATRIX, a comma-separated list of distinct
// kubelet versions (any order), against the newest of them as the API
// server version, with the plan package's rules. It needs at least two
// versions, none given twice, and no feature gates (plan entries' +Gate=bool).
func Parse(s string) (Versions, error) {
	p, err := plan.Parse(s)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	var errs []error
	for i, v := range p.Versions {
		if len(p.GatesOf(i)) > 0 {
			errs = append(errs, fmt.Errorf("entry %d %s sets feature gates: a tour visits each version several times from its own circuit, so MATRIX takes versions only; run a gated entry in PLAN", i+1, p.Raw[i]))
			continue
		}
		if first, ok := seen[v.String()]; ok {
			errs = append(errs, fmt.Errorf("entry %d %s repeats entry %d: list each version once (the tour visits every pair of them by itself)", i+1, p.Raw[i], first))
			continue
		}
		seen[v.String()] = i + 1
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := p.Validate(p.Newest()); err != nil {
		return nil, err
	}
	vs := Versions(append([]*version.Version(nil), p.Versions...))
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].GreaterThan(vs[j]) })
	return vs, nil
}

// String renders the versions as MATRIX takes them, newest first.
func (vs Versions) String() string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = plan.V(v)
	}
	return strings.Join(s, ",")
}

// Pairs is how many directed pairs (hops) the tour has: n(n-1).
func (vs Versions) Pairs() int { return len(vs) * (len(vs) - 1) }

// Circuit returns an Eulerian circuit of the complete directed graph on vs
// (Hierholzer's algorithm): every ordered pair of distinct versions is one
// hop, exactly once; it starts and ends at vs[0], the newest. Vertex u's
// edges are taken in the order u+1, u+2, ... (mod n), so the result depends
// only on vs.
func Circuit(vs Versions) plan.Plan {
	n := len(vs)
	if n < 2 {
		return planOf(vs)
	}
	next := make([]int, n) // next[u]: offset (1..n-1) of u's next unused edge
	for u := range next {
		next[u] = 1
	}
	stack := []int{0}
	var rev []int
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		if next[u] < n {
			v := (u + next[u]) % n
			next[u]++
			stack = append(stack, v)
			continue
		}
		stack = stack[:len(stack)-1]
		rev = append(rev, u)
	}
	out := make(Versions, len(rev))
	for i, u := range rev {
		out[len(rev)-1-i] = vs[u]
	}
	return planOf(out)
}

// Split cuts a circuit into k trails: contiguous segments whose hop counts
// differ by at most one, earlier trails taking the extra hops. Each trail
// starts where the previous one ended, so together they visit the
// circuit's hops exactly once. k is capped at the number of hops (a trail
// needs one); fewer than one means one.
func Split(circuit plan.Plan, k int) []plan.Plan {
	hops := len(circuit.Versions) - 1
	if hops < 1 {
		return nil
	}
	k = max(1, min(k, hops))
	trails := make([]plan.Plan, 0, k)
	start := 0
	for i := range k {
		size := hops / k
		if i < hops%k {
			size++
		}
		trails = append(trails, planOf(circuit.Versions[start:start+size+1]))
		start += size
	}
	return trails
}

// planOf makes a plan of versions, with Raw entries rendered as V does.
func planOf(vs []*version.Version) plan.Plan {
	p := plan.Plan{Versions: append([]*version.Version(nil), vs...), Raw: make([]string, len(vs))}
	for i, v := range vs {
		p.Raw[i] = plan.V(v)
	}
	return p
}
