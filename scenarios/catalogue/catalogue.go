// Package catalogue is what an entry of skewtest's catalogue of
// reconstruction scenarios is: a volume shape or a fault the kubelet has
// shipped bugs for, with what it plants on the node, its expected outcome
// per kubelet version range with the upstream issue or PR, the versions
// affected and the fix, its Ginkgo label, and whether skewtest runs it
// yet. The entries themselves are declared beside the code that runs them
// (package reconstruction, whose Catalogue lists them all).
//
// A run of an entry is judged against the expectation for the kubelet that
// started on the planted state (Judge): a known bug whose symptom shows
// exactly is an expected deviation citing the issue; a known bug that
// does not show is reported in words ("expected #85476 leak not seen:
// fixed upstream? update the expectation"), never passed silently;
// anything its symptom does not name, or its symptom in part, fails; an
// outcome the entry calls clean that shows the bug fails.
package catalogue

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/nodes"
)

// Kind says whether an entry varies the workload's volumes (a shape) or
// what happens to the node while the kubelet is down (a fault).
type Kind string

const (
	Shape Kind = "shape"
	Fault Kind = "fault"
)

// Outcome is what a kubelet version does with an entry.
type Outcome string

const (
	// Clean: the kubelet handles it; any sign of the bug fails the run.
	Clean Outcome = "clean"
	// KnownBug: the bug reproduces on these versions; seeing it is an
	// expected deviation citing the references, not seeing it is reported.
	KnownBug Outcome = "known bug"
)

// Status says how far skewtest runs an entry.
type Status string

const (
	// Runs: implemented and run by label-filter=catalogue on the providers
	// listed.
	Runs Status = "runs"
	// NeedsDriver: waits for driver features (block mode, stall knobs, the
	// driver as its own processes; branch csidrv).
	NeedsDriver Status = "needs driver"
	// NotYet: described, not implemented yet.
	NotYet Status = "not yet implemented"
)

// Ref is an upstream issue or PR.
type Ref struct {
	// ID is how the report cites it: "#85476", "PR #130335".
	ID  string
	URL string
}

// Issue is kubernetes/kubernetes issue n.
func Issue(n int) Ref {
	return Ref{ID: fmt.Sprintf("#%d", n), URL: fmt.Sprintf("https://github.com/kubernetes/kubernetes/issues/%d", n)}
}

// PR is kubernetes/kubernetes pull request n.
func PR(n int) Ref {
	return Ref{ID: fmt.Sprintf("PR #%d", n), URL: fmt.Sprintf("https://github.com/kubernetes/kubernetes/pull/%d", n)}
}

// Expectation is an entry's outcome on the kubelet versions from From
// (inclusive) to Before (exclusive), each "major.minor" or, where a fix
// landed in a patch release, "major.minor.patch"; empty means unbounded.
type Expectation struct {
	From, Before string
	// Gates, when set, limits the expectation to kubelets whose plan
	// entry sets each of these feature gates to its value
	// (v1.28.15+NewVolumeManagerReconstruction=false); an entry lists
	// such expectations before the version's default.
	Gates   map[string]bool
	Outcome Outcome
	// Says what the kubelet does, in the report's words.
	Says string
	// Bug names the known bug in a few words for the report ("expected
	// ... not seen", "which the expected #85476 symptom (global-mount
	// leak) does not name"); KnownBug only.
	Bug string
	// Symptom is exactly what the known bug shows, as Judge checks it;
	// KnownBug only.
	Symptom Symptom
	Refs    []Ref
	// FixedIn is the release that fixed it, "" while it is open.
	FixedIn string
}

// Versions renders the range ("1.28 ≤ v < 1.37", "≥ 1.30", "every
// version"), with the gates it needs ("1.28 ≤ v < 1.30 with
// NewVolumeManagerReconstruction=false").
func (e Expectation) Versions() string {
	var r string
	switch {
	case e.From == "" && e.Before == "":
		r = "every version"
	case e.Before == "":
		r = "≥ " + e.From
	case e.From == "":
		r = "< " + e.Before
	default:
		r = e.From + " ≤ v < " + e.Before
	}
	if len(e.Gates) == 0 {
		return r
	}
	var gates []string
	for g, on := range e.Gates {
		gates = append(gates, fmt.Sprintf("%s=%t", g, on))
	}
	sort.Strings(gates)
	return r + " with " + strings.Join(gates, ",")
}

// Covers reports whether kubelet version v, with its version's default
// gates, is in the range: an expectation that needs gates does not cover
// it.
func (e Expectation) Covers(v *version.Version) bool { return e.CoversKubelet(v, nil) }

