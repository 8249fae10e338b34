package binaries

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec" // git init, for a repository around the source copy
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/internal/statefile"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// The diffs below are written as git diff writes them in a kubernetes
// checkout, against the fake k8s.io/kubernetes of fakeKubernetesFiles.
const (
	// markerDiff makes the fake kubelet print a marker.
	markerDiff = `diff --git a/cmd/kubelet/main.go b/cmd/kubelet/main.go
index 1111111..2222222 100644
--- a/cmd/kubelet/main.go
+++ b/cmd/kubelet/main.go
@@ -2,4 +2,4 @@ package main
 
 import _ "k8s.io/kubernetes/pkg/a"
 
-func main() {}
+func main() { println("skewtest-patched-marker") }
`
	// newFileDiff adds a package in a new directory and changes pkg/a.
	newFileDiff = `diff --git a/pkg/a/a.go b/pkg/a/a.go
index 1111111..2222222 100644
--- a/pkg/a/a.go
+++ b/pkg/a/a.go
@@ -1,2 +1,2 @@
-// Package a is the kubelet's.
+// Package a is the kubelet's, patched.
 package a
diff --git a/pkg/b/new/b.go b/pkg/b/new/b.go
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/pkg/b/new/b.go
@@ -0,0 +1 @@
+package b
`
	// staleDiff's context is not the source's: its second hunk fails.
	staleDiff = `diff --git a/pkg/a/a.go b/pkg/a/a.go
index 1111111..2222222 100644
--- a/pkg/a/a.go
+++ b/pkg/a/a.go
@@ -1,2 +1,2 @@
-// Package a is the kubelet's.
+// Package a is the kubelet's, patched.
 package a
@@ -8,3 +8,3 @@ import (
 )
 
-var _ = fmt.Sprintf
+var _ = fmt.Sprintln
`
	// brokenDiff does not compile.
	brokenDiff = `diff --git a/cmd/kubelet/main.go b/cmd/kubelet/main.go
index 1111111..2222222 100644
--- a/cmd/kubelet/main.go
+++ b/cmd/kubelet/main.go
@@ -2,4 +2,4 @@ package main
 
 import _ "k8s.io/kubernetes/pkg/a"
 
-func main() {}
+func main() { skewtestUndefinedName() }
`
	// stagingDiff patches a staging module.
	stagingDiff = `diff --git a/staging/src/k8s.io/x/z/z.go b/staging/src/k8s.io/x/z/z.go
--- a/staging/src/k8s.io/x/z/z.go
+++ b/staging/src/k8s.io/x/z/z.go
@@ -1 +1 @@
-package z
+package z // patched
`
	// renameDiff renames a file and removes another.
	renameDiff = `diff --git a/pkg/a/a_windows.go b/pkg/a/a_win.go
similarity index 100%
rename from pkg/a/a_windows.go
rename to pkg/a/a_win.go
diff --git a/pkg/a/ignored.go b/pkg/a/ignored.go
deleted file mode 100644
index 1111111..0000000
--- a/pkg/a/ignored.go
+++ /dev/null
@@ -1,5 +0,0 @@
-//go:build ignore
-
-package main
-
-import _ "k8s.io/y/p"
`
)

// writeDiff writes a diff file in a directory of its own.
func writeDiff(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadPatch(t *testing.T) {
	testgate.RequireTools(t, "git")
	ctx := t.Context()
	for _, tc := range []struct {
		name, body string
		files      []string
		empty      bool
		wantErr    string
	}{
		{name: "a change", body: markerDiff, files: []string{"cmd/kubelet/main.go"}},
		{name: "a new file in a new directory", body: newFileDiff, files: []string{"pkg/a/a.go", "pkg/b/new/b.go"}},
		{name: "a rename and a deletion", body: renameDiff, files: []string{"pkg/a/a_win.go", "pkg/a/a_windows.go", "pkg/a/ignored.go"}},
		{name: "empty", body: "", empty: true},
		{name: "blank lines", body: "\n \n\t\n", empty: true},
		{name: "not a diff", body: "please apply my fix\n", wantErr: "is not a unified diff git apply can read (error: No valid patches in input"},
		{name: "a corrupt diff", body: strings.Replace(markerDiff, " import _", "import _", 1), wantErr: "is not a unified diff git apply can read (error: corrupt patch at line 7)"},
		{name: "a staging module", body: stagingDiff, wantErr: "it touches staging/src/k8s.io/x/z/z.go, a file of a staging module"},
		{name: "outside the source", body: strings.ReplaceAll(markerDiff, "cmd/kubelet/main.go", "../../etc/main.go"), wantErr: `it touches "../../etc/main.go", which is not a path inside the kubernetes source`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeDiff(t, "fix.diff", tc.body)
			d, err := readPatch(ctx, p)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), p) {
					t.Fatalf("readPatch = %v; want an ErrBadSource naming %s and saying %q", err, p, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.empty() != tc.empty || !reflect.DeepEqual(d.Files, tc.files) || d.SHA256 != sum(tc.body) || d.Path != p {
				t.Errorf("readPatch = %+v (empty %v); want files %q, empty %v, sha256 %s", d, d.empty(), tc.files, tc.empty, sum(tc.body))
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "nope.diff")
	if _, err := readPatch(ctx, missing); !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), missing+" does not exist") {
		t.Errorf("readPatch(missing) = %v; want an ErrBadSource saying %s does not exist", err, missing)
	}
	dir := t.TempDir()
	if _, err := readPatch(ctx, dir); !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), "is not a file") {
		t.Errorf("readPatch(dir) = %v; want an ErrBadSource saying it is not a file", err)
	}
}

