package binaries

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec" // the Go toolchain on this host, building kubelets from modules
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/internal/lines"
)

// Components the module build knows how to build; each is a main package
// under k8s.io/kubernetes/cmd.
var moduleComponents = map[string]bool{
	"kubelet":                 true,
	"kube-apiserver":          true,
	"kube-controller-manager": true,
	"kube-scheduler":          true,
	"kubectl":                 true,
	"kubeadm":                 true,
	"kube-proxy":              true,
}

// ModuleBuilder builds Kubernetes components from the k8s.io/kubernetes Go
// module at a release version, so that no download site is needed: only the
// Go module proxy. The build goes through a generated wrapper module because
// k8s.io/kubernetes replaces its staging modules with relative paths, which
// only work inside its own repository.
type ModuleBuilder struct {
	// CacheDir is the skewtest cache root (see DefaultCacheDir).
	CacheDir string
	// Logger receives progress; long builds log every 30 s.
	Logger *slog.Logger
	// GoBinary is the go command; "go" when empty.
	GoBinary string
}

// moduleDir is the wrapper module and bin dir for one version.
func (b *ModuleBuilder) moduleDir(v *version.Version) string {
	return filepath.Join(b.CacheDir, "module", "v"+v.String())
}

// BinaryPath is where Build puts component at version v.
func (b *ModuleBuilder) BinaryPath(v *version.Version, component string) string {
	return filepath.Join(b.moduleDir(v), "bin", component)
}

// Build makes sure every component exists at version v and returns them. A
// warm cache is a no-op: a binary is reused when its recorded sha256 matches.
//
// Before anything is built, each component not cached is checked against
// the staging modules the Go module proxy does not serve (see CheckServed):
// one that imports such a module is refused (ErrBadSource) in seconds; one
// that imports it only from files that -tags providerless leaves out (the
// in-tree cloud providers) is built with that tag, which its
// Binary.BuildTags records. Staging modules no requested component imports
// are stubbed in the wrapper module (see prepareModule).
func (b *ModuleBuilder) Build(ctx context.Context, v *version.Version, components ...string) (map[string]Binary, error) {
	if err := checkModuleVersion(v); err != nil {
		return nil, err
	}
	out := map[string]Binary{}
	var missing []string
	for _, c := range components {
		if !moduleComponents[c] {
			return nil, fmt.Errorf("module build: unknown component %q (known: %s)", c, strings.Join(sortedKeys(moduleComponents), ", "))
		}
		bin, err := cachedModuleBinary(b.BinaryPath(v, c))
		if err != nil {
			missing = append(missing, c)
			continue
		}
		bin.Component, bin.Version, bin.Source = c, "v"+v.String(), "module:v"+v.String()
		out[c] = bin
	}
	if len(missing) == 0 {
		return out, nil
	}
	// The check writes nothing in the cache: a refused version leaves
	// no module dir behind.
	ms, verdicts, err := b.check(ctx, v, missing)
	if err != nil {
		return nil, err
	}
	dir := b.moduleDir(v)
	unlock, err := b.lockBuildDir(ctx, dir, "k8s.io/kubernetes@v"+v.String())
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another process may have built some while this one waited.
	var still []string
	for _, c := range missing {
		if bin, err := cachedModuleBinary(b.BinaryPath(v, c)); err == nil {
			bin.Component, bin.Version, bin.Source = c, "v"+v.String(), "module:v"+v.String()
			out[c] = bin
			continue
		}
		still = append(still, c)
	}
	if missing = still; len(missing) == 0 {
		return out, nil
	}
	if err := b.prepareModule(ctx, v, ms); err != nil {
		return nil, err
	}
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, err
	}
	// One go build per set of tags: most builds are one.
	groups := map[string][]string{}
	for _, c := range missing {
		vd := verdicts[c]
		if len(vd.Tags) > 0 {
			b.logger().Info("building with -tags "+strings.Join(vd.Tags, ",")+": without it the component imports staging modules the Go module proxy does not serve",
				"version", "v"+v.String(), "component", c, "modules", strings.Join(vd.NeedsWithoutTags, ","))
		}
		key := strings.Join(vd.Tags, ",")
		groups[key] = append(groups[key], c)
	}
	for _, key := range sortedKeys(groups) {
		var tags []string
		if key != "" {
			tags = strings.Split(key, ",")
		}
		built, err := b.buildGroup(ctx, v, groups[key], tags)
		if err != nil {
			return nil, err
		}
		for c, bin := range built {
			out[c] = bin
		}
	}
	return out, nil
}

