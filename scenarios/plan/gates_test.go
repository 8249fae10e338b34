package plan

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// The table's facts, version by version: what each kubelet does with each
// value. "ok" starts; "unknown" and "locked" refuse.
func TestGateTable(t *testing.T) {
	const nvmr, rwop, mount, policy = "NewVolumeManagerReconstruction", "SELinuxMountReadWriteOncePod", "SELinuxMount", "SELinuxChangePolicy"
	for _, tc := range []struct {
		gate, version string
		value         bool
		want          string // "ok", "unknown", "removed", "locked"
		def           bool   // the default, when the gate exists
	}{
		{nvmr, "v1.26.15", true, "unknown", false},
		{nvmr, "v1.27.0", false, "ok", true}, // enabled by default in 1.27.0-1.27.1
		{nvmr, "v1.27.1", true, "ok", true},
		{nvmr, "v1.27.2", true, "ok", false}, // #117752
		{nvmr, "v1.27.9", true, "ok", false},
		{nvmr, "v1.27.16", false, "ok", false},
		{nvmr, "v1.28.5", false, "ok", true},
		{nvmr, "v1.28.15", false, "ok", true},
		{nvmr, "v1.29.6", false, "ok", true},
		{nvmr, "v1.30.0", true, "ok", true}, // locked, to the value asked
		{nvmr, "v1.30.14", false, "locked", true},
		{nvmr, "v1.31.14", false, "locked", true},
		{nvmr, "v1.32.0", true, "removed", false},
		{nvmr, "v1.32.0-alpha.1", true, "removed", false}, // a pre-release counts as its release
		{nvmr, "v1.37.2", false, "removed", false},
		{rwop, "v1.24.9", true, "unknown", false},
		{rwop, "v1.26.15", true, "ok", false},
		{rwop, "v1.27.1", false, "ok", true},
		{rwop, "v1.27.9", true, "ok", false},
		{rwop, "v1.28.5", false, "ok", true},
		{rwop, "v1.35.4", false, "ok", true},
		{rwop, "v1.36.3", false, "locked", true},
		{rwop, "v1.36.3", true, "ok", true},
		{rwop, "v1.40.0", false, "locked", true}, // newer than the table: 1.37's stage
		{mount, "v1.29.6", true, "unknown", false},
		{mount, "v1.30.14", true, "ok", false},
		{mount, "v1.33.13", true, "ok", false},
		{mount, "v1.37.2", false, "ok", true}, // GA, not locked
		{policy, "v1.31.14", true, "unknown", false},
		{policy, "v1.32.13", true, "ok", false},
		{policy, "v1.33.13", false, "ok", true},
		{policy, "v1.35.4", false, "ok", true},
		{policy, "v1.36.3", false, "locked", true},
	} {
		g, ok := LookupGate(tc.gate)
		if !ok {
			t.Fatalf("gate %s not in the table", tc.gate)
		}
		v := version.MustParseSemantic(tc.version)
		err := g.Check(v, tc.value)
		got := "ok"
		if err != nil {
			switch {
			case strings.Contains(err.Error(), "locked to"):
				got = "locked"
			case strings.Contains(err.Error(), "(removed in"):
				got = "removed"
			case strings.Contains(err.Error(), "(added in"):
				got = "unknown"
			default:
				got = err.Error()
			}
		}
		if got != tc.want {
			t.Errorf("%s=%t on %s: %s, want %s (%v)", tc.gate, tc.value, tc.version, got, tc.want, err)
		}
		if s, ok := g.At(v); ok && !s.Removed && s.Default != tc.def {
			t.Errorf("%s default on %s = %t, want %t", tc.gate, tc.version, s.Default, tc.def)
		}
	}
}

