package plan

// This file holds the one table of kubelet feature gates a plan entry may
// set (v1.28.15+NewVolumeManagerReconstruction=false), and the checks that
// refuse, before anything is made, a gate a version does not know or has
// locked the other way: such a kubelet exits at start.

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Maturity of a gate at some version.
const (
	Alpha = "alpha"
	Beta  = "beta"
	GA    = "GA"
)

// GateStage is what a feature gate is from one kubelet version on, until
// the next stage of its KubeletGate.
type GateStage struct {
	// From is the first version of the stage, "1.27" (patch 0) or
	// "1.27.2". A pre-release counts as its release: v1.32.0-alpha.1 is
	// taken for v1.32.0.
	From string
	// Maturity is Alpha, Beta or GA; empty when Removed.
	Maturity string
	// Default is the gate's value when the configuration does not set it.
	Default bool
	// Locked is LockToDefault: setting the gate to !Default makes the
	// kubelet exit ("cannot set feature gate X to false, feature is locked
	// to true"); setting it to Default is accepted.
	Locked bool
	// Removed is a gate gone from the kubelet: setting it at all makes the
	// kubelet exit ("unrecognized feature gate: X").
	Removed bool
	// Source is where the fact was read.
	Source string
}

// KubeletGate is one feature gate that decides which reconstruction a
// kubelet runs or how it mounts what it reconstructs, with its history.
type KubeletGate struct {
	Name string
	// About says what it decides for reconstruction.
	About string
	// Stages are oldest first; before the first the gate does not exist.
	Stages []GateStage
}

// KubeletGates is the table: every gate a plan entry may set, with the
// kubelet versions where it exists, its default and where it is locked.
// Read from pkg/features/kube_features.go (versioned_kube_features.go from
// 1.32) of k8s.io/kubernetes v1.26.15, v1.27.9, v1.27.16, v1.28.5, v1.29.6,
// v1.30.14, v1.31.14, v1.32.13, v1.33.13, v1.36.3 and v1.37.2, and
// CHANGELOG-1.27.md for 1.27.0-1.27.1; 1.34 and 1.35 follow from the
// versioned specs of 1.36 (which list no stage there). A version newer than
// 1.37 is taken to keep 1.37's stage. docs/plans.md says why each
// matters.
var KubeletGates = []KubeletGate{
	{
		Name:  "NewVolumeManagerReconstruction",
		About: "selects the new reconstruction (KEP-3756) over the old one in 1.27-1.29 (reconciler_common.go Run); from 1.30 the old code is gone",
		Stages: []GateStage{
			{From: "1.27", Maturity: Beta, Default: true, Source: "CHANGELOG-1.27.md v1.27.0: added and enabled by default (#115268)"},
			{From: "1.27.2", Maturity: Beta, Default: false, Source: "kube_features.go@v1.27.9: disabled for #117745 (#117752, v1.27.2)"},
			{From: "1.28", Maturity: Beta, Default: true, Source: "kube_features.go@v1.28.5"},
			{From: "1.30", Maturity: GA, Default: true, Locked: true, Source: "kube_features.go@v1.30.14: LockToDefault, remove in 1.32"},
			{From: "1.32", Removed: true, Source: "kube_features.go@v1.32.13: gone (#126775)"},
		},
	},
	{
		Name:  "SELinuxMountReadWriteOncePod",
		About: "in 1.26 selects the new reconstruction (runNew); from 1.27 it mounts ReadWriteOncePod volumes with -o context and the new reconstruction restores that context",
		Stages: []GateStage{
			{From: "1.25", Maturity: Alpha, Default: false, Source: "versioned_kube_features.go@v1.32.13; kube_features.go@v1.26.15"},
			{From: "1.27", Maturity: Beta, Default: true, Source: "CHANGELOG-1.27.md v1.27.0: graduated to beta (#116425), disabled again in v1.27.2 (#117752)"},
			{From: "1.27.2", Maturity: Beta, Default: false, Source: "kube_features.go@v1.27.9: disabled for #117745"},
			{From: "1.28", Maturity: Beta, Default: true, Source: "kube_features.go@v1.28.5"},
			{From: "1.36", Maturity: GA, Default: true, Locked: true, Source: "versioned_kube_features.go@v1.36.3: LockToDefault (#136912)"},
		},
	},
	{
		Name:  "SELinuxMount",
		About: "mounts every eligible volume with -o context, not only ReadWriteOncePod ones",
		Stages: []GateStage{
			{From: "1.30", Maturity: Alpha, Default: false, Source: "kube_features.go@v1.30.14"},
			{From: "1.33", Maturity: Beta, Default: false, Source: "versioned_kube_features.go@v1.33.13"},
			{From: "1.37", Maturity: GA, Default: true, Source: "versioned_kube_features.go@v1.37.2: GA and on by default, not locked (#139956)"},
		},
	},
	{
		Name:  "SELinuxChangePolicy",
		About: "lets a pod choose between -o context mounts and recursive relabelling (spec.securityContext.seLinuxChangePolicy)",
		Stages: []GateStage{
			{From: "1.32", Maturity: Alpha, Default: false, Source: "versioned_kube_features.go@v1.32.13"},
			{From: "1.33", Maturity: Beta, Default: true, Source: "versioned_kube_features.go@v1.33.13"},
			{From: "1.36", Maturity: GA, Default: true, Locked: true, Source: "versioned_kube_features.go@v1.36.3: LockToDefault"},
		},
	},
}