// A user's git configuration and a repository around the directory git
// runs in change nothing: git apply patches that directory, as it would
// outside any repository.
func TestGitApplyIgnoresTheUsersGitAndRepositories(t *testing.T) {
	testgate.RequireTools(t, "git")
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	home := t.TempDir()
	// A configuration every git command that reads it dies of.
	writeTree(t, home, map[string]string{".gitconfig": "[apply\n\twhitespace = error-all\n"})
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	// Inside a repository's subdirectory, git apply would apply only what
	// lies under it, relative to the repository's root: here, nothing.
	src := filepath.Join(repo, "sub")
	writeTree(t, src, map[string]string{"pkg/a/a.go": "// Package a is the kubelet's.\npackage a\n"})
	// Trailing white space, applied as it is.
	diff := strings.Replace(newFileDiff, "+package b\n", "+package b \n", 1)
	d := &patchDiff{Path: "fix.diff", Data: []byte(diff)}
	if err := applyPatch(t.Context(), src, d, "v1.99.3", false); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"pkg/b/new/b.go": "package b \n", "pkg/a/a.go": "// Package a is the kubelet's, patched.\npackage a\n"} {
		if got, err := os.ReadFile(filepath.Join(src, file)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q: the diff applied in %s", file, got, err, want, src)
		}
	}
}