func TestGateTakes(t *testing.T) {
	for _, tc := range []struct {
		gate  string
		value bool
		want  string
	}{
		{"NewVolumeManagerReconstruction", false, "1.27-1.29"},
		{"NewVolumeManagerReconstruction", true, "1.27-1.31"},
		{"SELinuxMountReadWriteOncePod", false, "1.25-1.35"},
		{"SELinuxMountReadWriteOncePod", true, "1.25 and later"},
		{"SELinuxMount", false, "1.30 and later"},
		{"SELinuxChangePolicy", false, "1.32-1.35"},
		{"SELinuxChangePolicy", true, "1.32 and later"},
	} {
		g, _ := LookupGate(tc.gate)
		if got := g.Takes(tc.value); got != tc.want {
			t.Errorf("%s=%t taken by %q, want %q", tc.gate, tc.value, got, tc.want)
		}
	}
	// Ranges that do not touch are listed apart; a gate no kubelet takes
	// says so.
	g := KubeletGate{Name: "X", Stages: []GateStage{{From: "1.27"}, {From: "1.28", Default: true, Locked: true}, {From: "1.30"}}}
	if got := g.Takes(false); got != "1.27-1.27 and 1.30 and later" {
		t.Errorf("split ranges: %q", got)
	}
	if got := (KubeletGate{Stages: []GateStage{{From: "1.20", Removed: true}}}).Takes(true); got != "no kubelet" {
		t.Errorf("never taken: %q", got)
	}
}

// The table is well formed: stages in order, a removed stage last, the
// gate names unique and as component-base spells them.
func TestGateTableWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range KubeletGates {
		if seen[g.Name] || !gateName.MatchString(g.Name) {
			t.Errorf("gate name %q repeated or malformed", g.Name)
		}
		seen[g.Name] = true
		if g.About == "" || len(g.Stages) == 0 {
			t.Errorf("%s: no About or no stages", g.Name)
		}
		for i, s := range g.Stages {
			if s.Source == "" {
				t.Errorf("%s stage %s: no source", g.Name, s.From)
			}
			if s.Removed != (s.Maturity == "") {
				t.Errorf("%s stage %s: a removed stage has no maturity, any other one has", g.Name, s.From)
			}
			if s.Removed && i != len(g.Stages)-1 {
				t.Errorf("%s: stage %s removes the gate but is not the last", g.Name, s.From)
			}
			if i > 0 && !stageFrom(g.Stages[i-1]).LessThan(stageFrom(s)) {
				t.Errorf("%s: stage %s does not follow %s", g.Name, s.From, g.Stages[i-1].From)
			}
		}
	}
}

