package binaries

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// writeTree writes files (path relative to root → content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeKubernetesFiles is a small k8s.io/kubernetes: cmd/kubelet imports
// pkg/a, which imports the staging module k8s.io/x and, unless built with
// providerless, k8s.io/legacy-cloud-providers; k8s.io/x imports k8s.io/xy
// (a module whose path starts with another's). k8s.io/y is imported only
// by cmd/kube-controller-manager, by a test file, by a windows file and
// by a cgo file.
var fakeKubernetesFiles = map[string]string{
	"cmd/kubelet/main.go":                 "package main\n\nimport _ \"k8s.io/kubernetes/pkg/a\"\n\nfunc main() {}\n",
	"pkg/a/a.go":                          "// Package a is the kubelet's.\npackage a\n\nimport (\n\t\"fmt\"\n\n\t_ \"github.com/example/thirdparty\"\n\t_ \"k8s.io/x/z\"\n)\n\nvar _ = fmt.Sprint\n",
	"pkg/a/cloud.go":                      "//go:build !providerless\n\npackage a\n\nimport _ \"k8s.io/legacy-cloud-providers/aws\"\n",
	"pkg/a/a_test.go":                     "package a\n\nimport _ \"k8s.io/y/p\"\n",
	"pkg/a/a_windows.go":                  "package a\n\nimport _ \"k8s.io/y/p\"\n",
	"pkg/a/cgo.go":                        "package a\n\n// int f(void) { return 1; }\nimport \"C\"\n\nimport _ \"k8s.io/y/p\"\n",
	"pkg/a/ignored.go":                    "//go:build ignore\n\npackage main\n\nimport _ \"k8s.io/y/p\"\n",
	"cmd/kube-controller-manager/main.go": "package main\n\nimport _ \"k8s.io/y/p\"\n\nfunc main() {}\n",
}

var fakeStagingFiles = map[string]map[string]string{
	"k8s.io/x":                      {"go.mod": "module k8s.io/x\n\ngo 1.22\n", "z/z.go": "package z\n\nimport _ \"k8s.io/xy/q\"\n"},
	"k8s.io/xy":                     {"go.mod": "module k8s.io/xy\n\ngo 1.22\n", "q/q.go": "package q\n"},
	"k8s.io/y":                      {"go.mod": "module k8s.io/y\n\ngo 1.22\n", "p/p.go": "package p\n"},
	"k8s.io/legacy-cloud-providers": {"go.mod": "module k8s.io/legacy-cloud-providers\n\ngo 1.22\n", "aws/aws.go": "package aws\n"},
}

// fakeRoots writes the fake tree and maps its modules to their dirs, with
// the modules in missing mapped to "" (not served).
func fakeRoots(t *testing.T, missing ...string) moduleRoots {
	root := t.TempDir()
	writeTree(t, filepath.Join(root, "kubernetes"), fakeKubernetesFiles)
	roots := moduleRoots{"k8s.io/kubernetes": filepath.Join(root, "kubernetes")}
	for m, files := range fakeStagingFiles {
		dir := filepath.Join(root, strings.TrimPrefix(m, "k8s.io/"))
		writeTree(t, dir, files)
		roots[m] = dir
	}
	for _, m := range missing {
		roots[m] = ""
	}
	return roots
}