// CoversKubelet reports whether kubelet version v run with the plan
// entry's feature gates is in the range. A bound of major.minor compares
// v's minor; one with a patch compares v's release (its pre-release and
// build ignored, so v1.32.4-rc.0 counts as 1.32.4).
func (e Expectation) CoversKubelet(v *version.Version, gates map[string]bool) bool {
	for g, on := range e.Gates {
		if set, ok := gates[g]; !ok || set != on {
			return false
		}
	}
	if e.From != "" && below(v, e.From) {
		return false
	}
	if e.Before != "" && !below(v, e.Before) {
		return false
	}
	return true
}

// below tells whether v is before bound ("1.32" or "1.32.4").
func below(v *version.Version, bound string) bool {
	b := version.MustParseGeneric(bound)
	if strings.Count(bound, ".") < 2 {
		return version.MajorMinor(v.Major(), v.Minor()).LessThan(b)
	}
	return version.MustParseGeneric(fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch())).LessThan(b)
}

// ByFix is an entry's expectations for a bug fixed by backports: bug on
// every version from from without the fix, clean on those with it. fixes
// are the first fixed patch of each minor that got the fix, in ascending
// order, the last one being the first minor released with it
// ("1.30.12", "1.31.8", "1.32.4", "1.33.0" for PR #130335): a minor
// between them without a backport keeps the bug to its last patch. Both
// expectations get the ranges and FixedIn; their other fields are kept.
func ByFix(from string, bug, clean Expectation, fixes ...string) []Expectation {
	fixedIn := strings.Join(fixes, ", ")
	if bug.FixedIn == "" {
		bug.FixedIn = fixedIn
	}
	if clean.FixedIn == "" {
		clean.FixedIn = fixedIn
	}
	var out []Expectation
	start := from
	for i, f := range fixes {
		fv := version.MustParseGeneric(f)
		if start == "" || version.MustParseGeneric(start).LessThan(fv) {
			b := bug
			b.From, b.Before = start, f
			out = append(out, b)
		}
		c := clean
		c.From = f
		if i == len(fixes)-1 {
			out = append(out, c)
			break
		}
		next := version.MustParseGeneric(fixes[i+1])
		nextMinor := fmt.Sprintf("%d.%d", fv.Major(), fv.Minor()+1)
		if next.Patch() == 0 && next.Minor() == fv.Minor()+1 {
			// The next minor shipped with the fix: this clean range
			// runs on through it.
			c.Before = ""
			out = append(out, c)
			break
		}
		c.Before = nextMinor
		out = append(out, c)
		start = nextMinor
	}
	return out
}

// RefIDs joins the references' IDs ("#101791, #108217").
func (e Expectation) RefIDs() string {
	var ids []string
	for _, r := range e.Refs {
		ids = append(ids, r.ID)
	}
	return strings.Join(ids, ", ")
}

// Entry is one scenario of the catalogue.
type Entry struct {
	// Name is the entry's ID, as `skewtest scenarios` and reports print it.
	Name string
	Kind Kind
	// Item is the fault's number in the catalogue's list of faults
	// (docs/catalogue.md; 0 for shapes and faults added beyond it), which
	// orders the catalogue.
	Item int
	// Plants is what the scenario does to the node or the workload.
	Plants string
	// Checks is what it checks after each hop, beyond the baseline.
	Checks string
	Expect []Expectation
	Status Status
	// Needs are the node capabilities the entry needs, when Status is
	// Runs: it runs on the providers whose nodes have them all
	// (registry.Descriptor.NodeCapabilities). Nil for an entry that runs
	// on any provider.
	Needs []nodes.Capability
	// Waits names what an entry that does not run yet waits for.
	Waits string
}

// Replicas is the workload size of a catalogue entry's run: one pod
// proves the fault, and keeps the whole catalogue within minutes.
const Replicas = 1

// CatalogueLabel is the Ginkgo label every entry carries:
// -ginkgo.label-filter=catalogue runs them all.
const CatalogueLabel = "catalogue"

// Label is the entry's own Ginkgo label ("fault-reboot").
func (e Entry) Label() string { return string(e.Kind) + "-" + e.Name }

// ExpectationFor is the expectation covering kubelet version v with its
// default gates.
func (e Entry) ExpectationFor(v *version.Version) (Expectation, bool) {
	return e.ExpectationForKubelet(v, nil)
}

// ExpectationForKubelet is the first expectation covering kubelet version
// v run with gates (the plan entry's).
func (e Entry) ExpectationForKubelet(v *version.Version, gates map[string]bool) (Expectation, bool) {
	for _, x := range e.Expect {
		if x.CoversKubelet(v, gates) {
			return x, true
		}
	}
	return Expectation{}, false
}

// RunsOn reports whether the entry runs on a provider whose nodes have
// the capabilities have.
func (e Entry) RunsOn(have []nodes.Capability) bool {
	return e.Status == Runs && nodes.HasAll(have, e.Needs)
}
