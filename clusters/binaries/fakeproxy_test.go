package binaries

import (
	"archive/zip"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// fakeProxy is a GOPROXY=file:// module proxy in a temp dir.
type fakeProxy struct {
	t    *testing.T
	root string
}

// add serves module@v with files (path in the module → content); files must
// hold go.mod.
func (p *fakeProxy) add(module, v string, files map[string]string) {
	t := p.t
	t.Helper()
	dir := filepath.Join(p.root, filepath.FromSlash(module), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, v+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	names := sortedKeys(files)
	for _, name := range names {
		w, err := zw.Create(module + "@" + v + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(v+".mod", files["go.mod"])
	write(v+".info", fmt.Sprintf(`{"Version":%q,"Time":"2024-01-01T00:00:00Z"}`, v))
	var versions []string
	if old, err := os.ReadFile(filepath.Join(dir, "list")); err == nil {
		versions = strings.Fields(string(old))
	}
	versions = append(versions, v)
	sort.Strings(versions)
	write("list", strings.Join(versions, "\n")+"\n")
}

// useFakeProxy points the go command of this test at a new fake proxy,
// with its own module cache and no checksum database.
func useFakeProxy(t *testing.T) *fakeProxy {
	p := &fakeProxy{t: t, root: t.TempDir()}
	modcache := t.TempDir()
	// The module cache is read-only (ModuleBuilder sets GOFLAGS itself, so
	// -modcacherw cannot be passed): make it removable.
	t.Cleanup(func() {
		filepath.WalkDir(modcache, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(path, 0o755)
			}
			return nil
		})
	})
	t.Setenv("GOPROXY", "file://"+filepath.ToSlash(p.root))
	t.Setenv("GOMODCACHE", modcache)
	t.Setenv("GOSUMDB", "off")
	t.Setenv("GONOSUMDB", "")
	t.Setenv("GOPRIVATE", "")
	t.Setenv("GOTOOLCHAIN", "local")
	return p
}

// addFakeKubernetes serves k8s.io/kubernetes@v (the fake of
// fakeKubernetesFiles, with trivial mains for the other components) and,
// at v0.MINOR.PATCH, the staging modules in served.
func (p *fakeProxy) addFakeKubernetes(v string, served ...string) {
	files := map[string]string{}
	for k, body := range fakeKubernetesFiles {
		files[k] = body
	}
	for c := range moduleComponents {
		if _, ok := files["cmd/"+c+"/main.go"]; !ok {
			files["cmd/"+c+"/main.go"] = "package main\n\nfunc main() {}\n"
		}
	}
	gomod := "module k8s.io/kubernetes\n\ngo 1.22\n\nrequire (\n\tgithub.com/example/thirdparty v1.0.0\n"
	for _, m := range sortedKeys(fakeStagingFiles) {
		gomod += "\t" + m + " v0.0.0\n"
	}
	gomod += ")\n\nreplace (\n"
	for _, m := range sortedKeys(fakeStagingFiles) {
		gomod += "\t" + m + " => ./staging/src/" + m + "\n"
	}
	files["go.mod"] = gomod + ")\n"
	p.add("k8s.io/kubernetes", v, files)
	if _, err := os.Stat(filepath.Join(p.root, "github.com/example/thirdparty")); err != nil {
		p.add("github.com/example/thirdparty", "v1.0.0", map[string]string{"go.mod": "module github.com/example/thirdparty\n\ngo 1.22\n", "tp.go": "package thirdparty\n"})
	}
	sv := version.MustParseSemantic(v)
	for _, m := range served {
		p.add(m, fmt.Sprintf("v0.%d.%d", sv.Minor(), sv.Patch()), fakeStagingFiles[m])
	}
}

// TestModuleBuildStubsWhatNoComponentImports runs CheckServed and Build
// against a fake module proxy (no network): a version that lacks only
// staging modules the kubelet does not import is accepted and built (with
// providerless when only that keeps k8s.io/legacy-cloud-providers out),
// and one that lacks a module the kubelet imports is refused, as is a
// later build of another component that needs a stubbed module.
func TestModuleBuildStubsWhatNoComponentImports(t *testing.T) {
	p := useFakeProxy(t)
	p.addFakeKubernetes("v1.99.1", "k8s.io/x", "k8s.io/xy")
	p.addFakeKubernetes("v1.99.2", "k8s.io/xy", "k8s.io/y", "k8s.io/legacy-cloud-providers")
	p.addFakeKubernetes("v1.99.3", "k8s.io/x", "k8s.io/xy", "k8s.io/y", "k8s.io/legacy-cloud-providers")
	cache := t.TempDir()
	b := &ModuleBuilder{CacheDir: cache, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	ctx := t.Context()
	v1, v2, v3 := version.MustParseSemantic("v1.99.1"), version.MustParseSemantic("v1.99.2"), version.MustParseSemantic("v1.99.3")

	// Missing a module the kubelet imports: refused, naming the chain.
	err := b.CheckServed(ctx, v2)
	if !errors.Is(err, ErrBadSource) {
		t.Fatalf("CheckServed(v1.99.2) = %v, want ErrBadSource (the kubelet imports k8s.io/x)", err)
	}
	for _, want := range []string{"kubelet needs", "k8s.io/x@v0.99.2", "cmd/kubelet → pkg/a → k8s.io/x/z", "KUBELET_SOURCE=release"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal does not say %q: %v", want, err)
		}
	}
	if _, err := b.Build(ctx, v2, "kubelet"); !errors.Is(err, ErrBadSource) {
		t.Errorf("Build(v1.99.2, kubelet) = %v, want ErrBadSource", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "module")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused version left %s behind (%v)", filepath.Join(cache, "module"), err)
	}
	// ...but the components that do not import it are accepted.
	if err := b.CheckServed(ctx, v2, "kube-controller-manager", "kubectl"); err != nil {
		t.Errorf("CheckServed(v1.99.2, kube-controller-manager, kubectl) = %v, want nil (neither imports k8s.io/x)", err)
	}

	// Missing only modules the kubelet does not import (k8s.io/y) or
	// imports only without providerless: accepted.
	if err := b.CheckServed(ctx, v1); err != nil {
		t.Fatalf("CheckServed(v1.99.1) = %v, want nil", err)
	}
	err = b.CheckServed(ctx, v1, "kube-controller-manager")
	if !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), "cmd/kube-controller-manager → k8s.io/y/p") {
		t.Errorf("CheckServed(v1.99.1, kube-controller-manager) = %v, want a refusal naming cmd/kube-controller-manager → k8s.io/y/p", err)
	}
	bins, err := b.Build(ctx, v1, "kubelet")
	if err != nil {
		t.Fatalf("Build(v1.99.1, kubelet) = %v", err)
	}
	kubelet := bins["kubelet"]
	if kubelet.BuildTags != "providerless" || kubelet.Source != "module:v1.99.1" || kubelet.SHA256 == "" {
		t.Errorf("kubelet = %+v, want a module:v1.99.1 binary built with providerless", kubelet)
	}
	dir := b.moduleDir(v1)
	stubs, err := readStubs(dir)
	if err != nil || len(stubs) != 2 || stubs["k8s.io/y"] == "" || stubs["k8s.io/legacy-cloud-providers"] == "" {
		t.Errorf("stubs recorded = %v, %v; want k8s.io/y and k8s.io/legacy-cloud-providers with the proxy's answers", stubs, err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"k8s.io/y => ./stub/y", "k8s.io/legacy-cloud-providers => ./stub/legacy-cloud-providers", "k8s.io/x => k8s.io/x v0.99.1"} {
		if !strings.Contains(string(gomod), want) {
			t.Errorf("wrapper go.mod lacks %q:\n%s", want, gomod)
		}
	}

	// Cached: no go command runs, and the tags come back from the sidecar.
	cached := &ModuleBuilder{CacheDir: cache, GoBinary: "/nonexistent/go"}
	bins, err = cached.Build(ctx, v1, "kubelet")
	if err != nil || bins["kubelet"] != kubelet {
		t.Errorf("cached Build(v1.99.1, kubelet) = %+v, %v; want %+v", bins["kubelet"], err, kubelet)
	}

	// Another component at the prepared version is checked against the
	// stubs: kube-controller-manager imports the stubbed k8s.io/y.
	_, err = b.Build(ctx, v1, "kube-controller-manager")
	if !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), "k8s.io/y@v0.99.1") || !strings.Contains(err.Error(), "cmd/kube-controller-manager → k8s.io/y/p") {
		t.Errorf("Build(v1.99.1, kube-controller-manager) = %v, want a refusal naming k8s.io/y and its chain", err)
	}
	// kubectl imports nothing stubbed: built at the prepared version.
	bins, err = b.Build(ctx, v1, "kubectl")
	if err != nil || bins["kubectl"].BuildTags != "" {
		t.Errorf("Build(v1.99.1, kubectl) = %+v, %v; want a plain build", bins["kubectl"], err)
	}

	// Everything served: a plain build, no stubs.
	bins, err = b.Build(ctx, v3, "kubelet")
	if err != nil || bins["kubelet"].BuildTags != "" {
		t.Errorf("Build(v1.99.3, kubelet) = %+v, %v; want a plain build", bins["kubelet"], err)
	}
	if stubs, err := readStubs(b.moduleDir(v3)); err != nil || len(stubs) != 0 {
		t.Errorf("v1.99.3 stubs = %v, %v; want none", stubs, err)
	}
}

// testWriter sends a logger's lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
