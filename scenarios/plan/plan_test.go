package plan

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string // rendered versions
		wantRaw []string
		errHas  []string
	}{
		{name: "round trip", in: "v1.37.2,v1.36.3,v1.37.2", want: []string{"v1.37.2", "v1.36.3", "v1.37.2"}, wantRaw: []string{"v1.37.2", "v1.36.3", "v1.37.2"}},
		{name: "spaces and no v prefix", in: "  1.36.3 , v1.37.2  ", want: []string{"v1.36.3", "v1.37.2"}, wantRaw: []string{"1.36.3", "v1.37.2"}},
		{name: "pre-release", in: "v1.37.2,v1.38.0-alpha.1", want: []string{"v1.37.2", "v1.38.0-alpha.1"}},
		{name: "banana", in: "banana", errHas: []string{`plan entry 1 "banana" is not a version: want vMAJOR.MINOR.PATCH such as v1.36.3`}},
		{name: "major.minor only", in: "v1.37.2,v1.36", errHas: []string{`plan entry 2 "v1.36" is not a version`, "vMAJOR.MINOR.PATCH"}},
		{name: "bad entries all reported", in: "v1.37.2,x,v1.36.3,1.2.3.4", errHas: []string{`plan entry 2 "x"`, `plan entry 4 "1.2.3.4"`}},
		{name: "empty entry", in: "v1.37.2,,v1.36.3", errHas: []string{"plan entry 2", "is empty", "remove the extra comma"}},
		{name: "trailing comma", in: "v1.37.2,v1.36.3,", errHas: []string{"plan entry 3", "is empty"}},
		{name: "empty plan", in: "  ", errHas: []string{"plan is empty", "at least two"}},
		{name: "single version", in: "v1.37.2", errHas: []string{`a plan needs at least two versions (the starting kubelet and one to swap to), got "v1.37.2"`}},
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
						t.Errorf("Parse(%q) error %q does not contain %q", tc.in, err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			var got []string
			for _, v := range p.Versions {
				got = append(got, V(v))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("versions = %v, want %v", got, tc.want)
			}
			if tc.wantRaw != nil && strings.Join(p.Raw, ",") != strings.Join(tc.wantRaw, ",") {
				t.Errorf("raw = %q, want %q", p.Raw, tc.wantRaw)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		plan   string
		api    string // "" = plan.Newest()
		errHas []string
		errNot []string
	}{
		{name: "down and up", plan: "v1.37.2,v1.36.3,v1.37.2"},
		{name: "three minors older allowed", plan: "v1.37.2,v1.34.0", api: "v1.37.2"},
		{name: "newer patch at same minor allowed", plan: "v1.37.5,v1.36.3", api: "v1.37.2"},
		{name: "pre-release api server", plan: "v1.38.0-alpha.1,v1.37.2", api: "v1.38.0-alpha.1"},
		{name: "release kubelet with pre-release api server same minor", plan: "v1.38.0,v1.37.2", api: "v1.38.0-alpha.1"},
		{
			name: "too old",
			plan: "v1.37.2,v1.30.0",
			errHas: []string{
				"plan entry 2 v1.30.0 is outside the version skew policy: a kubelet may be at most 3 minor versions older than the API server (v1.37.2), so the oldest allowed is v1.34; use v1.34.x or newer, or an older API server (APISERVER) (https://kubernetes.io/releases/version-skew-policy/#kubelet)",
			},
		},
		{name: "four minors older", plan: "v1.37.2,v1.33.9", errHas: []string{"plan entry 2 v1.33.9", "oldest allowed is v1.34"}},
		// The seed's sign-off replayed under the newest 1.28 control plane.
		{name: "older plan under a newer control plane", plan: "v1.28.5,v1.26.15,v1.28.5", api: "v1.28.15"},
		{name: "n-3 from 1.28", plan: "v1.28.15,v1.25.16", api: "v1.28.15"},
		{name: "n-2 before 1.28", plan: "v1.27.16,v1.25.16", api: "v1.27.16"},
		{name: "n-3 refused before 1.28", plan: "v1.27.16,v1.24.17", api: "v1.27.16",
			errHas: []string{"plan entry 2 v1.24.17 is outside the version skew policy: a kubelet may be at most 2 minor versions older than the API server (v1.27.16), so the oldest allowed is v1.25"}},
		{
			name:   "kubelet newer than api server",
			plan:   "v1.37.2,v1.38.1",
			api:    "v1.37.2",
			errHas: []string{"plan entry 2 v1.38.1 is newer than the API server (v1.37.2)", "API server must be at least v1.38", "use a kubelet of v1.37.x or older"},
		},
		{
			name:   "pre-release of next minor is newer",
			plan:   "v1.37.2,v1.38.0-alpha.1",
			api:    "v1.37.2",
			errHas: []string{"plan entry 2 v1.38.0-alpha.1 is newer than the API server (v1.37.2)"},
		},
		{
			name:   "major mismatch",
			plan:   "v1.37.2,v2.0.0",
			api:    "v1.37.2",
			errHas: []string{"plan entry 2 v2.0.0 has major version 2 but the API server (v1.37.2) has major version 1", "use v1.x versions"},
		},
		{
			name:   "several problems all reported",
			plan:   "v1.39.0,v1.37.2,v1.30.0",
			api:    "v1.37.2",
			errHas: []string{"plan entry 1 v1.39.0 is newer", "plan entry 3 v1.30.0 is outside"},
			errNot: []string{"plan entry 2"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.plan)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.plan, err)
			}
			api := p.Newest()
			if tc.api != "" {
				api = version.MustParseSemantic(tc.api)
			}
			err = p.Validate(api)
			if len(tc.errHas) == 0 {
				if err != nil {
					t.Fatalf("Validate(%s) of %s: %v", V(api), p, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%s) of %s succeeded, want error", V(api), p)
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
		})
	}
}

