package clusters_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/timeouts"
)

// Every descriptor is complete, and what tells providers apart (name, run
// directory prefix) does so.
func TestDescriptors(t *testing.T) {
	t.Parallel()
	ps := clusters.Providers()
	if got := strings.Join(providerNames(ps), ","); got != "local,kind,existing,kops" {
		t.Errorf("providers %s, want local,kind,existing,kops (the order the errors and settings list)", got)
	}
	if clusters.Default().Name != "local" {
		t.Errorf("default provider %s, want local", clusters.Default().Name)
	}
	byID := 0
	for _, d := range ps {
		if d.Name == "" || d.Help == "" || d.RunRoot == nil || d.FromEnv == nil || d.New == nil || d.Inspect == nil || d.Clean == nil || len(d.CSIModes) == 0 {
			t.Errorf("descriptor %q lacks a field every provider needs: %+v", d.Name, d)
		}
		if d.CSIModes[0] != clusters.CSIModeTmpfs {
			t.Errorf("%s: CSI modes %v: the first is the default, tmpfs", d.Name, d.CSIModes)
		}
		if d.CreatesCluster != (d.MaxTestNodes > 0) {
			t.Errorf("%s: CreatesCluster %v with MaxTestNodes %d", d.Name, d.CreatesCluster, d.MaxTestNodes)
		}
		if d.RunDirPrefix == "" {
			byID++
		}
		for _, o := range ps {
			if o.Name != d.Name && d.RunDirPrefix != "" && strings.HasPrefix(o.RunDirPrefix, d.RunDirPrefix) {
				t.Errorf("run directory prefixes of %s (%q) and %s (%q) overlap", d.Name, d.RunDirPrefix, o.Name, o.RunDirPrefix)
			}
		}
		if got, err := clusters.Lookup(d.Name); err != nil || got.Name != d.Name {
			t.Errorf("Lookup(%q) = %q, %v", d.Name, got.Name, err)
		}
	}
	if byID != 1 {
		t.Errorf("%d providers name their run directories by the run ID alone, want 1", byID)
	}
}

// Each provider's FromEnv reads only the variables its Settings list, and
// accepts an empty environment.
func TestDescriptorSettingsDocumentWhatFromEnvReads(t *testing.T) {
	t.Parallel()
	for _, d := range clusters.Providers() {
		documented := map[string]bool{}
		for _, s := range d.Settings {
			if s.Help == "" {
				t.Errorf("%s: setting %s has no help text", d.Name, s.Name)
			}
			for _, n := range strings.Split(s.Name, "/") {
				documented[strings.TrimSpace(n)] = true
			}
		}
		var read []string
		if _, err := d.FromEnv(func(k string) string { read = append(read, k); return "" }); err != nil {
			t.Errorf("%s: FromEnv of an empty environment: %v", d.Name, err)
		}
		for _, k := range read {
			if !documented[k] {
				t.Errorf("%s: FromEnv reads %s, which its Settings do not list", d.Name, k)
			}
		}
	}
}

// A provider's own settings given to another provider are refused with
// an error naming both types, not taken for defaults.
func TestNewRefusesAnotherProvidersSettings(t *testing.T) {
	t.Parallel()
	kindDesc, _ := clusters.Lookup("kind")
	s, err := kindDesc.FromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	err = clusters.CheckOptions("kops", clusters.Options{}, s)
	assertSays(t, err, []string{"provider kops", "kind.Settings", "kops.Config"})
}

// Run directories go to the provider their name's prefix names, a bare
// run ID to local; only the clean of an existing or kops cluster leaves this host alone.
func TestRunDirsByPrefix(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, tc := range []struct {
		base       string
		cleansHost bool
		notARun    string
	}{
		{"20260101-000000-abcd", true, "no local run state"},
		{"kind-20260101-000000-abcd", true, "no kind run state"},
		{"kops-20260101-000000-abcd", false, "no kops run state"},
		{"existing-20260101-000000-abcd", false, "no existing-provider run state"},
	} {
		dir := filepath.Join(root, tc.base)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if got := clusters.CleansHost(dir); got != tc.cleansHost {
			t.Errorf("CleansHost(%s) = %v, want %v", tc.base, got, tc.cleansHost)
		}
		r := clusters.Inspect(dir + "/")
		if r.Path != dir+"/" {
			t.Errorf("Inspect(%s).Path = %s, want it as given", tc.base, r.Path)
		}
		if r.NotARun == nil || !strings.Contains(r.NotARun.Error(), tc.notARun) {
			t.Errorf("Inspect(%s).NotARun = %v, want it to say %q", tc.base, r.NotARun, tc.notARun)
		}
	}
}

func TestRunRootsAndTeardownBounds(t *testing.T) {
	t.Parallel()
	roots := clusters.RunRoots()
	if len(roots) == 0 || roots[0] != "/var/lib/skewtest" {
		t.Errorf("RunRoots() = %v, want /var/lib/skewtest first", roots)
	}
	if os.Geteuid() == 0 && len(roots) != 1 {
		t.Errorf("RunRoots() as root = %v, want one", roots)
	}
	if len(slices.Compact(slices.Clone(roots))) != len(roots) {
		t.Errorf("RunRoots() = %v has duplicates", roots)
	}
	for _, p := range []string{"local", "kind", "existing", "nope", ""} {
		if got, want := clusters.TeardownBound(p), timeouts.Logs+timeouts.Teardown; got != want {
			t.Errorf("TeardownBound(%q) = %s, want %s", p, got, want)
		}
	}
	if clusters.TeardownBound("kops") <= clusters.TeardownBound("local") {
		t.Errorf("TeardownBound(kops) = %s, no longer than a local cluster's", clusters.TeardownBound("kops"))
	}
}

func providerNames(ds []clusters.Descriptor) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

// Each provider's declared node capabilities hold for its node type and
// agree with its other properties (registry.Descriptor.CheckNodes).
func TestNodeCapabilitiesMatchNodeTypes(t *testing.T) {
	t.Parallel()
	for _, d := range clusters.Providers() {
		if err := d.CheckNodes(); err != nil {
			t.Error(err)
		}
	}
}
