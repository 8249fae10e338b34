package clusters_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/existing"
	"sigs.k8s.io/skewtest/clusters/kind"
)

// providerCases are the names Check and New are asked about, with what the
// error must say (nil want: accepted).
var providerCases = []struct {
	name string
	ok   bool
	want []string
}{
	{name: "local", ok: true},
	{name: "existing", ok: true},
	{name: "kind", ok: true},
	{name: "kops", ok: true},
	{name: "nope", want: []string{`unknown provider "nope"`, "want one of local, kind, existing, kops"}},
	{name: "", want: []string{`unknown provider ""`, "want one of local, kind, existing, kops"}},
	{name: "Local", want: []string{`unknown provider "Local"`, "want one of local, kind, existing, kops"}},
	{name: " local", want: []string{`unknown provider " local"`, "want one of local, kind, existing, kops"}},
	{name: "gke", want: []string{`unknown provider "gke"`, "want one of local, kind, existing, kops"}},
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range providerCases {
		t.Run("provider="+tc.name, func(t *testing.T) {
			t.Parallel()
			err := clusters.Check(tc.name)
			if tc.ok {
				if err != nil {
					t.Fatalf("Check(%q) = %v, want nil", tc.name, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check(%q) accepted it", tc.name)
			}
			assertSays(t, err, tc.want)
		})
	}
}

// New rejects what Check rejects, with the same error, and returns no
// provider.
func TestNewRejectsWhatCheckRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range providerCases {
		if tc.ok {
			continue
		}
		t.Run("provider="+tc.name, func(t *testing.T) {
			t.Parallel()
			runRoot := filepath.Join(t.TempDir(), "runs")
			p, err := clusters.New(tc.name, clusters.Options{RunID: "r1", RunRoot: runRoot, CacheDir: filepath.Join(t.TempDir(), "cache")}, nil)
			if err == nil {
				t.Fatalf("New(%q) returned a %T", tc.name, p)
			}
			if p != nil {
				t.Errorf("New(%q) failed but returned a provider %T", tc.name, p)
			}
			if cerr := clusters.Check(tc.name); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("New error %q differs from Check's %q", err, cerr)
			}
			assertSays(t, err, tc.want)
			if _, serr := os.Stat(runRoot); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("New(%q) created %s (stat: %v)", tc.name, runRoot, serr)
			}
		})
	}
}