// buildGroup builds components with tags in one go build.
func (b *ModuleBuilder) buildGroup(ctx context.Context, v *version.Version, components, tags []string) (map[string]Binary, error) {
	dir := b.moduleDir(v)
	logger := b.logger()
	// Build into a temporary dir and rename, so an interrupted build never
	// leaves a half-written binary that a later run would trust.
	tmp, err := os.MkdirTemp(dir, buildTmpPrefix)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	args := buildArgs(v, tags, tmp, components)
	what := "go build " + strings.Join(components, ",")
	if len(tags) > 0 {
		what += " -tags " + strings.Join(tags, ",")
	}
	logger.Info("building Kubernetes components from the Go module (cold: about 6 min for the kubelet on 2 cores)",
		"version", "v"+v.String(), "components", strings.Join(components, ","), "tags", strings.Join(tags, ","))
	start := time.Now()
	if err := b.goCmd(ctx, dir, what, args...); err != nil {
		return nil, fmt.Errorf("build %s v%s from the k8s.io/kubernetes module: %w", strings.Join(components, ","), v, err)
	}
	out := map[string]Binary{}
	for _, c := range components {
		final := b.BinaryPath(v, c)
		if err := os.Rename(filepath.Join(tmp, c), final); err != nil {
			return nil, fmt.Errorf("install %s: %w", c, err)
		}
		// The build record goes before the sha256 sidecar, which is what
		// makes the binary count as cached.
		if err := writeBuildRecord(final, buildRecord{BuildTags: tags}); err != nil {
			return nil, err
		}
		bin, err := recordBinary(final)
		if err != nil {
			return nil, err
		}
		bin.Component, bin.Version, bin.Source = c, "v"+v.String(), "module:v"+v.String()
		bin.BuildTags = strings.Join(tags, ",")
		out[c] = bin
	}
	logger.Info("built", "version", "v"+v.String(), "components", strings.Join(components, ","), "tags", strings.Join(tags, ","), "took", time.Since(start).Round(time.Second))
	return out, nil
}

// buildArgs are the arguments of the go build that puts components at
// version v into outDir: the module build's, and the patch source's, whose
// binaries must report v as module builds do.
func buildArgs(v *version.Version, tags []string, outDir string, components []string) []string {
	args := []string{"build", "-trimpath", "-ldflags", ldflags(v)}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, "-o", outDir+"/")
	for _, c := range components {
		args = append(args, "k8s.io/kubernetes/cmd/"+c)
	}
	return args
}

// buildRecord is the sidecar <binary>.build.json of a module-built binary:
// how it was built, beyond its version.
type buildRecord struct {
	BuildTags []string `json:"buildTags,omitempty"`
	// PatchSHA256 and PatchFiles describe the diff a patch: build applied
	// (see Binary); a module build has neither.
	PatchSHA256 string   `json:"patchSHA256,omitempty"`
	PatchFiles  []string `json:"patchFiles,omitempty"`
}

func writeBuildRecord(bin string, r buildRecord) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(bin+".build.json", append(data, '\n'), 0o644)
}

// cachedModuleBinary is cachedBinary with the build record read back; a
// binary built before build records existed had no tags.
func cachedModuleBinary(path string) (Binary, error) {
	bin, err := cachedBinary(path)
	if err != nil {
		return Binary{}, err
	}
	data, err := os.ReadFile(path + ".build.json")
	if errors.Is(err, os.ErrNotExist) {
		return bin, nil
	}
	if err != nil {
		return Binary{}, err
	}
	var r buildRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return Binary{}, fmt.Errorf("%s.build.json: %w", path, err)
	}
	bin.BuildTags = strings.Join(r.BuildTags, ",")
	bin.PatchSHA256, bin.PatchFiles = r.PatchSHA256, strings.Join(r.PatchFiles, ",")
	return bin, nil
}

// stubsFile, in a version's module dir, lists the staging modules replaced
// with stubs (see stubGoMod). It is written before go.sum, whose presence
// marks the module dir as prepared; a dir prepared before stubs existed has
// none.
const stubsFile = "stubs.json"