func TestValidateHandBuilt(t *testing.T) {
	one := Plan{Versions: []*version.Version{version.MustParseSemantic("v1.37.2")}}
	err := one.Validate(version.MustParseSemantic("v1.37.2"))
	if err == nil || !strings.Contains(err.Error(), `a plan needs at least two versions (the starting kubelet and one to swap to), got "v1.37.2"`) {
		t.Errorf("single-version plan: got %v", err)
	}
	two := Plan{Versions: []*version.Version{version.MustParseSemantic("v1.37.2"), version.MustParseSemantic("v1.36.3")}}
	if err := two.Validate(nil); err == nil || !strings.Contains(err.Error(), "plan.Newest()") {
		t.Errorf("nil API server: got %v", err)
	}
	if err := two.Validate(two.Newest()); err != nil {
		t.Errorf("hand-built valid plan: %v", err)
	}
}

func TestHops(t *testing.T) {
	p, err := Parse("v1.36.3,v1.37.2,v1.37.2,v1.35.0,v1.38.0-alpha.1,v1.38.0")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"hop 1: v1.36.3 → v1.37.2 (upgrade)",
		"hop 2: v1.37.2 → v1.37.2 (same)",
		"hop 3: v1.37.2 → v1.35.0 (downgrade)",
		"hop 4: v1.35.0 → v1.38.0-alpha.1 (upgrade)",
		"hop 5: v1.38.0-alpha.1 → v1.38.0 (upgrade)",
	}
	hops := p.Hops()
	if len(hops) != len(want) {
		t.Fatalf("got %d hops, want %d: %v", len(hops), len(want), hops)
	}
	for i, h := range hops {
		if h.String() != want[i] {
			t.Errorf("hop %d = %q, want %q", i, h, want[i])
		}
		if h.Number != i+1 || h.From != p.Versions[i] || h.To != p.Versions[i+1] {
			t.Errorf("hop %d fields = %+v", i, h)
		}
	}
	if got := (Plan{}).Hops(); got != nil {
		t.Errorf("empty plan hops = %v", got)
	}
}

func TestStringNewestDistinct(t *testing.T) {
	tests := []struct {
		in       string
		str      string
		newest   string
		distinct string
	}{
		{in: "v1.37.2,v1.36.3,v1.37.2", str: "v1.37.2 → v1.36.3 → v1.37.2", newest: "v1.37.2", distinct: "v1.37.2 v1.36.3"},
		{in: "1.34.1, 1.35.0 ,1.34.1,v1.37.0", str: "v1.34.1 → v1.35.0 → v1.34.1 → v1.37.0", newest: "v1.37.0", distinct: "v1.34.1 v1.35.0 v1.37.0"},
		{in: "v1.38.0-alpha.1,v1.37.9,v1.38.0-alpha.1", str: "v1.38.0-alpha.1 → v1.37.9 → v1.38.0-alpha.1", newest: "v1.38.0-alpha.1", distinct: "v1.38.0-alpha.1 v1.37.9"},
		{in: "v1.38.0-alpha.1,v1.38.0", str: "v1.38.0-alpha.1 → v1.38.0", newest: "v1.38.0", distinct: "v1.38.0-alpha.1 v1.38.0"},
	}
	for _, tc := range tests {
		p, err := Parse(tc.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.in, err)
		}
		if got := p.String(); got != tc.str {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.str)
		}
		if got := V(p.Newest()); got != tc.newest {
			t.Errorf("Newest(%q) = %q, want %q", tc.in, got, tc.newest)
		}
		var d []string
		for _, v := range p.Distinct() {
			d = append(d, V(v))
		}
		if got := strings.Join(d, " "); got != tc.distinct {
			t.Errorf("Distinct(%q) = %q, want %q", tc.in, got, tc.distinct)
		}
	}
	if (Plan{}).Newest() != nil {
		t.Error("Newest of an empty plan is not nil")
	}
}
