// Package mutation measures how strong skewtest's verdicts are: it runs
// the catalogue on kubelets broken on purpose ("mutants": small changes
// to the newest buildable kubelet's source, each a diff in mutants/) and
// counts how many of them the catalogue fails. Every catalogue entry was
// written with its bug in hand; a mutant is a regression nobody
// catalogued, as a developer's change might bring.
//
// Each mutant runs the whole catalogue twice (Placements): as the upgrade
// target of a plan, and in the middle of one, where a clean kubelet must
// clean up after it. An unmutated control, built the same way, runs the
// same jobs beside them; a mutant is killed in a placement when a run
// fails on a check the control's same run passes (Classify).
package mutation

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
)

//go:embed mutants/*.diff
var mutantFiles embed.FS

// Mutant is one small change to the kubelet's source.
type Mutant struct {
	// Name is its file's name without .diff.
	Name string
	// Breaks says what it breaks, in a sentence.
	Breaks string
	// Reverts names the upstream fix it reverts ("PR #122211 (#119608)"),
	// or "none".
	Reverts string
	// Area is the part of the kubelet it changes (Areas).
	Area string
	// Way, when set, is the way through the checks it was written to
	// prove closed (Ways).
	Way string
	// Killers are catalogue entries expected to kill it. A batch runs
	// them first, so that the mutant's runs stop early; they are an
	// order, not a verdict: the report says what did kill it.
	Killers []string
	// Equivalent, when set, says why the mutant changes nothing a node
	// keeps, so that no check can kill it: it then counts neither way in
	// the score. Every such reason is reviewed on the docs page.
	Equivalent string
	// diff is the unified diff, as git diff writes it in a kubernetes
	// checkout.
	diff []byte
}

// Patch is the mutant's unified diff, without its header.
func (m Mutant) Patch() []byte { return append([]byte(nil), m.diff...) }

// Areas are the parts of the kubelet the set covers.
var Areas = []string{"volume manager", "reconstruction", "orphan cleanup", "CSI plugin", "subPath cleanup", "atomic writer", "volume manager metrics", "emptyDir"}

// Ways are the ways a broken kubelet once passed the checks, each closed
// by a check of its own and proved by at least one mutant.
var Ways = map[string]string{
	"missing-metric": "a metric the kubelet's version exposes, missing from /metrics, passed as not exposed",
	"race":           "the metrics registration race allowance covered a counter that never moves",
	"known-bug":      "a known bug excused more than its symptom",
	"running-pods":   "no shape kept a running pod across a restart",
	"final-error":    "the CSI driver never returned a final error, so no entry reached the kubelet's error paths for a reconstructed volume",
}

// headerRE is one header line: "Key: value".
var headerRE = regexp.MustCompile(`^([A-Z][a-z]+): (.+)$`)

// parse reads one mutant file: header lines ("Breaks:", "Reverts:",
// "Area:", and optionally "Way:", "Killers:", "Equivalent:"), a blank
// line, then the diff.
func parse(name string, data []byte) (Mutant, error) {
	m := Mutant{Name: name}
	head, diff, ok := bytes.Cut(data, []byte("\n\n"))
	if !ok || !bytes.HasPrefix(diff, []byte("diff --git ")) {
		return Mutant{}, fmt.Errorf("mutant %s: want header lines, a blank line, then a diff starting with \"diff --git\"", name)
	}
	sc := bufio.NewScanner(bytes.NewReader(head))
	seen := map[string]bool{}
	for sc.Scan() {
		g := headerRE.FindStringSubmatch(sc.Text())
		if g == nil {
			return Mutant{}, fmt.Errorf("mutant %s: header line %q is not \"Key: value\"", name, sc.Text())
		}
		key, val := g[1], strings.TrimSpace(g[2])
		if seen[key] {
			return Mutant{}, fmt.Errorf("mutant %s: %s: given twice", name, key)
		}
		seen[key] = true
		switch key {
		case "Breaks":
			m.Breaks = val
		case "Reverts":
			m.Reverts = val
		case "Area":
			m.Area = val
		case "Way":
			m.Way = val
		case "Killers":
			for _, k := range strings.Split(val, ",") {
				m.Killers = append(m.Killers, strings.TrimSpace(k))
			}
		case "Equivalent":
			m.Equivalent = val
		default:
			return Mutant{}, fmt.Errorf("mutant %s: unknown header %s", name, key)
		}
	}
	for _, key := range []string{"Breaks", "Reverts", "Area"} {
		if !seen[key] {
			return Mutant{}, fmt.Errorf("mutant %s: no %s: header", name, key)
		}
	}
	if !slices.Contains(Areas, m.Area) {
		return Mutant{}, fmt.Errorf("mutant %s: area %q is none of %s", name, m.Area, strings.Join(Areas, ", "))
	}
	if _, ok := Ways[m.Way]; m.Way != "" && !ok {
		return Mutant{}, fmt.Errorf("mutant %s: way %q is none of %s", name, m.Way, strings.Join(slices.Sorted(maps.Keys(Ways)), ", "))
	}
	m.diff = diff
	return m, nil
}

// Set is the project's set of mutants, by name.
func Set() ([]Mutant, error) {
	entries, err := fs.ReadDir(mutantFiles, "mutants")
	if err != nil {
		return nil, err
	}
	var out []Mutant
	for _, e := range entries {
		data, err := mutantFiles.ReadFile(path.Join("mutants", e.Name()))
		if err != nil {
			return nil, err
		}
		m, err := parse(strings.TrimSuffix(e.Name(), ".diff"), data)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Mutant) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Select is the mutants named in names (comma-separated; empty: all of
// set), in set's order; an unknown name is an error naming the known.
func Select(set []Mutant, names string) ([]Mutant, error) {
	if strings.TrimSpace(names) == "" {
		return set, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(names, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []Mutant
	for _, m := range set {
		if want[m.Name] {
			out = append(out, m)
			delete(want, m.Name)
		}
	}
	if len(want) > 0 {
		var known []string
		for _, m := range set {
			known = append(known, m.Name)
		}
		return nil, fmt.Errorf("no mutant %s; the set: %s", strings.Join(slices.Sorted(maps.Keys(want)), ", "), strings.Join(known, ", "))
	}
	return out, nil
}