type stubRecord struct {
	Version string `json:"version"`
	// Stubs maps each stubbed module to the proxy's answer for it.
	Stubs map[string]string `json:"stubs"`
}

func readStubs(dir string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, stubsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r stubRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stubsFile), err)
	}
	return r.Stubs, nil
}

func (b *ModuleBuilder) prepared(v *version.Version) bool {
	_, err := os.Stat(filepath.Join(b.moduleDir(v), "go.sum"))
	return err == nil
}

// prepareModule writes the wrapper module (go.mod, tools.go, the stubs of
// the staging modules ms lacks) and tidies it. ms is nil when the module is
// prepared already.
func (b *ModuleBuilder) prepareModule(ctx context.Context, v *version.Version, ms *moduleSet) error {
	dir := b.moduleDir(v)
	if b.prepared(v) {
		return nil
	}
	if ms == nil {
		return fmt.Errorf("module build of v%s: the module dir %s is not prepared and no module set was resolved", v, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kv := "v" + v.String()
	var gomod bytes.Buffer
	fmt.Fprintf(&gomod, "// Generated by skewtest to build Kubernetes %s from its Go module.\nmodule skewtest.local/k8s\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", kv, kv)
	for _, m := range ms.staging {
		if _, stub := ms.missing[m]; stub {
			rel, err := writeStub(dir, m)
			if err != nil {
				return err
			}
			fmt.Fprintf(&gomod, "\t%s => %s // not served by the Go module proxy at v0.%d.%d\n", m, rel, v.Minor(), v.Patch())
			continue
		}
		fmt.Fprintf(&gomod, "\t%s => %s v0.%d.%d\n", m, m, v.Minor(), v.Patch())
	}
	gomod.WriteString(")\n")
	// tools.go imports every component so that one tidy serves them all;
	// `go mod tidy -e` gets past the packages of stubbed modules (the
	// components that import them are refused before any build).
	var tools bytes.Buffer
	tools.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, c := range sortedKeys(moduleComponents) {
		fmt.Fprintf(&tools, "\t_ \"k8s.io/kubernetes/cmd/%s\"\n", c)
	}
	tools.WriteString(")\n")
	rec, err := json.MarshalIndent(stubRecord{Version: kv, Stubs: ms.missing}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, stubsFile), append(rec, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), gomod.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.go"), tools.Bytes(), 0o644); err != nil {
		return err
	}
	if len(ms.missing) > 0 {
		b.logger().Info("staging modules the Go module proxy does not serve are stubbed (no component built here imports them)",
			"version", kv, "stubs", strings.Join(sortedKeys(ms.missing), ","))
	}
	b.logger().Info("resolving the k8s.io/kubernetes module graph (about 1 min cold)", "version", kv)
	if err := b.goCmd(ctx, dir, "go mod tidy", "mod", "tidy", "-e"); err != nil {
		os.Remove(filepath.Join(dir, "go.sum"))
		return fmt.Errorf("resolve modules for k8s.io/kubernetes@%s: %w", kv, err)
	}
	return nil
}

// CheckServed makes sure the Go module proxy serves k8s.io/kubernetes at v
// and every staging module that the given components import (the kubelet
// when none is given), so that a version the proxy cannot build is refused
// in seconds instead of failing after minutes of building. Staging modules
// no given component imports need not be served: the build stubs them. A
// version prepared before without stubs is not asked about again; one with
// stubs is checked against them. The error wraps ErrBadSource when the
// proxy answered that it does not have a module the components need (the
// user must pick another source for that version).
func (b *ModuleBuilder) CheckServed(ctx context.Context, v *version.Version, components ...string) error {
	if err := checkModuleVersion(v); err != nil {
		return err
	}
	if len(components) == 0 {
		components = []string{"kubelet"}
	}
	for _, c := range components {
		if !moduleComponents[c] {
			return fmt.Errorf("module build: unknown component %q (known: %s)", c, strings.Join(sortedKeys(moduleComponents), ", "))
		}
	}
	_, _, err := b.check(ctx, v, components)
	return err
}

func checkModuleVersion(v *version.Version) error {
	if v == nil || v.PreRelease() != "" || v.BuildMetadata() != "" {
		return badSource("module build of %v: only release versions such as v1.37.2 can be built from the k8s.io/kubernetes module", v)
	}
	return nil
}

// notServedRE matches the module proxy's (or the checksum database's)
// answer that it does not have a module version, as opposed to a network
// failure; a GOPROXY=file:// mirror answers with a file that is not there.
var notServedRE = regexp.MustCompile(`\b(403 Forbidden|404 Not Found|410 Gone)\b|unknown revision|invalid version|not available|reading file://\S+: no such file or directory`)

// moduleDownload is one object of `go mod download -json`.
type moduleDownload struct {
	Path, Version, GoMod, Dir, Error string
}

// download runs `go mod download -json` for mods, outside any module.
func (b *ModuleBuilder) download(ctx context.Context, mods ...string) ([]moduleDownload, error) {
	out, err := b.goOutput(ctx, os.TempDir(), append([]string{"go", "mod", "download", "-json"}, mods...)...)
	var got []moduleDownload
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var d moduleDownload
		if derr := dec.Decode(&d); derr != nil {
			break
		}
		got = append(got, d)
	}
	if len(got) == 0 && err != nil {
		return nil, fmt.Errorf("go mod download %s: %w", strings.Join(mods, " "), err)
	}
	return got, nil
}