func TestNewLocal(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	runRoot := filepath.Join(base, "runs")
	cache := filepath.Join(base, "cache")
	ok := func() clusters.Options {
		return clusters.Options{
			RunID:            "run-1",
			CacheDir:         cache,
			RunRoot:          runRoot,
			APIServerVersion: version.MustParseSemantic("v1.37.2"),
			InitialKubelets:  []binaries.Binary{{Component: "kubelet", Version: "v1.37.2", Path: "/nonexistent/kubelet"}},
		}
	}
	t.Run("valid", func(t *testing.T) {
		p, err := clusters.New("local", ok(), nil)
		if os.Geteuid() != 0 {
			if err == nil || !strings.Contains(err.Error(), "must run as root") {
				t.Fatalf("New as non-root: %v, want a must-run-as-root error", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if p.Name() != "local" {
			t.Errorf("Name() = %q, want %q", p.Name(), "local")
		}
		if want := filepath.Join(runRoot, "run-1"); !strings.HasPrefix(p.KubeconfigPath(), want+string(filepath.Separator)) {
			t.Errorf("KubeconfigPath() = %s, want it under the run directory %s", p.KubeconfigPath(), want)
		}
	})
	for _, tc := range []struct {
		name   string
		mutate func(*clusters.Options)
		want   string
	}{
		{"no run ID", func(o *clusters.Options) { o.RunID = "" }, "run ID is required"},
		{"no API server version", func(o *clusters.Options) { o.APIServerVersion = nil }, "API server version is required"},
		{"no initial kubelet", func(o *clusters.Options) { o.InitialKubelets = nil }, "initial kubelet binary is required"},
		{"a node without a kubelet", func(o *clusters.Options) {
			o.InitialKubelets = append(o.InitialKubelets, binaries.Binary{})
		}, "initial kubelet binary is required for node 2 (skewtest-worker2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok()
			tc.mutate(&o)
			p, err := clusters.New("local", o, nil)
			if err == nil {
				t.Fatalf("New accepted it: %T", p)
			}
			assertSays(t, err, []string{tc.want})
		})
	}
	// New creates nothing: the cluster appears at Up.
	for _, d := range []string{runRoot, cache} {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("New created %s (stat: %v); nothing may exist before Up", d, err)
		}
	}
}

// Several nodes: local and kind make one per InitialKubelets entry; more
// than kind makes (kind.MaxWorkers) is refused before anything is built.
func TestNewSeveralNodes(t *testing.T) {
	t.Parallel()
	kubelets := []binaries.Binary{
		{Component: "kubelet", Version: "v1.37.2", Path: "/nonexistent/kubelet-1.37"},
		{Component: "kubelet", Version: "v1.36.3", Path: "/nonexistent/kubelet-1.36"},
		{Component: "kubelet", Version: "v1.34.4", Path: "/nonexistent/kubelet-1.34"},
	}
	o := clusters.Options{RunID: "run-1", CacheDir: t.TempDir(), RunRoot: t.TempDir(),
		APIServerVersion: version.MustParseSemantic("v1.37.2"), InitialKubelets: kubelets}
	if err := clusters.CheckOptions("kind", o, nil); err != nil {
		t.Errorf("CheckOptions(kind) with 3 nodes: %v", err)
	}
	if p, err := clusters.New("kind", o, nil); err != nil {
		t.Errorf("New(kind) with 3 nodes: %v", err)
	} else if _, err := p.TestNodes(t.Context()); err == nil {
		t.Errorf("TestNodes of kind before Up returned nodes")
	}
	tooMany := o
	for len(tooMany.InitialKubelets) <= kind.MaxWorkers {
		tooMany.InitialKubelets = append(tooMany.InitialKubelets, kubelets[0])
	}
	err := clusters.CheckOptions("kind", tooMany, nil)
	assertSays(t, err, []string{fmt.Sprintf("provider kind: %d nodes asked for, but it makes at most %d; use PROVIDER=local for several nodes", kind.MaxWorkers+1, kind.MaxWorkers)})
	if p, err := clusters.New("kind", tooMany, nil); err == nil {
		t.Errorf("New(kind) with %d nodes returned a %T", kind.MaxWorkers+1, p)
	}
	if err := clusters.CheckOptions("local", o, nil); err != nil {
		t.Errorf("CheckOptions(local) with 3 nodes: %v", err)
	}
	p, err := clusters.New("local", o, nil)
	if os.Geteuid() != 0 {
		assertSays(t, err, []string{"must run as root"})
		return
	}
	if err != nil {
		t.Fatalf("New(local) with 3 nodes: %v", err)
	}
	if _, err := p.TestNodes(t.Context()); err == nil {
		t.Errorf("TestNodes before Up returned nodes")
	}
}

func TestNewExisting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeFile(t, kubeconfig, `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:1
users:
- name: test
  user:
    token: dummy
contexts:
- name: test
  context:
    cluster: test
    user: test
current-context: test
`)
	knownHosts := filepath.Join(dir, "known_hosts")
	writeFile(t, knownHosts, "")
	key := filepath.Join(dir, "id_ed25519")
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, key, string(pem.EncodeToMemory(block)))

	cfg := existing.Config{Kubeconfig: kubeconfig, SSH: existing.SSHConfig{User: "test", KeyFile: key, KnownHostsFile: knownHosts}}
	t.Run("valid", func(t *testing.T) {
		p, err := clusters.New("existing", clusters.Options{RunID: "run-1"}, cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if p.Name() != "existing" {
			t.Errorf("Name() = %q, want %q", p.Name(), "existing")
		}
		if p.KubeconfigPath() != kubeconfig {
			t.Errorf("KubeconfigPath() = %s, want %s", p.KubeconfigPath(), kubeconfig)
		}
	})
	t.Run("state directory beside the other runs", func(t *testing.T) {
		root := t.TempDir()
		p, err := clusters.New("existing", clusters.Options{RunID: "run-7", RunRoot: root}, cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		rd, ok := p.(capabilities.WithRunDir)
		if !ok || rd.RunDir() != filepath.Join(root, "existing-run-7") {
			t.Fatalf("run dir of the existing provider = %v, want %s", rd, filepath.Join(root, "existing-run-7"))
		}
		// A run killed before it recorded anything left an empty
		// directory: clean removes it without reaching any node.
		if err := os.MkdirAll(rd.RunDir(), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := clusters.Clean(t.Context(), rd.RunDir()); err != nil {
			t.Fatalf("Clean: %v", err)
		}
		if _, err := os.Stat(rd.RunDir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after Clean: %v", rd.RunDir(), err)
		}
	})
	t.Run("no kubeconfig", func(t *testing.T) {
		c := cfg
		c.Kubeconfig = ""
		p, err := clusters.New("existing", clusters.Options{RunID: "run-1"}, c)
		if err == nil {
			t.Fatalf("New accepted it: %T", p)
		}
		assertSays(t, err, []string{"Kubeconfig is required"})
	})
	t.Run("missing kubeconfig", func(t *testing.T) {
		c := cfg
		c.Kubeconfig = filepath.Join(dir, "no-such-kubeconfig")
		p, err := clusters.New("existing", clusters.Options{RunID: "run-1"}, c)
		if err == nil {
			t.Fatalf("New accepted it: %T", p)
		}
		assertSays(t, err, []string{c.Kubeconfig})
	})
}

func assertSays(t *testing.T, err error, want []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q: %v", w, err)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCSIMode: CSI_MODE is checked before anything is made: an unknown
// mode names the setting and the choices, ebs is refused where only the
// local provider runs it, and both modes are accepted on local.
func TestCSIMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		provider, mode string
		want           []string // nil: accepted
	}{
		{provider: "local", mode: ""},
		{provider: "local", mode: "tmpfs"},
		{provider: "local", mode: "ebs"},
		{provider: "kind", mode: "tmpfs"},
		{provider: "local", mode: "nfs", want: []string{"CSI_MODE", `"nfs"`, "tmpfs", "ebs"}},
		{provider: "local", mode: "EBS", want: []string{"CSI_MODE", `"EBS"`}},
		{provider: "kind", mode: "ebs", want: []string{"CSI_MODE=ebs", "provider kind", "PROVIDER=local"}},
		{provider: "existing", mode: "ebs", want: []string{"CSI_MODE=ebs", "provider existing"}},
	} {
		err := clusters.CheckOptions(tc.provider, clusters.Options{CSIMode: tc.mode}, nil)
		if tc.want == nil {
			if err != nil {
				t.Errorf("CheckOptions(%s, CSI_MODE=%q): %v", tc.provider, tc.mode, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("CheckOptions(%s, CSI_MODE=%q) accepted it", tc.provider, tc.mode)
			continue
		}
		assertSays(t, err, tc.want)
	}
}

// A new run on this host must see what earlier runs left in the run roots:
// a kind run's directory with its state and a local-looking one without
// are told apart, and an existing-cluster run's, which changes nothing on
// this host, is not counted.
func TestLeftOnHostListsOnlyRunsOfProvidersOnThisHost(t *testing.T) {
	root := t.TempDir()
	mk := func(name, file, body string) string {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if file != "" {
			if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	kept := mk(kind.RunDirPrefix+"20000101-000000-tzqx", kind.StateFile, `{"runID":"20000101-000000-tzqx"}`)
	mk("my-notes", "keep", "a user's own directory")
	mk(existing.RunDirPrefix+"20000101-000000-tzqy", existing.StateFile, `{"runID":"20000101-000000-tzqy","nodes":[]}`)
	if got := clusters.LeftOnHost(root); !slices.Equal(got, []string{kept}) {
		t.Errorf("LeftOnHost = %q, want only the kind run %s", got, kept)
	}
	if got := clusters.LeftOnHost(t.TempDir(), filepath.Join(root, "missing")); len(got) != 0 {
		t.Errorf("LeftOnHost of empty and missing roots = %q", got)
	}
}
