package binaries

import (
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The closure walk tells, without building, which staging modules of
// k8s.io/kubernetes a component's packages import. The Go module proxy does
// not serve every staging module of every release (k8s.io/sample-apiserver
// and k8s.io/legacy-cloud-providers are often missing), and no kubelet
// needs most of them: the build asks only for what the requested
// components import.
//
// The walk reads file headers with go/build for the platform the build
// makes (linux/amd64, cgo off, the build's tags), and follows imports only
// inside k8s.io/kubernetes and its staging modules; third-party modules and
// the standard library are not walked (none of them imports a Kubernetes
// staging module).

// providerlessTag drops the in-tree cloud providers (and with them
// k8s.io/legacy-cloud-providers) from a build.
const providerlessTag = "providerless"

// buildContext is the go/build context of a module build with tags.
func buildContext(tags []string) *build.Context {
	ctxt := build.Default
	ctxt.GOOS, ctxt.GOARCH = "linux", "amd64"
	ctxt.CgoEnabled = false
	ctxt.BuildTags = append([]string(nil), tags...)
	return &ctxt
}

// closure is the import closure of one main package, restricted to the
// modules of a moduleRoots.
type closure struct {
	Root string
	Tags []string
	// Files maps each walked package to its Go files for these tags.
	Files map[string][]string
	// parent is the importer through which the breadth-first walk first
	// reached a package (the root has none).
	parent map[string]string
	// Missing maps each missing module the closure imports to the first
	// package of it that the walk reached (so chain(Missing[m]) is a
	// shortest import chain to it).
	Missing map[string]string
	// MissingPackages maps each missing module to every package of it the
	// closure imports, sorted.
	MissingPackages map[string][]string
}

// Chain returns the import chain from the root to pkg.
func (c *closure) Chain(pkg string) []string {
	var chain []string
	for p := pkg; p != ""; p = c.parent[p] {
		chain = append(chain, p)
		if p == c.Root {
			break
		}
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain
}

// MissingModules returns the missing modules the closure needs, sorted.
func (c *closure) MissingModules() []string {
	return sortedKeys(c.Missing)
}

// moduleRoots maps module paths to their source dirs; a module mapped to ""
// is missing (the proxy does not serve it, so no source is at hand).
type moduleRoots map[string]string

// module returns the module of import path p and p's dir in it; ok is false
// when p is in none of the modules.
func (r moduleRoots) module(p string) (mod, dir string, ok bool) {
	for m, d := range r {
		if (p == m || strings.HasPrefix(p, m+"/")) && len(m) > len(mod) {
			mod, dir, ok = m, d, true
		}
	}
	if !ok || dir == "" {
		return mod, "", ok
	}
	return mod, filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(p, mod))), true
}

// importer walks closures, reading each package once per set of tags.
type importer struct {
	roots moduleRoots
	// imports caches each package's imports and files per tag set.
	cache map[string]*pkgHeader
}

type pkgHeader struct {
	imports, files []string
	err            error
}

func newImporter(roots moduleRoots) *importer {
	return &importer{roots: roots, cache: map[string]*pkgHeader{}}
}

func (im *importer) read(dir string, tags []string) *pkgHeader {
	key := strings.Join(tags, ",") + "\x00" + dir
	if h, ok := im.cache[key]; ok {
		return h
	}
	h := &pkgHeader{}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = fmt.Errorf("%s is not a directory", dir)
		}
		h.err = err
		im.cache[key] = h
		return h
	}
	// An error other than a missing dir (every file excluded for this
	// platform or these tags, say) is the build's to report; the walk
	// goes on with what was read.
	pkg, _ := buildContext(tags).ImportDir(dir, 0)
	if pkg != nil {
		h.imports, h.files = pkg.Imports, pkg.GoFiles
	}
	im.cache[key] = h
	return h
}

// walk returns the closure of root with tags.
func (im *importer) walk(root string, tags []string) (*closure, error) {
	c := &closure{Root: root, Tags: tags, Files: map[string][]string{}, parent: map[string]string{}, Missing: map[string]string{}, MissingPackages: map[string][]string{}}
	if _, _, ok := im.roots.module(root); !ok {
		return nil, fmt.Errorf("closure walk: %s is in none of the modules walked", root)
	}
	seen := map[string]bool{root: true}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		mod, dir, _ := im.roots.module(p)
		if dir == "" {
			if _, ok := c.Missing[mod]; !ok {
				c.Missing[mod] = p
			}
			c.MissingPackages[mod] = append(c.MissingPackages[mod], p)
			sort.Strings(c.MissingPackages[mod])
			continue
		}
		h := im.read(dir, tags)
		if h.err != nil {
			return nil, fmt.Errorf("closure walk of %s: package %s (%s) in module %s: %w", root, p, shortChain(c.Chain(p)), mod, h.err)
		}
		c.Files[p] = h.files
		for _, imp := range h.imports {
			if seen[imp] {
				continue
			}
			if _, _, ok := im.roots.module(imp); !ok {
				continue
			}
			seen[imp] = true
			c.parent[imp] = p
			queue = append(queue, imp)
		}
	}
	return c, nil
}