func TestClosureWalkFindsOnlyTheMissingModulesTheComponentImports(t *testing.T) {
	t.Parallel()
	im := newImporter(fakeRoots(t, "k8s.io/y", "k8s.io/legacy-cloud-providers"))
	c, err := im.walk("k8s.io/kubernetes/cmd/kubelet", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.MissingModules(), []string{"k8s.io/legacy-cloud-providers"}; !reflect.DeepEqual(got, want) {
		t.Errorf("missing modules without tags = %v, want %v (k8s.io/y is imported only by a test, a windows, a cgo and an ignored file, and by another component)", got, want)
	}
	if got, want := c.MissingPackages["k8s.io/legacy-cloud-providers"], []string{"k8s.io/legacy-cloud-providers/aws"}; !reflect.DeepEqual(got, want) {
		t.Errorf("packages of k8s.io/legacy-cloud-providers imported = %v, want %v", got, want)
	}
	if got, want := c.Chain(c.Missing["k8s.io/legacy-cloud-providers"]), []string{"k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/pkg/a", "k8s.io/legacy-cloud-providers/aws"}; !reflect.DeepEqual(got, want) {
		t.Errorf("chain = %v, want %v", got, want)
	}
	var walked []string
	for p := range c.Files {
		walked = append(walked, p)
	}
	wantWalked := []string{"k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/pkg/a", "k8s.io/x/z", "k8s.io/xy/q"}
	if got := sortedKeys(c.Files); !reflect.DeepEqual(got, wantWalked) {
		t.Errorf("walked %v, want %v (stdlib and third-party not walked; k8s.io/xy/q is k8s.io/xy's, not k8s.io/x's)", got, wantWalked)
	}

	pc, err := im.walk("k8s.io/kubernetes/cmd/kubelet", []string{providerlessTag})
	if err != nil {
		t.Fatal(err)
	}
	if len(pc.Missing) != 0 {
		t.Errorf("missing modules with providerless = %v, want none", pc.MissingModules())
	}
	d := diffClosures(c, pc)
	if len(d.OnlyA) != 0 || len(d.OnlyB) != 0 || !reflect.DeepEqual(d.Files, map[string][]string{"k8s.io/kubernetes/pkg/a": {"-cloud.go"}}) {
		t.Errorf("diff without/with providerless = %+v, want only pkg/a's cloud.go dropped", d)
	}

	kcm, err := im.walk("k8s.io/kubernetes/cmd/kube-controller-manager", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := kcm.MissingModules(); !reflect.DeepEqual(got, []string{"k8s.io/y"}) {
		t.Errorf("kube-controller-manager's missing modules = %v, want [k8s.io/y]", got)
	}
}

func TestJudgeBuildsWithProviderlessOnlyWhenThatKeepsTheMissingModulesOut(t *testing.T) {
	t.Parallel()
	im := newImporter(fakeRoots(t, "k8s.io/y", "k8s.io/legacy-cloud-providers"))
	vd, err := im.judge("kubelet")
	if err != nil {
		t.Fatal(err)
	}
	if !vd.Buildable() || !reflect.DeepEqual(vd.Tags, []string{"providerless"}) || !reflect.DeepEqual(vd.NeedsWithoutTags, []string{"k8s.io/legacy-cloud-providers"}) {
		t.Errorf("kubelet verdict = %+v, want buildable with providerless", vd)
	}
	if got := vd.String(); got != "buildable with providerless (without: k8s.io/legacy-cloud-providers)" {
		t.Errorf("String() = %q", got)
	}
	vd, err = im.judge("kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	if vd.Buildable() || vd.String() != "refused (k8s.io/y)" {
		t.Errorf("kube-controller-manager verdict = %+v (%s), want refused (k8s.io/y)", vd, vd)
	}

	// All served: a plain build.
	im = newImporter(fakeRoots(t))
	if vd, err := im.judge("kubelet"); err != nil || !vd.Buildable() || len(vd.Tags) != 0 || vd.String() != "buildable" {
		t.Errorf("kubelet verdict with everything served = %+v, %v; want buildable without tags", vd, err)
	}
}

func TestClosureWalkFailsOnAPackageItsModuleLacks(t *testing.T) {
	t.Parallel()
	roots := fakeRoots(t)
	if err := os.RemoveAll(filepath.Join(roots["k8s.io/x"], "z")); err != nil {
		t.Fatal(err)
	}
	_, err := newImporter(roots).walk("k8s.io/kubernetes/cmd/kubelet", nil)
	if err == nil || !strings.Contains(err.Error(), "k8s.io/x/z") || !strings.Contains(err.Error(), "cmd/kubelet → pkg/a → k8s.io/x/z") {
		t.Errorf("walk with k8s.io/x/z gone = %v, want an error naming it and its chain", err)
	}
}

func TestRefusalNamesTheComponentTheModuleAndAnImportChain(t *testing.T) {
	t.Parallel()
	roots := fakeRoots(t, "k8s.io/x")
	ms := &moduleSet{version: version.MustParseSemantic("v1.99.2"), kubeDir: roots["k8s.io/kubernetes"],
		served:  map[string]string{"k8s.io/xy": roots["k8s.io/xy"], "k8s.io/y": roots["k8s.io/y"], "k8s.io/legacy-cloud-providers": roots["k8s.io/legacy-cloud-providers"]},
		missing: map[string]string{"k8s.io/x": "k8s.io/x@v0.99.2: reading https://proxy.golang.org/k8s.io/x/@v/v0.99.2.info: 404 Not Found"}}
	verdicts, err := ms.judge([]string{"kubelet", "kube-controller-manager"})
	if err != nil {
		t.Fatal(err)
	}
	if !verdicts["kube-controller-manager"].Buildable() {
		t.Errorf("kube-controller-manager does not import k8s.io/x but was refused: %+v", verdicts["kube-controller-manager"])
	}
	vd := verdicts["kubelet"]
	if vd.Buildable() {
		t.Fatalf("kubelet imports the missing k8s.io/x but is buildable: %+v", vd)
	}
	msg := refusalText(ms, vd)
	t.Log(msg)
	for _, want := range []string{"kubelet needs", "even with -tags providerless", "k8s.io/x@v0.99.2", "cmd/kubelet → pkg/a → k8s.io/x/z", "404 Not Found"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal does not say %q: %s", want, msg)
		}
	}
}

func TestStubModuleIsAGoModNamingTheModule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rel, err := writeStub(dir, "k8s.io/sample-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	if rel != "./stub/sample-apiserver" {
		t.Errorf("stub dir = %q, want ./stub/sample-apiserver", rel)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "stub", "sample-apiserver"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "go.mod" {
		t.Errorf("stub holds %v, want only go.mod", entries)
	}
	data, err := os.ReadFile(filepath.Join(dir, "stub", "sample-apiserver", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var module, goLine string
	for _, l := range strings.Split(string(data), "\n") {
		if m, ok := strings.CutPrefix(l, "module "); ok {
			module = m
		}
		if g, ok := strings.CutPrefix(l, "go "); ok {
			goLine = g
		}
	}
	if module != "k8s.io/sample-apiserver" || goLine == "" {
		t.Errorf("stub go.mod has module %q and go %q, want module k8s.io/sample-apiserver and a go line:\n%s", module, goLine, data)
	}
}

func TestBuildRecordRoundTrips(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "kubelet")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeBuildRecord(bin, buildRecord{BuildTags: []string{"providerless"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := recordBinary(bin); err != nil {
		t.Fatal(err)
	}
	got, err := cachedModuleBinary(bin)
	if err != nil || got.BuildTags != "providerless" {
		t.Errorf("cachedModuleBinary = %+v, %v; want BuildTags providerless", got, err)
	}
	// A binary cached before build records existed was built without tags.
	if err := os.Remove(bin + ".build.json"); err != nil {
		t.Fatal(err)
	}
	if got, err := cachedModuleBinary(bin); err != nil || got.BuildTags != "" {
		t.Errorf("cachedModuleBinary without a record = %+v, %v; want no tags", got, err)
	}
	if err := os.WriteFile(bin+".build.json", []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cachedModuleBinary(bin); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Errorf("cachedModuleBinary with a damaged record = %v, want an error", err)
	}
}

// A kubelet that cannot be built has other sources; a control plane
// component is the cluster's, so the fix is another control plane.
func TestAlternatives(t *testing.T) {
	if got := alternatives("v1.27.16", "kubelet"); !strings.Contains(got, "KUBELET_SOURCE=release") || strings.Contains(got, "APISERVER") {
		t.Errorf("kubelet: %q", got)
	}
	if got := alternatives("v1.32.13", "kube-controller-manager"); !strings.Contains(got, "APISERVER=<version>") || strings.Contains(got, "KUBELETS") {
		t.Errorf("controller-manager: %q", got)
	}
}
