// Package plan parses and validates a kubelet version plan: the list of
// kubelet versions a node goes through, in hop order. The node starts at the
// first version and its kubelet binary is swapped to each next one. An
// entry may set kubelet feature gates (v1.28.15+NewVolumeManagerReconstruction=false),
// checked against the table in gates.go.
package plan

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Default is the manual sign-off's plan: down one minor and back.
const Default = "v1.37.2,v1.36.3,v1.37.2"

// SkewPolicyURL documents how far a kubelet may lag behind kube-apiserver.
const SkewPolicyURL = "https://kubernetes.io/releases/version-skew-policy/#kubelet"

// MaxKubeletMinorSkew is how many minor versions a kubelet may be older than
// kube-apiserver (the Kubernetes version skew policy since 1.28, KEP-3935).
const MaxKubeletMinorSkew = 3

// maxKubeletMinorSkewBefore128 is the policy's limit for API servers
// before 1.28: n-2.
const maxKubeletMinorSkewBefore128 = 2

// MaxKubeletMinorSkewFor is how many minor versions a kubelet may lag an
// API server of version api: 3 from 1.28, 2 before.
func MaxKubeletMinorSkewFor(api *version.Version) uint {
	if api.Major() == 1 && api.Minor() < 28 {
		return maxKubeletMinorSkewBefore128
	}
	return MaxKubeletMinorSkew
}

// Direction of a hop.
const (
	Upgrade   = "upgrade"
	Downgrade = "downgrade"
	Same      = "same"
)

// Plan is a list of kubelet versions in hop order.
type Plan struct {
	// Versions are the parsed versions, one per entry.
	Versions []*version.Version
	// Raw are the entries as given (spaces trimmed), for error messages.
	Raw []string
	// Gates are the kubelet feature gates each entry sets, aligned with
	// Versions; nil (or a nil map) for an entry that sets none.
	Gates []map[string]bool
}

// Hop is one kubelet binary swap.
type Hop struct {
	Number    int // 1-based
	From, To  *version.Version
	Direction string // Upgrade, Downgrade or Same (of the versions)
	// FromGates and ToGates are the feature gates of the two entries.
	FromGates, ToGates map[string]bool
}

// String renders a hop as "hop 1: v1.37.2 → v1.36.3 (downgrade)", with
// the entries' gates: "hop 1: v1.28.15 → v1.28.15+NewVolumeManagerReconstruction=false (same)".
func (h Hop) String() string {
	return fmt.Sprintf("hop %d: %s%s → %s%s (%s)", h.Number, V(h.From), FormatGates(h.FromGates), V(h.To), FormatGates(h.ToGates), h.Direction)
}

// V renders a version with the "v" prefix Kubernetes releases use.
func V(v *version.Version) string {
	if v == nil {
		return "<nil>"
	}
	return "v" + v.String()
}