// closureDiff is how two closures of one root differ: packages only in a,
// only in b, and in both with different Go files.
type closureDiff struct {
	OnlyA, OnlyB []string
	// Files lists packages in both whose files differ, with the files
	// only in a (prefixed "-") and only in b (prefixed "+").
	Files map[string][]string
}

func diffClosures(a, b *closure) closureDiff {
	d := closureDiff{Files: map[string][]string{}}
	for p, fa := range a.Files {
		fb, ok := b.Files[p]
		if !ok {
			d.OnlyA = append(d.OnlyA, p)
			continue
		}
		if ch := diffStrings(fa, fb); len(ch) > 0 {
			d.Files[p] = ch
		}
	}
	for p := range b.Files {
		if _, ok := a.Files[p]; !ok {
			d.OnlyB = append(d.OnlyB, p)
		}
	}
	sort.Strings(d.OnlyA)
	sort.Strings(d.OnlyB)
	return d
}

func diffStrings(a, b []string) []string {
	in := func(s []string, x string) bool {
		for _, y := range s {
			if y == x {
				return true
			}
		}
		return false
	}
	var out []string
	for _, x := range a {
		if !in(b, x) {
			out = append(out, "-"+x)
		}
	}
	for _, x := range b {
		if !in(a, x) {
			out = append(out, "+"+x)
		}
	}
	sort.Strings(out)
	return out
}

// componentVerdict is whether one component can be built from a module set.
type componentVerdict struct {
	Component string
	// Tags are the build tags the component needs ([providerless] when
	// only that tag keeps a missing module out).
	Tags []string
	// Refusal is set when the component needs a missing module even with
	// -tags providerless: one line per module, with an import chain.
	Refusal []string
	// NeedsWithoutTags lists the missing modules the default build (no
	// tags) would need.
	NeedsWithoutTags []string
}

// Buildable says whether the component can be built.
func (v componentVerdict) Buildable() bool { return len(v.Refusal) == 0 }

// String is "buildable", "buildable with providerless" or "refused (...)".
func (v componentVerdict) String() string {
	switch {
	case !v.Buildable():
		return "refused (" + strings.Join(v.refusedModules(), ", ") + ")"
	case len(v.Tags) > 0:
		return "buildable with " + strings.Join(v.Tags, ",") + " (without: " + strings.Join(v.NeedsWithoutTags, ", ") + ")"
	}
	return "buildable"
}

func (v componentVerdict) refusedModules() []string {
	var mods []string
	for _, r := range v.Refusal {
		mods = append(mods, strings.SplitN(r, " ", 2)[0])
	}
	return mods
}

// judge decides how component can be built: with no tags if its closure
// needs no missing module, with -tags providerless if that keeps every
// missing module out, else not at all.
func (im *importer) judge(component string) (componentVerdict, error) {
	v := componentVerdict{Component: component}
	root := "k8s.io/kubernetes/cmd/" + component
	c, err := im.walk(root, nil)
	if err != nil {
		return v, err
	}
	if len(c.Missing) == 0 {
		return v, nil
	}
	v.NeedsWithoutTags = c.MissingModules()
	pc, err := im.walk(root, []string{providerlessTag})
	if err != nil {
		return v, err
	}
	if len(pc.Missing) == 0 {
		v.Tags = []string{providerlessTag}
		return v, nil
	}
	for _, m := range pc.MissingModules() {
		v.Refusal = append(v.Refusal, m+" ("+shortChain(pc.Chain(pc.Missing[m]))+")")
	}
	return v, nil
}

// shortChain joins an import chain with arrows, writing packages of
// k8s.io/kubernetes relative to it (cmd/kubelet, pkg/...).
func shortChain(chain []string) string {
	out := make([]string, len(chain))
	for i, p := range chain {
		out[i] = strings.TrimPrefix(p, "k8s.io/kubernetes/")
	}
	return strings.Join(out, " → ")
}

// stubGoMod is the go.mod of a stub module: a module with no packages that
// stands in for a staging module the proxy does not serve, so that the
// module graph of k8s.io/kubernetes resolves. A build that imports a
// package from it fails, which the closure check refuses up front.
func stubGoMod(module string) []byte {
	return []byte(fmt.Sprintf("// Generated by skewtest: a stand-in for %s, which the Go module proxy does not serve\n// at this version and which no component built here imports.\nmodule %s\n\ngo 1.20\n", module, module))
}

// writeStub writes the stub module of module under dir/stub and returns its
// dir relative to dir (for a replace directive).
func writeStub(dir, module string) (string, error) {
	rel := "stub/" + strings.TrimPrefix(module, "k8s.io/")
	full := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(full, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(full, "go.mod"), stubGoMod(module), 0o644); err != nil {
		return "", err
	}
	return "./" + rel, nil
}