// moduleSet is what the module proxy has of one Kubernetes version.
type moduleSet struct {
	version *version.Version
	// kubeDir is the source of k8s.io/kubernetes@v in the module cache.
	kubeDir string
	// staging lists the modules k8s.io/kubernetes replaces with its staging
	// dirs; the wrapper module replaces each of them.
	staging []string
	// served maps each staging module that k8s.io/kubernetes requires and
	// the proxy serves at v0.MINOR.PATCH to its source dir.
	served map[string]string
	// missing maps each one the proxy does not serve (or that the prepared
	// module dir stubs) to the proxy's answer.
	missing map[string]string
}

func (ms *moduleSet) stagingVersion() string {
	return fmt.Sprintf("v0.%d.%d", ms.version.Minor(), ms.version.Patch())
}

func (ms *moduleSet) roots() moduleRoots {
	r := moduleRoots{"k8s.io/kubernetes": ms.kubeDir}
	for m, d := range ms.served {
		r[m] = d
	}
	for m := range ms.missing {
		r[m] = ""
	}
	return r
}

// alternatives says what to do instead of building components at kv: a
// kubelet has other sources; a control plane component is the cluster's
// (APISERVER, or the plan's newest), so another version of it is the fix.
func alternatives(kv string, components ...string) string {
	kubelet := "use another source for " + kv + ": KUBELET_SOURCE=release (dl.k8s.io), or in KUBELETS release:" + kv + ", file:/path/to/kubelet or checkout:/path/to/kubernetes"
	for _, c := range components {
		if c != "kubelet" {
			return "run the plan under a control plane that builds: APISERVER=<version> (docs/history.md lists which do)"
		}
	}
	return kubelet
}

// check decides, without building, how each component can be built at v:
// the module set (nil when the module dir is prepared and has no stubs) and
// each component's verdict. It refuses (ErrBadSource) when a component
// imports a staging module the proxy does not serve, even with -tags
// providerless, naming the module and an import chain that reaches it.
func (b *ModuleBuilder) check(ctx context.Context, v *version.Version, components []string) (*moduleSet, map[string]componentVerdict, error) {
	verdicts := map[string]componentVerdict{}
	var stubs map[string]string
	if b.prepared(v) {
		var err error
		if stubs, err = readStubs(b.moduleDir(v)); err != nil {
			return nil, nil, err
		}
		if len(stubs) == 0 {
			for _, c := range components {
				verdicts[c] = componentVerdict{Component: c}
			}
			return nil, verdicts, nil
		}
	}
	ms, err := b.resolveModules(ctx, v, stubs)
	if err != nil {
		return nil, nil, err
	}
	verdicts, err = ms.judge(components)
	if err != nil {
		return nil, nil, err
	}
	var refusals, refused []string
	for _, c := range components {
		vd := verdicts[c]
		if vd.Buildable() {
			continue
		}
		refusals = append(refusals, refusalText(ms, vd))
		refused = append(refused, c)
	}
	if len(refusals) > 0 {
		kv := "v" + v.String()
		return nil, nil, badSource("Kubernetes %s cannot be built from the k8s.io/kubernetes module here: %s; %s", kv, strings.Join(refusals, "; "), alternatives(kv, refused...))
	}
	if b.prepared(v) {
		ms = nil
	}
	return ms, verdicts, nil
}

