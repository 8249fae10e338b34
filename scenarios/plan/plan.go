// Package plan parses and validates a kubelet version plan: the list of
// kubelet versions a node goes through, in hop order. The node starts at the
// first version and its kubelet binary is swapped to each next one.
package plan

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// SkewPolicyURL documents how far a kubelet may lag behind kube-apiserver.
const SkewPolicyURL = "https://kubernetes.io/releases/version-skew-policy/#kubelet"

// MaxKubeletMinorSkew is how many minor versions a kubelet may be older than
// kube-apiserver (the Kubernetes version skew policy since 1.28).
const MaxKubeletMinorSkew = 3

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
}

// Hop is one kubelet binary swap.
type Hop struct {
	Number    int // 1-based
	From, To  *version.Version
	Direction string // Upgrade, Downgrade or Same
}

// String renders a hop as "hop 1: v1.37.2 → v1.36.3 (downgrade)".
func (h Hop) String() string {
	return fmt.Sprintf("hop %d: %s → %s (%s)", h.Number, V(h.From), V(h.To), h.Direction)
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
// two versions are rejected. Version skew against the API server is checked
// by Validate.
func Parse(s string) (Plan, error) {
	input := strings.TrimSpace(s)
	if input == "" {
		return Plan{}, errors.New(`the plan is empty: give at least two comma-separated kubelet versions, such as "v1.37.2,v1.36.3"`)
	}
	parts := strings.Split(input, ",")
	p := Plan{
		Versions: make([]*version.Version, 0, len(parts)),
		Raw:      make([]string, 0, len(parts)),
	}
	var errs []error
	for i, part := range parts {
		entry := strings.TrimSpace(part)
		if entry == "" {
			errs = append(errs, fmt.Errorf("plan entry %d in %q is empty: remove the extra comma", i+1, input))
			continue
		}
		v, err := version.ParseSemantic(entry)
		if err != nil {
			errs = append(errs, fmt.Errorf("plan entry %d %q is not a version: want vMAJOR.MINOR.PATCH such as v1.36.3", i+1, entry))
			continue
		}
		p.Versions = append(p.Versions, v)
		p.Raw = append(p.Raw, entry)
	}
	if len(errs) > 0 {
		return Plan{}, errors.Join(errs...)
	}
	if err := p.checkLength(input); err != nil {
		return Plan{}, err
	}
	return p, nil
}

func (p Plan) checkLength(input string) error {
	if len(p.Versions) < 2 {
		return fmt.Errorf("a plan needs at least two versions (the starting kubelet and one to swap to), got %q", input)
	}
	return nil
}

// String renders the plan as "v1.37.2 → v1.36.3 → v1.37.2".
func (p Plan) String() string {
	s := make([]string, len(p.Versions))
	for i, v := range p.Versions {
		s[i] = V(v)
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

// Hops returns the swaps of the plan, numbered from 1.
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
		hops = append(hops, Hop{Number: i, From: from, To: to, Direction: dir})
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
// minor is allowed) and none more than MaxKubeletMinorSkew minors older. All
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
		case apiServer.Minor()-v.Minor() > MaxKubeletMinorSkew:
			oldest := fmt.Sprintf("v%d.%d", apiServer.Major(), apiServer.Minor()-MaxKubeletMinorSkew)
			errs = append(errs, fmt.Errorf("plan entry %d %s is outside the version skew policy: a kubelet may be at most %d minor versions older than the API server (%s), so the oldest allowed is %s; use %s.x or newer (%s)",
				n, entry, MaxKubeletMinorSkew, api, oldest, oldest, SkewPolicyURL))
		}
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