// GateNames are the table's gate names, sorted.
func GateNames() []string {
	out := make([]string, 0, len(KubeletGates))
	for _, g := range KubeletGates {
		out = append(out, g.Name)
	}
	sort.Strings(out)
	return out
}

// LookupGate finds a gate of the table by its exact name.
func LookupGate(name string) (KubeletGate, bool) {
	for _, g := range KubeletGates {
		if g.Name == name {
			return g, true
		}
	}
	return KubeletGate{}, false
}

// release is v without pre-release or build metadata.
func release(v *version.Version) *version.Version {
	return version.MajorMinor(v.Major(), v.Minor()).WithPatch(v.Patch())
}

func stageFrom(s GateStage) *version.Version { return version.MustParseGeneric(s.From) }

// At is the gate's stage at kubelet version v; ok is false before the
// gate's first stage.
func (g KubeletGate) At(v *version.Version) (stage GateStage, ok bool) {
	r := release(v)
	for _, s := range g.Stages {
		if r.LessThan(stageFrom(s)) {
			break
		}
		stage, ok = s, true
	}
	return stage, ok
}

// takes reports whether a kubelet at stage s starts with the gate set to
// value.
func (s GateStage) takes(value bool) bool {
	return !s.Removed && (!s.Locked || s.Default == value)
}

// Takes says which kubelet versions start with the gate set to value:
// "1.27-1.29", "1.28 and later", "1.27.0-1.27.1 and 1.28 and later".
func (g KubeletGate) Takes(value bool) string {
	var ranges []string
	for i := 0; i < len(g.Stages); i++ {
		if !g.Stages[i].takes(value) {
			continue
		}
		j := i
		for j+1 < len(g.Stages) && g.Stages[j+1].takes(value) {
			j++
		}
		from := g.Stages[i].From
		if j+1 == len(g.Stages) {
			ranges = append(ranges, from+" and later")
		} else {
			ranges = append(ranges, from+"-"+before(stageFrom(g.Stages[j+1])))
		}
		i = j
	}
	if len(ranges) == 0 {
		return "no kubelet"
	}
	return strings.Join(ranges, " and ")
}

// before names the last version before v: 1.30.0 → "1.29", 1.27.2 →
// "1.27.1".
func before(v *version.Version) string {
	if v.Patch() > 0 {
		return fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch()-1)
	}
	return fmt.Sprintf("%d.%d", v.Major(), v.Minor()-1)
}

// Check is why kubelet v refuses the gate set to value, nil when it
// starts with it.
func (g KubeletGate) Check(v *version.Version, value bool) error {
	s, ok := g.At(v)
	takes := fmt.Sprintf("%s=%t is taken by kubelets %s", g.Name, value, g.Takes(value))
	switch {
	case !ok:
		return fmt.Errorf("kubelet %s does not know feature gate %s (added in %s) and would refuse to start (\"unrecognized feature gate: %s\"); %s", V(v), g.Name, g.Stages[0].From, g.Name, takes)
	case s.Removed:
		return fmt.Errorf("kubelet %s does not know feature gate %s (removed in %s) and would refuse to start (\"unrecognized feature gate: %s\"); %s", V(v), g.Name, s.From, g.Name, takes)
	case s.Locked && s.Default != value:
		return fmt.Errorf("kubelet %s has feature gate %s locked to %t (%s since %s) and would refuse to start with %t (\"cannot set feature gate %s to %t, feature is locked to %t\"); %s", V(v), g.Name, s.Default, s.Maturity, s.From, value, g.Name, value, s.Default, takes)
	}
	return nil
}

// CheckGate is why kubelet v refuses gate name set to value: a gate not in
// KubeletGates, or one v does not know or has locked the other way. nil
// when v starts with it.
func CheckGate(v *version.Version, name string, value bool) error {
	g, ok := LookupGate(name)
	if !ok {
		hint := ""
		for _, n := range GateNames() {
			if strings.EqualFold(n, name) {
				hint = fmt.Sprintf(" (did you mean %s?)", n)
			}
		}
		return fmt.Errorf("feature gate %s is not in skewtest's table of reconstruction gates%s; a plan entry may set %s (scenarios/plan/gates.go)", name, hint, strings.Join(GateNames(), ", "))
	}
	return g.Check(v, value)
}

// FormatGates renders gates as a plan entry's suffix, sorted by name:
// "+A=true+B=false"; "" for none.
func FormatGates(gates map[string]bool) string {
	var b strings.Builder
	for _, n := range sortedNames(gates) {
		fmt.Fprintf(&b, "+%s=%t", n, gates[n])
	}
	return b.String()
}

func sortedNames(gates map[string]bool) []string {
	names := make([]string, 0, len(gates))
	for n := range gates {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// GatesEqual reports whether a and b set the same gates to the same
// values (nil and empty are equal).
func GatesEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// CheckGatesOn refuses a plan whose entries set feature gates when its
// kubelets run on provider, whose nodes cannot give them to the kubelet:
// refused says why, can names the providers whose nodes can. nil when no
// entry sets any.
func (p Plan) CheckGatesOn(provider, refused string, can []string) error {
	if !p.HasGates() {
		return nil
	}
	var entries []string
	for i := range p.Versions {
		if len(p.GatesOf(i)) > 0 {
			entries = append(entries, fmt.Sprintf("%d (%s)", i+1, p.Entry(i)))
		}
	}
	return fmt.Errorf("plan entries %s set kubelet feature gates, which PROVIDER=%s cannot give the kubelet: %s; run the plan with PROVIDER=%s, or drop the gates",
		strings.Join(entries, ", "), provider, refused, strings.Join(can, " or PROVIDER="))
}
