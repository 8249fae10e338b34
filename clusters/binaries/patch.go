package binaries

// This file is the patch: source: the module build of a release with a
// unified diff applied (patch:<diff>@<version>), built in the version's
// shared source copy (patch_copy.go) and cached by the diff's sha256.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/internal/lines"
)

// patchVersionDir is <cache>/patch/vX, the patch source's tree of v.
func (b *ModuleBuilder) patchVersionDir(v *version.Version) string {
	return filepath.Join(b.CacheDir, "patch", "v"+v.String())
}

// PatchBinaryPath is where BuildPatched puts component at version v with
// the diff of sha256 patchSHA256 applied: never a module build's path.
func (b *ModuleBuilder) PatchBinaryPath(v *version.Version, patchSHA256, component string) string {
	return filepath.Join(b.patchVersionDir(v), patchSHA256, "bin", component)
}

// patchSource is a patch binary's Source: the diff's file name and the
// release it patches.
func patchSource(d *patchDiff, v *version.Version) string {
	return KindPatch + ":" + filepath.Base(d.Path) + "@v" + v.String()
}

// BuildPatched returns component at release v with the diff at diffPath
// applied (its paths as git diff writes them in a kubernetes checkout,
// a/… and b/…), built as the module build builds (the same flags, tags
// and version stamp), from the cache when that diff was built before. An
// empty diff builds the unpatched source the same way: a control, since
// such a build is not byte for byte the module build's. A diff that does
// not exist, is not a diff, does not apply or does not compile is
// ErrBadSource; after any failure the source copy is pristine and nothing
// is cached.
func (b *ModuleBuilder) BuildPatched(ctx context.Context, v *version.Version, component, diffPath string) (Binary, error) {
	if err := checkModuleVersion(v); err != nil {
		return Binary{}, err
	}
	if !moduleComponents[component] {
		return Binary{}, fmt.Errorf("module build: unknown component %q (known: %s)", component, strings.Join(sortedKeys(moduleComponents), ", "))
	}
	d, err := readPatch(ctx, diffPath)
	if err != nil {
		return Binary{}, err
	}
	final := b.PatchBinaryPath(v, d.SHA256, component)
	if bin, err := cachedModuleBinary(final); err == nil {
		return patchBinary(bin, component, v, d), nil
	}
	ms, verdicts, err := b.check(ctx, v, []string{component})
	if err != nil {
		return Binary{}, err
	}
	// The wrapper module is the module build's: made under its lock.
	unlock, err := b.lockBuildDir(ctx, b.moduleDir(v), "k8s.io/kubernetes@v"+v.String())
	if err != nil {
		return Binary{}, err
	}
	err = b.prepareModule(ctx, v, ms)
	unlock()
	if err != nil {
		return Binary{}, err
	}
	pristine, err := b.kubernetesSource(ctx, v, ms)
	if err != nil {
		return Binary{}, err
	}
	t := patchTree{dir: b.patchVersionDir(v), pristine: pristine}
	if err := os.MkdirAll(t.dir, 0o755); err != nil {
		return Binary{}, err
	}
	// One build of a version at a time, across processes: they share the
	// source copy.
	lock, err := hostlock.Exclusive(ctx, t.lock(), func() {
		b.logger().Info("waiting for another build of a patched Kubernetes to finish with the source copy", "version", "v"+v.String(), "lock", t.lock())
	})
	if err != nil {
		return Binary{}, err
	}
	defer lock.Close()
	if bin, err := cachedModuleBinary(final); err == nil {
		return patchBinary(bin, component, v, d), nil
	}
	if err := t.prepare(b.moduleDir(v)); err != nil {
		return Binary{}, fmt.Errorf("the patch source's copy of k8s.io/kubernetes@v%s in %s: %w", v, t.dir, err)
	}
	bin, err := b.buildInTree(ctx, t, v, component, d, verdicts[component].Tags)
	if err != nil {
		return Binary{}, err
	}
	return patchBinary(bin, component, v, d), nil
}

// patchBinary fills in what every patch binary says of itself.
func patchBinary(bin Binary, component string, v *version.Version, d *patchDiff) Binary {
	bin.Component, bin.Version, bin.Source = component, "v"+v.String(), patchSource(d, v)
	bin.PatchSHA256, bin.PatchFiles = d.SHA256, strings.Join(d.Files, ",")
	return bin
}

