package binaries

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
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
func (b *ModuleBuilder) Build(ctx context.Context, v *version.Version, components ...string) (map[string]Binary, error) {
	if v == nil || v.PreRelease() != "" || v.BuildMetadata() != "" {
		return nil, fmt.Errorf("module build of %v: only release versions such as v1.37.2 can be built from the k8s.io/kubernetes module", v)
	}
	logger := b.logger()
	out := map[string]Binary{}
	var missing []string
	for _, c := range components {
		if !moduleComponents[c] {
			return nil, fmt.Errorf("module build: unknown component %q (known: %s)", c, strings.Join(sortedKeys(moduleComponents), ", "))
		}
		bin, err := cachedBinary(b.BinaryPath(v, c))
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
	dir := b.moduleDir(v)
	if err := b.prepareModule(ctx, v); err != nil {
		return nil, err
	}
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, err
	}
	// Build into a temporary dir and rename, so an interrupted build never
	// leaves a half-written binary that a later run would trust.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	pkgs := make([]string, 0, len(missing))
	for _, c := range missing {
		pkgs = append(pkgs, "k8s.io/kubernetes/cmd/"+c)
	}
	args := append([]string{"build", "-trimpath", "-ldflags", ldflags(v), "-o", tmp + "/"}, pkgs...)
	logger.Info("building Kubernetes components from the Go module (cold: about 6 min for the kubelet on 2 cores)",
		"version", "v"+v.String(), "components", strings.Join(missing, ","))
	start := time.Now()
	if err := b.goCmd(ctx, dir, "go build "+strings.Join(missing, ","), args...); err != nil {
		return nil, fmt.Errorf("build %s v%s from the k8s.io/kubernetes module: %w", strings.Join(missing, ","), v, err)
	}
	for _, c := range missing {
		final := b.BinaryPath(v, c)
		if err := os.Rename(filepath.Join(tmp, c), final); err != nil {
			return nil, fmt.Errorf("install %s: %w", c, err)
		}
		bin, err := recordBinary(final)
		if err != nil {
			return nil, err
		}
		bin.Component, bin.Version, bin.Source = c, "v"+v.String(), "module:v"+v.String()
		out[c] = bin
	}
	logger.Info("built", "version", "v"+v.String(), "components", strings.Join(missing, ","), "took", time.Since(start).Round(time.Second))
	return out, nil
}

// prepareModule writes the wrapper module (go.mod, tools.go) and tidies it.
func (b *ModuleBuilder) prepareModule(ctx context.Context, v *version.Version) error {
	dir := b.moduleDir(v)
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kv := "v" + v.String()
	var dl struct{ GoMod, Error string }
	out, err := b.goOutput(ctx, dir, "go", "mod", "download", "-json", "k8s.io/kubernetes@"+kv)
	if jerr := json.Unmarshal(out, &dl); jerr != nil || dl.Error != "" || err != nil {
		msg := dl.Error
		if msg == "" && err != nil {
			msg = err.Error()
		}
		return fmt.Errorf("fetch k8s.io/kubernetes@%s from the Go module proxy: %s (is %s a released Kubernetes version?)", kv, strings.TrimSpace(msg), kv)
	}
	modText, err := os.ReadFile(dl.GoMod)
	if err != nil {
		return err
	}
	staging := stagingModules(modText)
	if len(staging) == 0 {
		return fmt.Errorf("k8s.io/kubernetes@%s: its go.mod has no staging replacements; cannot build it as a module", kv)
	}
	var gomod bytes.Buffer
	fmt.Fprintf(&gomod, "// Generated by skewtest to build Kubernetes %s from its Go module.\nmodule skewtest.local/k8s\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", kv, kv)
	for _, m := range staging {
		fmt.Fprintf(&gomod, "\t%s => %s v0.%d.%d\n", m, m, v.Minor(), v.Patch())
	}
	gomod.WriteString(")\n")
	var tools bytes.Buffer
	tools.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, c := range sortedKeys(moduleComponents) {
		fmt.Fprintf(&tools, "\t_ \"k8s.io/kubernetes/cmd/%s\"\n", c)
	}
	tools.WriteString(")\n")
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), gomod.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.go"), tools.Bytes(), 0o644); err != nil {
		return err
	}
	b.logger().Info("resolving the k8s.io/kubernetes module graph (about 1 min cold)", "version", kv)
	if err := b.goCmd(ctx, dir, "go mod tidy", "mod", "tidy", "-e"); err != nil {
		os.Remove(filepath.Join(dir, "go.sum"))
		return fmt.Errorf("resolve modules for k8s.io/kubernetes@%s: %w", kv, err)
	}
	return nil
}

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
		return out, fmt.Errorf("%w: %s", err, lastLines(stderr.String(), 10))
	}
	return out, nil
}

// goCmd runs a long go command, logging that it is still running every 30 s
// and returning the tail of its output on failure.
func (b *ModuleBuilder) goCmd(ctx context.Context, dir, what string, args ...string) error {
	cmd := exec.CommandContext(ctx, b.goBinary(), args...)
	cmd.Dir, cmd.Env = dir, b.goEnv()
	if out, err := RunWithProgress(b.logger(), cmd, what); err != nil {
		return fmt.Errorf("%s: %w\n%s", what, err, lastLines(string(out), 20))
	}
	return nil
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