// Parse parses a comma-separated plan such as "v1.37.2,v1.36.3,v1.37.2".
// Spaces around entries are trimmed and the "v" prefix is optional. Empty
// entries, entries that are not semantic versions (vMAJOR.MINOR.PATCH, with
// an optional pre-release such as v1.38.0-alpha.1) and plans with fewer than
// two versions are rejected. An entry may end in kubelet feature gates,
// "+Gate=true" or "+Gate=false", several in a row
// (v1.28.15+NewVolumeManagerReconstruction=false+SELinuxMount=true); each
// is checked against the version with the table in gates.go (ValidateGates).
// A "+" part without "=" that starts with a lower-case letter or a digit
// is the version's build metadata (v1.38.0-alpha.1.123+abcdef). Version
// skew against the API server is checked by Validate.
func Parse(s string) (Plan, error) {
	input := strings.TrimSpace(s)
	if input == "" {
		return Plan{}, errors.New(`the plan is empty: give at least two comma-separated kubelet versions, such as "v1.37.2,v1.36.3"`)
	}
	parts := strings.Split(input, ",")
	p := Plan{
		Versions: make([]*version.Version, 0, len(parts)),
		Raw:      make([]string, 0, len(parts)),
		Gates:    make([]map[string]bool, 0, len(parts)),
	}
	var errs []error
	for i, part := range parts {
		entry := strings.TrimSpace(part)
		if entry == "" {
			errs = append(errs, fmt.Errorf("plan entry %d in %q is empty: remove the extra comma", i+1, input))
			continue
		}
		ver, gates, err := splitEntry(entry)
		if err != nil {
			errs = append(errs, fmt.Errorf("plan entry %d %q: %v", i+1, entry, err))
			continue
		}
		v, err := version.ParseSemantic(ver)
		if err != nil {
			errs = append(errs, fmt.Errorf("plan entry %d %q is not a version: want vMAJOR.MINOR.PATCH such as v1.36.3", i+1, entry))
			continue
		}
		p.Versions = append(p.Versions, v)
		p.Raw = append(p.Raw, entry)
		p.Gates = append(p.Gates, gates)
	}
	if len(errs) > 0 {
		return Plan{}, errors.Join(errs...)
	}
	if err := p.checkLength(input); err != nil {
		return Plan{}, err
	}
	if err := p.ValidateGates(); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// gateName is a feature gate's name as component-base spells them.
var gateName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// splitEntry splits a plan entry into its version and its feature gates
// (nil when it sets none).
func splitEntry(entry string) (string, map[string]bool, error) {
	parts := strings.Split(entry, "+")
	ver := parts[0]
	var gates map[string]bool
	for _, part := range parts[1:] {
		part = strings.TrimSpace(part)
		name, value, isGate := strings.Cut(part, "=")
		if !isGate && gates == nil && part != "" && !gateName.MatchString(part) {
			ver += "+" + part // build metadata
			continue
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case !isGate:
			return "", nil, fmt.Errorf("%q after \"+\" is not a feature gate: write +Gate=true or +Gate=false, such as +NewVolumeManagerReconstruction=false", part)
		case !gateName.MatchString(name):
			return "", nil, fmt.Errorf("%q is not a feature gate name (such as NewVolumeManagerReconstruction): write +Gate=true or +Gate=false", name)
		case value != "true" && value != "false":
			return "", nil, fmt.Errorf("feature gate %s=%s: the value must be true or false", name, value)
		}
		if gates == nil {
			gates = map[string]bool{}
		}
		if _, dup := gates[name]; dup {
			return "", nil, fmt.Errorf("feature gate %s is set twice: set it once", name)
		}
		gates[name] = value == "true"
	}
	return strings.TrimSpace(ver), gates, nil
}

// ValidateGates checks every entry's feature gates against its version
// with the table in gates.go: a gate the table does not hold, one the
// version does not know (not yet added, or removed) and one it has locked
// to the other value are refused, naming the entry, the gate and the
// versions that take it. All problems are reported.
func (p Plan) ValidateGates() error {
	if len(p.Gates) != 0 && len(p.Gates) != len(p.Versions) {
		return fmt.Errorf("inconsistent plan: feature gates for %d entries of %d; build plans with plan.Parse", len(p.Gates), len(p.Versions))
	}
	var errs []error
	for i, v := range p.Versions {
		gates := p.GatesOf(i)
		if v == nil || len(gates) == 0 {
			continue
		}
		for _, name := range sortedNames(gates) {
			if err := CheckGate(v, name, gates[name]); err != nil {
				errs = append(errs, fmt.Errorf("plan entry %d %q: %v", i+1, p.raw()[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// GatesOf is entry i's feature gates (0-based), nil when it sets none.
func (p Plan) GatesOf(i int) map[string]bool {
	if i < 0 || i >= len(p.Gates) {
		return nil
	}
	return p.Gates[i]
}

// HasGates reports whether any entry sets a feature gate.
func (p Plan) HasGates() bool {
	for _, g := range p.Gates {
		if len(g) > 0 {
			return true
		}
	}
	return false
}

// Entry renders entry i (0-based) as Parse takes it: the version with
// its gates, sorted by name ("v1.28.15+NewVolumeManagerReconstruction=false").
func (p Plan) Entry(i int) string {
	return V(p.Versions[i]) + FormatGates(p.GatesOf(i))
}

func (p Plan) checkLength(input string) error {
	if len(p.Versions) < 2 {
		return fmt.Errorf("a plan needs at least two versions (the starting kubelet and one to swap to), got %q", input)
	}
	return nil
}

// String renders the plan as "v1.37.2 → v1.36.3 → v1.37.2", each entry
// with its gates (Entry).
func (p Plan) String() string {
	s := make([]string, len(p.Versions))
	for i := range p.Versions {
		s[i] = p.Entry(i)
	}
	return strings.Join(s, " → ")
}

// Newest returns the newest version of the plan: the API server version to
// use for providers that create the cluster. Nil for an empty plan.
func (p Plan) Newest() *version.Version {
	var newest *version.Version
	for _, v := range p.Versions {
		if newest == nil || v.GreaterThan(newest) {
			newest = v
		}
	}
	return newest
}

// Hops returns the swaps of the plan, numbered from 1. Two entries of the
// same version make a hop too: with different gates it swaps the kubelet's
// configuration (and restarts it on the same binary), with the same gates
// it restarts it.
func (p Plan) Hops() []Hop {
	if len(p.Versions) < 2 {
		return nil
	}
	hops := make([]Hop, 0, len(p.Versions)-1)
	for i := 1; i < len(p.Versions); i++ {
		from, to := p.Versions[i-1], p.Versions[i]
		dir := Same
		switch {
		case to.GreaterThan(from):
			dir = Upgrade
		case to.LessThan(from):
			dir = Downgrade
		}
		hops = append(hops, Hop{Number: i, From: from, To: to, Direction: dir, FromGates: p.GatesOf(i - 1), ToGates: p.GatesOf(i)})
	}
	return hops
}

// Distinct returns the distinct versions in first-seen order: the kubelet
// binaries the plan needs.
func (p Plan) Distinct() []*version.Version {
	seen := map[string]bool{}
	var out []*version.Version
	for _, v := range p.Versions {
		k := v.String()
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, v)
	}
	return out
}

// Validate checks the plan against the API server version before anything is
// created: at least two versions, the same major version as the API server,
// none newer than the API server (by major.minor; a newer patch at the same
// minor is allowed), none more minors older than the policy allows (MaxKubeletMinorSkewFor), and
// each entry's feature gates ones its version takes (ValidateGates). All
// problems are reported, each naming the entry and the fix.
func (p Plan) Validate(apiServer *version.Version) error {
	if apiServer == nil {
		return errors.New("no API server version to validate the plan against: pass the cluster's kube-apiserver version, or plan.Newest() when the cluster is created for the plan")
	}
	if len(p.Raw) != 0 && len(p.Raw) != len(p.Versions) {
		return fmt.Errorf("inconsistent plan: %d raw entries for %d versions; build plans with plan.Parse", len(p.Raw), len(p.Versions))
	}
	if err := p.checkLength(strings.Join(p.raw(), ",")); err != nil {
		return err
	}
	api := V(apiServer)
	maxSkew := MaxKubeletMinorSkewFor(apiServer)
	var errs []error
	for i, v := range p.Versions {
		n := i + 1
		if v == nil {
			errs = append(errs, fmt.Errorf("plan entry %d is missing a version: build plans with plan.Parse", n))
			continue
		}
		entry := V(v)
		switch {
		case v.Major() != apiServer.Major():
			errs = append(errs, fmt.Errorf("plan entry %d %s has major version %d but the API server (%s) has major version %d: a kubelet must have the API server's major version; use v%d.x versions",
				n, entry, v.Major(), api, apiServer.Major(), apiServer.Major()))
		case v.Minor() > apiServer.Minor():
			errs = append(errs, fmt.Errorf("plan entry %d %s is newer than the API server (%s): a kubelet must not be newer than kube-apiserver, so the API server must be at least v%d.%d; use a kubelet of v%d.%d.x or older, or an API server of v%d.%d or newer (%s)",
				n, entry, api, v.Major(), v.Minor(), apiServer.Major(), apiServer.Minor(), v.Major(), v.Minor(), SkewPolicyURL))
		case apiServer.Minor()-v.Minor() > maxSkew:
			oldest := fmt.Sprintf("v%d.%d", apiServer.Major(), apiServer.Minor()-maxSkew)
			errs = append(errs, fmt.Errorf("plan entry %d %s is outside the version skew policy: a kubelet may be at most %d minor versions older than the API server (%s), so the oldest allowed is %s; use %s.x or newer, or an older API server (APISERVER) (%s)",
				n, entry, maxSkew, api, oldest, oldest, SkewPolicyURL))
		}
	}
	if err := p.ValidateGates(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// raw returns the entries as given, or rendered versions for plans built
// without Parse.
func (p Plan) raw() []string {
	if len(p.Raw) == len(p.Versions) && len(p.Raw) > 0 {
		return p.Raw
	}
	out := make([]string, len(p.Versions))
	for i, v := range p.Versions {
		out[i] = V(v)
	}
	return out
}