// buildInTree applies d to the source copy, builds component, puts the
// copy back and installs the binary. The touched files are recorded
// before the diff is applied and put back on every path out, so the copy
// is pristine again after a failure (or, after a kill, at the next
// build's prepare).
func (b *ModuleBuilder) buildInTree(ctx context.Context, t patchTree, v *version.Version, component string, d *patchDiff, tags []string) (Binary, error) {
	kv := "v" + v.String()
	logger := b.logger()
	tmp, err := os.MkdirTemp(t.dir, patchBuildPrefix)
	if err != nil {
		return Binary{}, err
	}
	defer os.RemoveAll(tmp)
	if err := t.begin(d); err != nil {
		return Binary{}, err
	}
	start := time.Now()
	buildErr := func() error {
		if d.empty() {
			logger.Info("the patch is empty: building the unpatched source the way patched ones are built (a control for them)", "version", kv, "component", component, "patch", d.Path)
		} else if err := applyPatch(ctx, t.src(), d, kv, false); err != nil {
			return err
		}
		logger.Info("building a patched Kubernetes component from the module's source copy (warm: seconds to a minute; cold: as a module build)",
			"version", kv, "component", component, "patch", d.Path, "files", strings.Join(d.Files, ","), "tags", strings.Join(tags, ","))
		out, err := b.goRun(ctx, t.module(), "go build "+component+" with "+filepath.Base(d.Path), buildArgs(v, tags, tmp, []string{component})...)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil && !d.empty() && compileErrorRE.Match(out) {
			return badSource("patch %s does not compile against k8s.io/kubernetes@%s (%s); the compiler says:\n%s", d.Path, kv, err, firstLines(compilerOutput(out, t), 20))
		}
		return fmt.Errorf("build %s %s with patch %s: %w\n%s", component, kv, d.Path, err, lines.Last(string(out), 20))
	}()
	if err := t.restore(d.Files); err != nil {
		// The record stays: the next build's prepare tries again.
		return Binary{}, errors.Join(buildErr, err)
	}
	if buildErr != nil {
		return Binary{}, buildErr
	}
	final := b.PatchBinaryPath(v, d.SHA256, component)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return Binary{}, err
	}
	// The diff beside its binaries says what they are.
	if err := os.WriteFile(filepath.Join(filepath.Dir(filepath.Dir(final)), "patch.diff"), d.Data, 0o644); err != nil {
		return Binary{}, err
	}
	if err := os.Rename(filepath.Join(tmp, component), final); err != nil {
		return Binary{}, fmt.Errorf("install %s: %w", component, err)
	}
	// The build record goes before the sha256 sidecar, which is what
	// makes the binary count as cached.
	if err := writeBuildRecord(final, buildRecord{BuildTags: tags, PatchSHA256: d.SHA256, PatchFiles: d.Files}); err != nil {
		return Binary{}, err
	}
	bin, err := recordBinary(final)
	if err != nil {
		return Binary{}, err
	}
	bin.BuildTags = strings.Join(tags, ",")
	logger.Info("built", "version", kv, "component", component, "patch", d.Path, "took", time.Since(start).Round(time.Second))
	return bin, nil
}

// compileErrorRE matches a compiler error line (file.go:line:col: ...).
var compileErrorRE = regexp.MustCompile(`(?m)^\S+\.go:[0-9]+:[0-9]+: `)

// compilerOutput is go build's output with the source copy's paths made
// the checkout's (pkg/kubelet/kubelet.go, as in the diff).
func compilerOutput(out []byte, t patchTree) string {
	s := string(out)
	for _, prefix := range []string{t.src() + string(filepath.Separator), "../" + filepath.Base(t.src()) + "/"} {
		s = strings.ReplaceAll(s, prefix, "")
	}
	return s
}

// firstLines is the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("… (%d more lines)", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}

// kubernetesSource is k8s.io/kubernetes@v in the module cache: ms's when
// the check resolved it, else asked of the go command (a cached module
// answers at once).
func (b *ModuleBuilder) kubernetesSource(ctx context.Context, v *version.Version, ms *moduleSet) (string, error) {
	if ms != nil && ms.kubeDir != "" {
		return ms.kubeDir, nil
	}
	kv := "v" + v.String()
	got, err := b.download(ctx, "k8s.io/kubernetes@"+kv)
	if err != nil {
		return "", fmt.Errorf("fetch k8s.io/kubernetes@%s from the Go module proxy: %w", kv, err)
	}
	if len(got) != 1 || got[0].Error != "" || got[0].Dir == "" {
		return "", fmt.Errorf("fetch k8s.io/kubernetes@%s from the Go module proxy: %+v", kv, got)
	}
	return got[0].Dir, nil
}

// CheckPatch refuses, before anything is built, a patch: spec whose diff
// does not exist, is not a diff or does not apply to the pristine source,
// or whose version the module proxy cannot build component at.
func (b *ModuleBuilder) CheckPatch(ctx context.Context, v *version.Version, component, diffPath string) error {
	d, err := readPatch(ctx, diffPath)
	if err != nil {
		return err
	}
	if err := b.CheckServed(ctx, v, component); err != nil {
		return err
	}
	if d.empty() {
		return nil
	}
	pristine, err := b.kubernetesSource(ctx, v, nil)
	if err != nil {
		return err
	}
	return applyPatch(ctx, pristine, d, "v"+v.String(), true)
}

// resolvePatch builds a release from the k8s.io/kubernetes Go module with
// a diff applied.
func (r *Resolver) resolvePatch(ctx context.Context, component string, s Spec) (Binary, error) {
	file, v := s.patchParts()
	parsed, err := r.moduleVersion(s.String(), v)
	if err != nil {
		return Binary{}, err
	}
	return r.moduleBuilder().BuildPatched(ctx, parsed, component, file)
}

// checkPatch is CheckPatch for a parsed patch: spec.
func (r *Resolver) checkPatch(ctx context.Context, component string, s Spec) error {
	file, v := s.patchParts()
	parsed, err := r.moduleVersion(s.String(), v)
	if err != nil {
		return err
	}
	return r.moduleBuilder().CheckPatch(ctx, parsed, component, file)
}
