//go:build images

package binaries

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec" // the patched kubelet's --version
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/internal/testgate"
)

// The log line testdata/kubelet-log-message.diff rewrites in
// pkg/kubelet/kubelet.go of v1.37.2, and what it writes instead.
const (
	kubeletLogBefore = "Starting kubelet main sync loop"
	kubeletLogAfter  = "The kubelet starts its main sync loop (patched by skewtest)"
)

// TestPatchRealKubelet builds the real v1.37.2 kubelet with a one-line
// diff of pkg/kubelet (written by git diff in a checkout) through the
// shared cache, building the module build of v1.37.2 there first when it
// is not (a cold CI). The binary reports v1.37.2, holds the new log line and not the old, records
// the diff, and is a cache hit the second time; a diff that does not
// compile is ErrBadSource quoting the compiler. It removes the cache
// entries of its own diffs, before and after, so that every run builds.
func TestPatchRealKubelet(t *testing.T) {
	testgate.RequireTools(t, "git")
	cache := DefaultCacheDir()
	v := version.MustParseSemantic("v1.37.2")
	logger := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	mb := &ModuleBuilder{CacheDir: cache, Logger: logger}
	ctx := t.Context()
	// The unpatched module build first, from the cache when warm; cold
	// (CI on a fresh machine) it is built here, into the cache the suite
	// then takes its v1.37.2 kubelet from.
	if _, err := cachedModuleBinary(mb.BinaryPath(v, "kubelet")); err != nil {
		t.Logf("no module build of the v1.37.2 kubelet in %s (%v): building it", cache, err)
		if _, err := mb.Build(ctx, v, "kubelet"); err != nil {
			t.Fatalf("module build of the v1.37.2 kubelet: %v", err)
		}
	}
	module, err := cachedModuleBinary(mb.BinaryPath(v, "kubelet"))
	if err != nil {
		t.Fatalf("the v1.37.2 kubelet's module build is not in %s after building it: %v", cache, err)
	}
	diff, err := filepath.Abs(filepath.Join("testdata", "kubelet-log-message.diff"))
	if err != nil {
		t.Fatal(err)
	}
	broken, err := filepath.Abs(filepath.Join("testdata", "kubelet-does-not-compile.diff"))
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, p := range []string{diff, broken} {
		s, err := FileSHA256(p)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, s)
		own := filepath.Join(mb.patchVersionDir(v), s)
		if err := os.RemoveAll(own); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(own) })
	}
	r := &Resolver{CacheDir: cache, Module: mb, Logger: logger}

	start := time.Now()
	bin, err := r.Resolve(ctx, "kubelet", "patch:"+diff+"@v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("patched kubelet built in %s", time.Since(start).Round(time.Second))
	want := Binary{Component: "kubelet", Version: "v1.37.2", Source: "patch:kubelet-log-message.diff@v1.37.2", Path: mb.PatchBinaryPath(v, sums[0], "kubelet"),
		SHA256: bin.SHA256, BuildTags: module.BuildTags, PatchSHA256: sums[0], PatchFiles: "pkg/kubelet/kubelet.go"}
	if bin != want || bin.SHA256 == "" || bin.SHA256 == module.SHA256 {
		t.Errorf("patched kubelet = %+v\nwant %+v (and not the module build's sha256 %s)", bin, want, module.SHA256)
	}
	out, err := exec.CommandContext(ctx, bin.Path, "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "Kubernetes v1.37.2" {
		t.Errorf("%s --version = %q, %v; want Kubernetes v1.37.2", bin.Path, out, err)
	}
	patched, err := os.ReadFile(bin.Path)
	if err != nil {
		t.Fatal(err)
	}
	unpatched, err := os.ReadFile(module.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unpatched, []byte(kubeletLogBefore)) {
		t.Fatalf("the module build %s lacks %q: the diff's line is not what this test takes it for", module.Path, kubeletLogBefore)
	}
	if !bytes.Contains(patched, []byte(kubeletLogAfter)) || bytes.Contains(patched, []byte(kubeletLogBefore)) {
		t.Errorf("%s: holds the new line %v, the old one %v; want the new alone", bin.Path, bytes.Contains(patched, []byte(kubeletLogAfter)), bytes.Contains(patched, []byte(kubeletLogBefore)))
	}

	// A cache hit: no go command runs.
	cached := &Resolver{CacheDir: cache, Module: &ModuleBuilder{CacheDir: cache, GoBinary: "/nonexistent/go"}}
	if again, err := cached.Resolve(ctx, "kubelet", "patch:"+diff+"@v1.37.2"); err != nil || again != bin {
		t.Errorf("second resolve = %+v, %v; want the cached %+v", again, err, bin)
	}

	start = time.Now()
	_, err = r.Resolve(ctx, "kubelet", "patch:"+broken+"@v1.37.2")
	t.Logf("the diff that does not compile was refused in %s: %v", time.Since(start).Round(time.Second), err)
	if !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), "pkg/kubelet/kubelet.go:2673:") || !strings.Contains(err.Error(), "undefined: skewtestUndefinedMessage") {
		t.Errorf("a diff that does not compile: %v; want an ErrBadSource quoting the compiler on pkg/kubelet/kubelet.go:2673", err)
	}
	if _, err := os.Stat(filepath.Join(mb.patchVersionDir(v), sums[1])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the diff that does not compile left %s (%v)", filepath.Join(mb.patchVersionDir(v), sums[1]), err)
	}

	// The shared copy is pristine: the file both diffs touched is the
	// module cache's again, and no record of a patch being applied is left.
	pristine, err := mb.kubernetesSource(ctx, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	tree := patchTree{dir: mb.patchVersionDir(v), pristine: pristine}
	for _, f := range []string{"pkg/kubelet/kubelet.go"} {
		got, err1 := os.ReadFile(filepath.Join(tree.src(), f))
		want, err2 := os.ReadFile(filepath.Join(pristine, f))
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Errorf("%s in the source copy is not pristine (%v, %v)", f, err1, err2)
		}
	}
	if _, err := os.Stat(tree.recordPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is left (%v)", tree.recordPath(), err)
	}
}