// refusalText says which missing modules a component imports and how.
func refusalText(ms *moduleSet, vd componentVerdict) string {
	sv := ms.stagingVersion()
	var mods []string
	for _, r := range vd.Refusal {
		m, chain, _ := strings.Cut(r, " ")
		mods = append(mods, fmt.Sprintf("%s@%s, which it imports %s", m, sv, chain))
	}
	first := ""
	if m := vd.refusedModules(); len(m) > 0 {
		first = oneLineTrim(ms.missing[m[0]], 300)
	}
	return fmt.Sprintf("%s needs, even with -tags %s, staging modules the Go module proxy does not serve: %s (the proxy's answer for the first: %s)",
		vd.Component, providerlessTag, strings.Join(mods, "; "), first)
}

func oneLineTrim(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// judge walks each component's import closure over ms.
func (ms *moduleSet) judge(components []string) (map[string]componentVerdict, error) {
	verdicts := map[string]componentVerdict{}
	if len(ms.missing) == 0 {
		for _, c := range components {
			verdicts[c] = componentVerdict{Component: c}
		}
		return verdicts, nil
	}
	im := newImporter(ms.roots())
	for _, c := range components {
		vd, err := im.judge(c)
		if err != nil {
			return nil, fmt.Errorf("Kubernetes v%s: %w", ms.version, err)
		}
		verdicts[c] = vd
	}
	return verdicts, nil
}

// resolveModules asks the module proxy for k8s.io/kubernetes@v and the
// staging modules it requires at v0.MINOR.PATCH (downloading them into the
// module cache, where the closure walk reads them). stubs, when not nil,
// are the modules a prepared module dir stubs: they are not asked about
// again and count as missing.
func (b *ModuleBuilder) resolveModules(ctx context.Context, v *version.Version, stubs map[string]string) (*moduleSet, error) {
	kv := "v" + v.String()
	got, err := b.download(ctx, "k8s.io/kubernetes@"+kv)
	if err != nil {
		return nil, fmt.Errorf("fetch k8s.io/kubernetes@%s from the Go module proxy: %w", kv, err)
	}
	if len(got) != 1 || got[0].Error != "" {
		msg := "no answer"
		if len(got) == 1 {
			msg = strings.TrimSpace(got[0].Error)
		}
		if notServedRE.MatchString(msg) {
			return nil, badSource("the Go module proxy does not serve k8s.io/kubernetes@%s (is %s a released Kubernetes version?): %s; %s", kv, kv, msg, alternatives(kv))
		}
		return nil, fmt.Errorf("fetch k8s.io/kubernetes@%s from the Go module proxy: %s", kv, msg)
	}
	modText, err := os.ReadFile(got[0].GoMod)
	if err != nil {
		return nil, err
	}
	ms := &moduleSet{version: v, kubeDir: got[0].Dir, served: map[string]string{}, missing: map[string]string{}}
	if ms.kubeDir == "" {
		return nil, fmt.Errorf("go mod download k8s.io/kubernetes@%s gave no source dir", kv)
	}
	ms.staging = stagingModules(modText)
	if len(ms.staging) == 0 {
		return nil, fmt.Errorf("k8s.io/kubernetes@%s: its go.mod has no staging replacements; cannot build it as a module", kv)
	}
	// The build needs at most the staging modules k8s.io/kubernetes
	// requires (the others, such as sample-cli-plugin, are only replaced).
	sv := ms.stagingVersion()
	var mods []string
	for _, m := range requiredStaging(modText, ms.staging) {
		if why, ok := stubs[m]; ok {
			ms.missing[m] = why
			continue
		}
		mods = append(mods, m+"@"+sv)
	}
	if len(mods) == 0 {
		return ms, nil
	}
	got, err = b.download(ctx, mods...)
	if err != nil {
		return nil, fmt.Errorf("fetch the staging modules of k8s.io/kubernetes@%s from the Go module proxy: %w", kv, err)
	}
	var failed []string
	for _, d := range got {
		switch {
		case d.Error == "" && d.Dir != "":
			ms.served[d.Path] = d.Dir
		case d.Error == "":
			failed = append(failed, d.Path+"@"+d.Version+": no source dir")
		case notServedRE.MatchString(d.Error):
			ms.missing[d.Path] = strings.TrimSpace(d.Error)
		default:
			failed = append(failed, strings.TrimSpace(d.Error))
		}
	}
	if len(failed) > 0 {
		return nil, fmt.Errorf("fetch the staging modules of k8s.io/kubernetes@%s from the Go module proxy: %s", kv, strings.Join(failed, "; "))
	}
	if len(ms.served)+len(ms.missing) != len(requiredStaging(modText, ms.staging)) {
		return nil, fmt.Errorf("fetch the staging modules of k8s.io/kubernetes@%s from the Go module proxy: go mod download answered for %d of %d", kv, len(got), len(mods))
	}
	return ms, nil
}

// requiredStaging returns the staging modules gomod requires, in the order
// of staging.
func requiredStaging(gomod []byte, staging []string) []string {
	required := map[string]bool{}
	for _, m := range requireRE.FindAllSubmatch(gomod, -1) {
		required[string(m[1])] = true
	}
	var out []string
	for _, m := range staging {
		if required[m] {
			out = append(out, m)
		}
	}
	return out
}

// requireRE matches a require line of a staging module, which
// k8s.io/kubernetes pins at v0.0.0 and replaces.
var requireRE = regexp.MustCompile(`(?m)^\s*(?:require\s+)?(k8s\.io/[A-Za-z0-9._-]+)\s+v0\.0\.0\b`)

var stagingRE = regexp.MustCompile(`(?m)^\s*(k8s\.io/[A-Za-z0-9._-]+)\s+=>\s+\./staging/src/`)

// stagingModules returns the modules k8s.io/kubernetes replaces with its
// staging directories.
func stagingModules(gomod []byte) []string {
	var mods []string
	for _, m := range stagingRE.FindAllSubmatch(gomod, -1) {
		mods = append(mods, string(m[1]))
	}
	sort.Strings(mods)
	return mods
}

// ldflags stamps the version the way hack/lib/version.sh does, so that
// `kubelet --version` and node.status.nodeInfo.kubeletVersion report it.
func ldflags(v *version.Version) string {
	vals := map[string]string{
		"gitVersion":   "v" + v.String(),
		"gitMajor":     fmt.Sprint(v.Major()),
		"gitMinor":     fmt.Sprint(v.Minor()),
		"gitTreeState": "clean",
		// Fixed so that rebuilding gives the same bytes.
		"buildDate": "1970-01-01T00:00:00Z",
	}
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		for _, k := range sortedKeys(vals) {
			flags = append(flags, fmt.Sprintf("-X %s.%s=%s", pkg, k, vals[k]))
		}
	}
	return "-s -w " + strings.Join(flags, " ")
}

func (b *ModuleBuilder) logger() *slog.Logger {
	if b.Logger != nil {
		return b.Logger
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (b *ModuleBuilder) goEnv() []string {
	return append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
}

func (b *ModuleBuilder) goBinary() string {
	if b.GoBinary != "" {
		return b.GoBinary
	}
	return "go"
}

func (b *ModuleBuilder) goOutput(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, b.goBinary(), args[1:]...)
	cmd.Dir, cmd.Env = dir, b.goEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, lines.Last(stderr.String(), 10))
	}
	return out, nil
}

// goCmd runs a long go command, logging that it is still running every 30 s
// and returning the tail of its output on failure.
func (b *ModuleBuilder) goCmd(ctx context.Context, dir, what string, args ...string) error {
	if out, err := b.goRun(ctx, dir, what, args...); err != nil {
		return fmt.Errorf("%s: %w\n%s", what, err, lines.Last(string(out), 20))
	}
	return nil
}

// goRun runs a long go command as goCmd does and returns its combined
// output.
func (b *ModuleBuilder) goRun(ctx context.Context, dir, what string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, b.goBinary(), args...)
	cmd.Dir, cmd.Env = dir, b.goEnv()
	return RunWithProgress(b.logger(), cmd, what)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