func TestApplyNamesTheHunkThatFails(t *testing.T) {
	testgate.RequireTools(t, "git")
	src := t.TempDir()
	writeTree(t, src, fakeKubernetesFiles)
	p := writeDiff(t, "stale.diff", staleDiff)
	d, err := readPatch(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	err = applyPatch(t.Context(), src, d, "v1.99.3", false)
	if !errors.Is(err, ErrBadSource) {
		t.Fatalf("applyPatch = %v; want ErrBadSource", err)
	}
	for _, want := range []string{p + " does not apply to k8s.io/kubernetes@v1.99.3", `hunk 2 of pkg/a/a.go, "@@ -8,3 +8,3 @@ import (" (line 9 of the diff)`, "error: patch failed: pkg/a/a.go:8", "make the diff against v1.99.3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	// All or nothing: the first hunk, which matches, is not applied.
	if got, _ := os.ReadFile(filepath.Join(src, "pkg/a/a.go")); string(got) != fakeKubernetesFiles["pkg/a/a.go"] {
		t.Errorf("a failed apply changed pkg/a/a.go:\n%s", got)
	}
}

// TestPatchTreeRepair: a build killed after it recorded the files and
// patched them leaves a copy that the next prepare puts back, new files
// and their new directories removed, the record last.
func TestPatchTreeRepair(t *testing.T) {
	pristine := t.TempDir()
	writeTree(t, pristine, fakeKubernetesFiles)
	moduleDir := t.TempDir()
	writeTree(t, moduleDir, map[string]string{"go.mod": "module skewtest.local/k8s\n", "go.sum": "", "tools.go": "package tools\n"})
	tree := patchTree{dir: t.TempDir(), pristine: pristine}
	if err := tree.prepare(moduleDir); err != nil {
		t.Fatal(err)
	}
	assertPristine(t, tree)
	gomod, err := os.ReadFile(filepath.Join(tree.module(), "go.mod"))
	if err != nil || !strings.Contains(string(gomod), "replace k8s.io/kubernetes => ../src\n") {
		t.Errorf("wrapper go.mod = %q, %v; want k8s.io/kubernetes replaced by ../src", gomod, err)
	}

	d := &patchDiff{SHA256: sum("x"), Files: []string{"cmd/kubelet/main.go", "pkg/a/ignored.go", "pkg/b/new/b.go"}}
	if err := tree.begin(d); err != nil {
		t.Fatal(err)
	}
	// What a killed build leaves: a changed file, a removed one, a new one
	// in new directories, and its own temporary directories.
	writeTree(t, tree.src(), map[string]string{"cmd/kubelet/main.go": "package main // patched\n", "pkg/b/new/b.go": "package b\n"})
	if err := os.Remove(filepath.Join(tree.src(), "pkg/a/ignored.go")); err != nil {
		t.Fatal(err)
	}
	for _, leftover := range []string{patchBuildPrefix + "1", patchModulePrefix + "2"} {
		if err := os.Mkdir(filepath.Join(tree.dir, leftover), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := tree.prepare(moduleDir); err != nil {
		t.Fatal(err)
	}
	assertPristine(t, tree)
	if _, err := os.Stat(tree.recordPath()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the record outlived the repair: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(tree.dir, "*-[12]")); len(left) > 0 {
		t.Errorf("prepare left %q", left)
	}

	// A record that is not JSON: the copy is made again.
	writeTree(t, tree.src(), map[string]string{"cmd/kubelet/main.go": "package main // patched\n"})
	if err := os.WriteFile(tree.recordPath(), []byte("{half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tree.prepare(moduleDir); err != nil {
		t.Fatal(err)
	}
	assertPristine(t, tree)
}

// assertPristine fails t unless the tree's source copy holds the same
// files with the same content as the module cache.
func assertPristine(t *testing.T, tree patchTree) {
	t.Helper()
	want, got := treeFiles(t, tree.pristine), treeFiles(t, tree.src())
	if !reflect.DeepEqual(want, got) {
		t.Errorf("the source copy %s is not pristine:\n got %q\nwant %q", tree.src(), sortedKeys(got), sortedKeys(want))
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s differs:\n%s", k, got[k])
			}
		}
	}
	var dirs []string
	filepath.WalkDir(tree.src(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			rel, _ := filepath.Rel(tree.src(), p)
			if _, err := os.Stat(filepath.Join(tree.pristine, rel)); err != nil {
				dirs = append(dirs, rel)
			}
		}
		return nil
	})
	if len(dirs) > 0 {
		t.Errorf("the source copy has directories the module lacks: %q", dirs)
	}
}

func treeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, rel := range cacheFiles(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.ToSlash(rel)] = string(b)
	}
	return files
}