func TestParseGates(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		gates  []map[string]bool
		str    string
		errHas []string
		errNot []string
	}{
		{
			name:  "sign-off replay with the gate off",
			in:    "v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.15",
			gates: []map[string]bool{nil, {"NewVolumeManagerReconstruction": false}, nil},
			str:   "v1.28.15 → v1.28.15+NewVolumeManagerReconstruction=false → v1.28.15",
		},
		{
			name:  "several gates, spaces, rendered sorted",
			in:    " v1.29.6 + SELinuxMountReadWriteOncePod=true+NewVolumeManagerReconstruction=false , v1.28.15",
			gates: []map[string]bool{{"NewVolumeManagerReconstruction": false, "SELinuxMountReadWriteOncePod": true}, nil},
			str:   "v1.29.6+NewVolumeManagerReconstruction=false+SELinuxMountReadWriteOncePod=true → v1.28.15",
		},
		{
			name:  "build metadata is not a gate",
			in:    "v1.38.0-alpha.1.123+abcdef,v1.37.2",
			gates: []map[string]bool{nil, nil},
			str:   "v1.38.0-alpha.1.123+abcdef → v1.37.2",
		},
		{
			name:  "build metadata then a gate",
			in:    "v1.38.0-alpha.1.123+abcdef+SELinuxMount=false,v1.37.2",
			gates: []map[string]bool{{"SELinuxMount": false}, nil},
			str:   "v1.38.0-alpha.1.123+abcdef+SELinuxMount=false → v1.37.2",
		},
		{name: "gate without a value", in: "v1.28.15,v1.27.16+NewVolumeManagerReconstruction", errHas: []string{`plan entry 2 "v1.27.16+NewVolumeManagerReconstruction"`, "write +Gate=true or +Gate=false"}},
		{name: "empty gate", in: "v1.28.15+,v1.27.16", errHas: []string{`plan entry 1 "v1.28.15+"`, `"" after "+" is not a feature gate`}},
		{name: "not a bool", in: "v1.28.15,v1.27.16+NewVolumeManagerReconstruction=off", errHas: []string{"NewVolumeManagerReconstruction=off: the value must be true or false"}},
		{name: "twice", in: "v1.28.15,v1.27.16+SELinuxMount=true+SELinuxMount=false", errHas: []string{"feature gate SELinuxMount is set twice"}},
		{name: "bad name", in: "v1.28.15,v1.27.16+new_volume=true", errHas: []string{`"new_volume" is not a feature gate name`}},
		{name: "metadata after a gate", in: "v1.28.15,v1.27.16+SELinuxMount=true+abc", errHas: []string{`"abc" after "+" is not a feature gate`}},
		{
			name: "unknown gate names the table",
			in:   "v1.28.15,v1.28.15+NodeSwap=true",
			errHas: []string{`plan entry 2 "v1.28.15+NodeSwap=true": feature gate NodeSwap is not in skewtest's table of reconstruction gates`,
				"NewVolumeManagerReconstruction, SELinuxChangePolicy, SELinuxMount, SELinuxMountReadWriteOncePod"},
		},
		{name: "case slip", in: "v1.28.15,v1.28.15+SelinuxMount=true", errHas: []string{"did you mean SELinuxMount?"}},
		{
			name: "removed gate",
			in:   "v1.37.2,v1.34.4+NewVolumeManagerReconstruction=false",
			errHas: []string{`plan entry 2 "v1.34.4+NewVolumeManagerReconstruction=false": kubelet v1.34.4 does not know feature gate NewVolumeManagerReconstruction (removed in 1.32)`,
				`"unrecognized feature gate: NewVolumeManagerReconstruction"`, "NewVolumeManagerReconstruction=false is taken by kubelets 1.27-1.29"},
		},
		{
			name: "locked gate",
			in:   "v1.31.14,v1.30.14+NewVolumeManagerReconstruction=false",
			errHas: []string{`plan entry 2 "v1.30.14+NewVolumeManagerReconstruction=false": kubelet v1.30.14 has feature gate NewVolumeManagerReconstruction locked to true (GA since 1.30)`,
				"would refuse to start with false", "taken by kubelets 1.27-1.29"},
		},
		{
			name:   "not yet added",
			in:     "v1.29.6+SELinuxMount=true,v1.28.15",
			errHas: []string{`plan entry 1 "v1.29.6+SELinuxMount=true": kubelet v1.29.6 does not know feature gate SELinuxMount (added in 1.30)`, "SELinuxMount=true is taken by kubelets 1.30 and later"},
		},
		{
			name:   "all problems reported",
			in:     "v1.36.3+SELinuxMountReadWriteOncePod=false,v1.35.4+SELinuxChangePolicy=false+Foo=true",
			errHas: []string{"plan entry 1", "locked to true (GA since 1.36)", "plan entry 2", "feature gate Foo is not in"},
			// SELinuxChangePolicy=false is fine on 1.35.
			errNot: []string{"has feature gate SELinuxChangePolicy", "know feature gate SELinuxChangePolicy"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.in)
			if len(tc.errHas) > 0 {
				if err == nil {
					t.Fatalf("Parse(%q) = %v, want error", tc.in, p)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				for _, s := range tc.errNot {
					if strings.Contains(err.Error(), s) {
						t.Errorf("error %q contains %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(p.Gates, tc.gates) {
				t.Errorf("gates = %v, want %v", p.Gates, tc.gates)
			}
			if got := p.String(); got != tc.str {
				t.Errorf("String = %q, want %q", got, tc.str)
			}
			// Raw and String both parse back to the same plan.
			for _, again := range []string{strings.Join(p.Raw, ","), strings.ReplaceAll(p.String(), " → ", ",")} {
				q, err := Parse(again)
				if err != nil {
					t.Fatalf("Parse(%q) again: %v", again, err)
				}
				if q.String() != p.String() || !reflect.DeepEqual(q.Gates, p.Gates) {
					t.Errorf("%q parsed back as %s %v, want %s %v", again, q, q.Gates, p, p.Gates)
				}
			}
			if p.HasGates() != (tc.gates[0] != nil || tc.gates[1] != nil || len(tc.gates) > 2 && tc.gates[2] != nil) {
				t.Errorf("HasGates = %t", p.HasGates())
			}
		})
	}
}

// Two entries of one version with different gates make a hop; the hop
// carries both entries' gates.
func TestHopsWithGates(t *testing.T) {
	p, err := Parse("v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.15")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(p.Newest()); err != nil {
		t.Fatalf("a same-version hop with other gates is refused: %v", err)
	}
	want := []string{
		"hop 1: v1.28.15 → v1.28.15+NewVolumeManagerReconstruction=false (same)",
		"hop 2: v1.28.15+NewVolumeManagerReconstruction=false → v1.28.15 (same)",
	}
	hops := p.Hops()
	if len(hops) != 2 {
		t.Fatalf("%d hops: %v", len(hops), hops)
	}
	for i, h := range hops {
		if h.String() != want[i] {
			t.Errorf("hop %d = %q, want %q", i+1, h, want[i])
		}
	}
	if hops[0].FromGates != nil || hops[0].ToGates["NewVolumeManagerReconstruction"] || len(hops[0].ToGates) != 1 || hops[1].ToGates != nil {
		t.Errorf("hop gates: %+v", hops)
	}
	if got := p.Distinct(); len(got) != 1 {
		t.Errorf("one binary serves the plan, got %v", got)
	}
}

// Validate checks the gates of hand-built plans too, and their shape.
func TestValidateGatesHandBuilt(t *testing.T) {
	v := func(s string) *version.Version { return version.MustParseSemantic(s) }
	p := Plan{Versions: []*version.Version{v("v1.37.2"), v("v1.36.3")}, Gates: []map[string]bool{nil, {"SELinuxChangePolicy": false}}}
	if err := p.Validate(p.Newest()); err == nil || !strings.Contains(err.Error(), `plan entry 2 "v1.36.3": kubelet v1.36.3 has feature gate SELinuxChangePolicy locked to true`) {
		t.Errorf("hand-built plan with a locked gate: %v", err)
	}
	p.Gates = p.Gates[:1]
	if err := p.Validate(p.Newest()); err == nil || !strings.Contains(err.Error(), "feature gates for 1 entries of 2") {
		t.Errorf("misaligned gates: %v", err)
	}
	p.Gates = nil
	if err := p.Validate(p.Newest()); err != nil || p.HasGates() || p.GatesOf(1) != nil {
		t.Errorf("plan without gates: %v", err)
	}
}

func TestCheckGatesOn(t *testing.T) {
	gated, err := Parse("v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.15")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Parse("v1.28.15,v1.27.16,v1.28.15")
	if err != nil {
		t.Fatal(err)
	}
	const why = "its kubelets keep their own configuration"
	if err := plain.CheckGatesOn("elsewhere", why, []string{"here"}); err != nil {
		t.Errorf("a plan without gates: %v", err)
	}
	err = gated.CheckGatesOn("elsewhere", why, []string{"here", "there"})
	if err == nil {
		t.Fatal("a plan with gates: accepted")
	}
	for _, want := range []string{"plan entries 2 (v1.28.15+NewVolumeManagerReconstruction=false)", "PROVIDER=elsewhere cannot give the kubelet: " + why, "run the plan with PROVIDER=here or PROVIDER=there"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}