// TestBuildPatched builds the fake kubelet with diffs through a fake
// module proxy: patched, cached by the diff's sha256 apart from the
// module build, the copy pristine after every build; a diff that does not
// apply or compile is ErrBadSource and caches nothing; an empty one builds
// the unpatched source.
func TestBuildPatched(t *testing.T) {
	testgate.RequireTools(t, "git")
	p := useFakeProxy(t)
	p.addFakeKubernetes("v1.99.3", "k8s.io/x", "k8s.io/xy", "k8s.io/y", "k8s.io/legacy-cloud-providers")
	cache := t.TempDir()
	var logs bytes.Buffer
	b := &ModuleBuilder{CacheDir: cache, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	r := &Resolver{CacheDir: cache, Module: b}
	ctx := t.Context()
	v := version.MustParseSemantic("v1.99.3")

	diff := writeDiff(t, "marker.diff", markerDiff)
	bin, err := r.Resolve(ctx, "kubelet", "patch:"+diff+"@v1.99.3")
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	want := Binary{Component: "kubelet", Version: "v1.99.3", Source: "patch:marker.diff@v1.99.3",
		Path: b.PatchBinaryPath(v, sum(markerDiff), "kubelet"), SHA256: bin.SHA256, PatchSHA256: sum(markerDiff), PatchFiles: "cmd/kubelet/main.go"}
	if bin != want || bin.SHA256 == "" {
		t.Errorf("patched kubelet = %+v\nwant %+v", bin, want)
	}
	if bin.Path != filepath.Join(cache, "patch", "v1.99.3", sum(markerDiff), "bin", "kubelet") || bin.Path == b.BinaryPath(v, "kubelet") {
		t.Errorf("patched kubelet at %s, want it under <cache>/patch/v1.99.3/<sha256>/, apart from the module build's %s", bin.Path, b.BinaryPath(v, "kubelet"))
	}
	if data, err := os.ReadFile(bin.Path); err != nil || !bytes.Contains(data, []byte("skewtest-patched-marker")) {
		t.Errorf("%s does not hold the patch's string (%v)", bin.Path, err)
	}
	if data, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(bin.Path)), "patch.diff")); err != nil || string(data) != markerDiff {
		t.Errorf("the diff is not kept beside its binary: %q, %v", data, err)
	}
	tree := patchTree{dir: b.patchVersionDir(v), pristine: fakeModuleDir(t, "k8s.io/kubernetes@v1.99.3")}
	assertPristine(t, tree)

	// Cached: no go command runs, and the patch's record comes back.
	cached := &Resolver{CacheDir: cache, Module: &ModuleBuilder{CacheDir: cache, GoBinary: "/nonexistent/go"}}
	if again, err := cached.Resolve(ctx, "kubelet", "patch:"+diff+"@v1.99.3"); err != nil || again != bin {
		t.Errorf("cached resolve = %+v, %v; want %+v", again, err, bin)
	}
	// The unpatched module build is neither taken for it nor it for that.
	if _, err := cachedModuleBinary(b.BinaryPath(v, "kubelet")); err == nil {
		t.Errorf("the patch source made a module build at %s", b.BinaryPath(v, "kubelet"))
	}

	// A diff that adds a file in a new directory: built, and put back.
	if _, err := r.Resolve(ctx, "kubelet", "patch:"+writeDiff(t, "new.diff", newFileDiff)+"@v1.99.3"); err != nil {
		t.Fatal(err)
	}
	assertPristine(t, tree)

	// Bad diffs: ErrBadSource, nothing cached, the copy pristine.
	before := cacheFiles(t, filepath.Join(cache, "patch"))
	for _, tc := range []struct{ name, body, want string }{
		{"stale.diff", staleDiff, `hunk 2 of pkg/a/a.go, "@@ -8,3 +8,3 @@ import ("`},
		{"broken.diff", brokenDiff, "cmd/kubelet/main.go:5:15: undefined: skewtestUndefinedName"},
	} {
		diff := writeDiff(t, tc.name, tc.body)
		_, err := r.Resolve(ctx, "kubelet", "patch:"+diff+"@v1.99.3")
		t.Logf("%s: %v", tc.name, err)
		if !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), diff) {
			t.Errorf("%s: %v; want an ErrBadSource naming %s and saying %q", tc.name, err, diff, tc.want)
		}
		assertPristine(t, tree)
		if after := cacheFiles(t, filepath.Join(cache, "patch")); !reflect.DeepEqual(after, before) {
			t.Errorf("%s: the cache went from %q to %q", tc.name, before, after)
		}
	}

	// A build that fails for another reason than the diff (here a go
	// command that notes what it sees and fails) is not the user's to fix:
	// not ErrBadSource. While it ran the copy was patched, and the record
	// of the touched files, written before, was there for the next build
	// to repair the copy had this one been killed.
	seen := t.TempDir()
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	goStub := filepath.Join(t.TempDir(), "go")
	writeScript(t, goStub, fmt.Sprintf("if [ \"$1\" = build ]; then cp %s %s/; cp %s %s/; echo 'write /tmp/go-build: no space left on device' >&2; exit 1; fi\nexec %s \"$@\"\n",
		tree.recordPath(), seen, filepath.Join(tree.src(), "cmd/kubelet/main.go"), seen, realGo), 0o755)
	stubbed := &Resolver{CacheDir: cache, Module: &ModuleBuilder{CacheDir: cache, GoBinary: goStub}}
	_, err = stubbed.Resolve(ctx, "kubelet", "patch:"+writeDiff(t, "broken.diff", brokenDiff)+"@v1.99.3")
	if err == nil || errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("a build that failed for want of disk: %v; want an error that is not ErrBadSource, with go's message", err)
	}
	var rec touchedRecord
	if err := statefile.Read(seen, touchedFile, &rec); err != nil || !reflect.DeepEqual(rec.Files, []string{"cmd/kubelet/main.go"}) {
		t.Errorf("while go build ran, the record was %+v (%v); want it listing cmd/kubelet/main.go", rec, err)
	}
	if src, err := os.ReadFile(filepath.Join(seen, "main.go")); err != nil || !strings.Contains(string(src), "skewtestUndefinedName") {
		t.Errorf("while go build ran, cmd/kubelet/main.go was %q (%v); want it patched", src, err)
	}
	assertPristine(t, tree)
	if after := cacheFiles(t, filepath.Join(cache, "patch")); !reflect.DeepEqual(after, before) {
		t.Errorf("a failed build: the cache went from %q to %q", before, after)
	}

	// Empty: the unpatched source, built the patched way, and said so.
	logs.Reset()
	empty, err := r.Resolve(ctx, "kubelet", "patch:"+writeDiff(t, "control.diff", "")+"@v1.99.3")
	if err != nil {
		t.Fatal(err)
	}
	if empty.PatchSHA256 != sum("") || empty.PatchFiles != "" || empty.Source != "patch:control.diff@v1.99.3" || empty.SHA256 == bin.SHA256 {
		t.Errorf("control = %+v; want the empty patch's sha256, no files, and not the patched binary", empty)
	}
	if !strings.Contains(logs.String(), "the patch is empty") {
		t.Errorf("the log does not say the patch is empty:\n%s", logs.String())
	}
	if data, err := os.ReadFile(empty.Path); err != nil || bytes.Contains(data, []byte("skewtest-patched-marker")) {
		t.Errorf("the control %s holds the patch's string (%v)", empty.Path, err)
	}
	assertPristine(t, tree)
}

// fakeModuleDir is a module's directory in this test's module cache.
func fakeModuleDir(t *testing.T, modAtVersion string) string {
	t.Helper()
	return filepath.Join(os.Getenv("GOMODCACHE"), filepath.FromSlash(modAtVersion))
}

// TestResolvePlanRefusesBadPatchesBeforeBuilding: a plan whose later
// entry is a missing file, not a diff, or a diff that does not apply, or
// names a version the proxy does not serve, is refused before the first
// entry is built.
func TestResolvePlanRefusesBadPatchesBeforeBuilding(t *testing.T) {
	testgate.RequireTools(t, "git")
	p := useFakeProxy(t)
	p.addFakeKubernetes("v1.99.3", "k8s.io/x", "k8s.io/xy", "k8s.io/y", "k8s.io/legacy-cloud-providers")
	good := writeDiff(t, "good.diff", markerDiff)
	for _, tc := range []struct{ name, spec, want string }{
		{"missing", "patch:" + filepath.Join(t.TempDir(), "gone.diff") + "@v1.99.3", "gone.diff does not exist"},
		{"not a diff", "patch:" + writeDiff(t, "notes.txt", "fix the reconciler\n") + "@v1.99.3", "notes.txt is not a unified diff"},
		{"does not apply", "patch:" + writeDiff(t, "stale.diff", staleDiff) + "@v1.99.3", `hunk 2 of pkg/a/a.go, "@@ -8,3 +8,3 @@ import ("`},
		{"unserved version", "patch:" + good + "@v1.99.4", "does not serve k8s.io/kubernetes@v1.99.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			r := &Resolver{CacheDir: cache, Module: &ModuleBuilder{CacheDir: cache}}
			_, err := r.ResolvePlan(t.Context(), "kubelet", []string{"patch:" + good + "@v1.99.3", tc.spec})
			t.Log(err)
			if !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), "plan entry 2") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ResolvePlan = %v; want an ErrBadSource for plan entry 2 saying %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(cache, "patch")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("something was built before the refusal: %v", err)
			}
		})
	}
}

// The cache key is the version and the diff's content: the same diff
// under two names is one binary, another diff or version another.
func TestPatchCacheKey(t *testing.T) {
	testgate.RequireTools(t, "git")
	ctx := context.Background()
	b := &ModuleBuilder{CacheDir: "/cache"}
	v1, v2 := version.MustParseSemantic("v1.37.2"), version.MustParseSemantic("v1.36.3")
	read := func(name, body string) *patchDiff {
		d, err := readPatch(ctx, writeDiff(t, name, body))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, sameAsA, other := read("a.diff", markerDiff), read("b.diff", markerDiff), read("a.diff", brokenDiff)
	key := func(v *version.Version, d *patchDiff) string { return b.PatchBinaryPath(v, d.SHA256, "kubelet") }
	if key(v1, a) != key(v1, sameAsA) {
		t.Errorf("one diff under two names: %s and %s", key(v1, a), key(v1, sameAsA))
	}
	if key(v1, a) == key(v1, other) || key(v1, a) == key(v2, a) {
		t.Errorf("another diff or version shares %s", key(v1, a))
	}
	if want := "/cache/patch/v1.37.2/" + sum(markerDiff) + "/bin/kubelet"; key(v1, a) != want {
		t.Errorf("key = %s, want %s", key(v1, a), want)
	}
	if key(v1, a) == b.BinaryPath(v1, "kubelet") || patchSource(a, v1) != "patch:a.diff@v1.37.2" {
		t.Errorf("a patch binary is %s at %s, like the module build's", patchSource(a, v1), key(v1, a))
	}
}
