package binaries

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
)

// DefaultBaseURL serves Kubernetes releases (/release/) and CI builds (/ci/).
const DefaultBaseURL = "https://dl.k8s.io"

// progressInterval is how often a download logs how far it got.
var progressInterval = 5 * time.Second

// Resolver turns binary source specs (see ParseSpec) into binaries on the
// local disk, downloading, verifying and caching them as needed. A run
// resolves its plan once, up front, with ResolvePlan.
type Resolver struct {
	// CacheDir is the skewtest cache root; DefaultCacheDir() when empty.
	// Releases are cached under <CacheDir>/release/<version>/<arch>/ and CI
	// builds under <CacheDir>/ci/<version>/<arch>/.
	CacheDir string
	// BaseURL serves releases and release markers; DefaultBaseURL when
	// empty. Set it to use a mirror.
	BaseURL string
	// CIBaseURL serves CI builds and CI markers (under /ci/); DefaultBaseURL
	// when empty.
	CIBaseURL string
	// Arch is the node architecture (amd64, arm64, ...); runtime.GOARCH
	// when empty.
	Arch string
	// HTTPClient downloads; http.DefaultClient when nil. Downloads are
	// bounded by the context, not by a client timeout.
	HTTPClient *http.Client
	// Module builds module: specs; when nil, one is made with CacheDir and
	// Logger.
	Module *ModuleBuilder
	// Logger receives progress; discarded when nil.
	Logger *slog.Logger
	// Runner runs argv in dir (the process's directory when dir is empty)
	// and returns its combined output: `<binary> --version` for file: and
	// checkout:, and make for checkout:. os/exec when nil.
	Runner func(ctx context.Context, dir string, argv ...string) ([]byte, error)
}

var componentRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
var archRE = regexp.MustCompile(`^[a-z0-9]+$`)

// Resolve returns the binary of component (such as "kubelet") that spec
// names. Every field of the result is filled.
func (r *Resolver) Resolve(ctx context.Context, component, spec string) (Binary, error) {
	s, err := ParseSpec(spec)
	if err != nil {
		return Binary{}, err
	}
	return r.ResolveSpec(ctx, component, s)
}

// ResolvePlan resolves the binary of every plan entry. All specs are parsed
// before anything is fetched; each distinct source is resolved once, in plan
// order, and the result has one Binary per entry. It stops at the first
// error; a failed download leaves no file behind (binaries completed before
// it stay cached).
func (r *Resolver) ResolvePlan(ctx context.Context, component string, specs []string) ([]Binary, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("no %s sources to resolve", component)
	}
	parsed := make([]Spec, len(specs))
	for i, s := range specs {
		p, err := ParseSpec(s)
		if err != nil {
			return nil, fmt.Errorf("plan entry %d: %w", i+1, err)
		}
		parsed[i] = p
	}
	// A version the module proxy cannot build is refused before any
	// build starts, not after the builds of the entries before it.
	for i, p := range parsed {
		if p.Kind != KindModule {
			continue
		}
		v, err := version.ParseSemantic(p.Value)
		if err != nil {
			return nil, fmt.Errorf("plan entry %d: %w", i+1, err)
		}
		if err := r.moduleBuilder().CheckServed(ctx, v); err != nil {
			return nil, fmt.Errorf("plan entry %d (%s): %w", i+1, strings.TrimSpace(specs[i]), err)
		}
	}
	done := map[Spec]Binary{}
	out := make([]Binary, len(specs))
	for i, p := range parsed {
		key := specKey(p)
		if b, ok := done[key]; ok {
			out[i] = b
			continue
		}
		b, err := r.ResolveSpec(ctx, component, p)
		if err != nil {
			return nil, fmt.Errorf("plan entry %d (%s): %w", i+1, strings.TrimSpace(specs[i]), err)
		}
		done[key] = b
		out[i] = b
	}
	return out, nil
}

// specKey makes equal sources equal: file:./k and file:/abs/k are one.
func specKey(s Spec) Spec {
	if s.Kind == KindFile || s.Kind == KindCheckout {
		if abs, err := absPath(s.Value); err == nil {
			s.Value = abs
		}
	}
	return s
}

// ResolveSpec is Resolve for a parsed spec.
func (r *Resolver) ResolveSpec(ctx context.Context, component string, s Spec) (Binary, error) {
	if !componentRE.MatchString(component) {
		return Binary{}, fmt.Errorf("invalid component name %q", component)
	}
	if !archRE.MatchString(r.arch()) {
		return Binary{}, fmt.Errorf("invalid architecture %q", r.arch())
	}
	var (
		b   Binary
		err error
	)
	switch s.Kind {
	case KindRelease:
		b, err = r.download(ctx, component, KindRelease, s.Value)
	case KindMarker:
		b, err = r.resolveMarker(ctx, component, KindRelease, s.Value)
	case KindCI:
		if _, _, isVersion := parseKubeVersion(s.Value); isVersion {
			b, err = r.download(ctx, component, KindCI, s.Value)
		} else {
			b, err = r.resolveMarker(ctx, component, KindCI, s.Value)
		}
	case KindModule:
		b, err = r.resolveModule(ctx, component, s.Value)
	case KindFile:
		b, err = r.resolveFile(ctx, component, s.Value)
	case KindCheckout:
		b, err = r.resolveCheckout(ctx, component, s.Value)
	case KindImage:
		b, err = r.resolveImage(ctx, component, s.Value)
	default:
		err = fmt.Errorf("unknown source kind %q", s.Kind)
	}
	if err != nil {
		return Binary{}, err
	}
	b.Component = component
	r.logger().Info("resolved", "component", component, "version", b.Version, "source", b.Source, "path", b.Path, "sha256", b.SHA256)
	return b, nil
}

func (r *Resolver) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (r *Resolver) cacheDir() string {
	if r.CacheDir != "" {
		return r.CacheDir
	}
	return DefaultCacheDir()
}

func (r *Resolver) arch() string {
	if r.Arch != "" {
		return r.Arch
	}
	return runtime.GOARCH
}

func (r *Resolver) client() *http.Client {
	if r.HTTPClient != nil {
		return r.HTTPClient
	}
	return http.DefaultClient
}

// baseURL is where kind (release or ci) lives.
func (r *Resolver) baseURL(kind string) string {
	base := r.BaseURL
	if kind == KindCI {
		base = r.CIBaseURL
	}
	if base == "" {
		base = DefaultBaseURL
	}
	return strings.TrimRight(base, "/")
}

// binaryURL is where component at version v of kind (release or ci) is
// published.
func (r *Resolver) binaryURL(component, kind, v string) string {
	return fmt.Sprintf("%s/%s/%s/bin/linux/%s/%s", r.baseURL(kind), kind, v, r.arch(), component)
}

// resolveMarker reads a marker file (<base>/<kind>/<name>.txt) and resolves
// the version it holds.
func (r *Resolver) resolveMarker(ctx context.Context, component, kind, name string) (Binary, error) {
	markerURL := fmt.Sprintf("%s/%s/%s.txt", r.baseURL(kind), kind, name)
	resp, err := r.get(ctx, markerURL)
	if err != nil {
		return Binary{}, fmt.Errorf("resolve %s marker %s: %w", kind, name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return Binary{}, badSource("%s marker %s not found at %s: markers look like latest-1.37 or stable-1.36 (see https://kubernetes.io/releases/)", kind, name, markerURL)
	}
	if resp.StatusCode != http.StatusOK {
		return Binary{}, fmt.Errorf("resolve %s marker %s: GET %s: %s", kind, name, markerURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil {
		return Binary{}, fmt.Errorf("resolve %s marker %s: read %s: %w", kind, name, markerURL, err)
	}
	text := strings.TrimSpace(string(body))
	v, parsed, ok := parseKubeVersion(text)
	if !ok || !strings.HasPrefix(text, "v") || (kind == KindRelease && parsed.BuildMetadata() != "") {
		return Binary{}, badSource("%s marker %s at %s holds %q, not a Kubernetes %s version", kind, name, markerURL, text, kind)
	}
	r.logger().Info("resolved marker", "marker", kind+"/"+name, "version", v, "url", markerURL)
	b, err := r.download(ctx, component, kind, v)
	if err != nil {
		return Binary{}, fmt.Errorf("%s marker %s -> %s: %w", kind, name, v, err)
	}
	if kind == KindCI {
		b.Source = fmt.Sprintf("marker:ci/%s -> ci:%s (%s)", name, v, r.binaryURL(component, kind, v))
	} else {
		b.Source = fmt.Sprintf("marker:%s -> release:%s (%s)", name, v, r.binaryURL(component, kind, v))
	}
	return b, nil
}

// download makes sure component at version v of kind (release or ci) is in
// the cache, verified against its published sha256, and returns it. A warm
// cache makes no request.
func (r *Resolver) download(ctx context.Context, component, kind, v string) (Binary, error) {
	url := r.binaryURL(component, kind, v)
	kindDir := filepath.Join(r.cacheDir(), kind)
	dest := filepath.Join(kindDir, v, r.arch(), component)
	done := func(b Binary) Binary {
		b.Component, b.Version, b.Source = component, v, kind+":"+url
		return b
	}
	b, err := cachedBinary(dest)
	if err == nil {
		r.logger().Debug("using cached binary", "path", dest, "sha256", b.SHA256)
		return done(b), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		r.logger().Warn("cached binary is damaged; downloading it again", "path", dest, "err", err)
	}

	resp, err := r.get(ctx, url)
	if err != nil {
		return Binary{}, fmt.Errorf("download %s %s: %w", component, v, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		if kind == KindCI {
			return Binary{}, badSource("%s %s not found at %s: is it a CI build that still exists? (CI markers: %s/ci/latest-X.Y.txt)", component, v, url, r.baseURL(kind))
		}
		return Binary{}, badSource("%s %s not found at %s: is it a released version? (see https://kubernetes.io/releases/)", component, v, url)
	}
	if resp.StatusCode != http.StatusOK {
		return Binary{}, fmt.Errorf("download %s %s: GET %s: %s", component, v, url, resp.Status)
	}

	// Download to a temporary file beside the destination and rename it
	// only once it is verified, so that the cache never holds a partial or
	// unverified binary.
	dir := filepath.Dir(dest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binary{}, err
	}
	tmp, err := os.CreateTemp(dir, "."+component+".download-*")
	if err != nil {
		removeEmptyDirs(dir, kindDir)
		return Binary{}, err
	}
	installed := false
	defer func() {
		if !installed {
			tmp.Close()
			os.Remove(tmp.Name())
			removeEmptyDirs(dir, kindDir)
		}
	}()

	r.logger().Info("downloading", "component", component, "version", v, "url", url, "bytes", resp.ContentLength)
	start := time.Now()
	h := sha256.New()
	progress := &progressLogger{logger: r.logger(), url: url, total: resp.ContentLength, last: start}
	n, err := io.Copy(io.MultiWriter(tmp, h, progress), resp.Body)
	if err != nil {
		return Binary{}, fmt.Errorf("download %s: %w", url, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return Binary{}, fmt.Errorf("download %s: got %d of %d bytes", url, n, resp.ContentLength)
	}
	if err := tmp.Close(); err != nil {
		return Binary{}, fmt.Errorf("download %s: %w", url, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	want, err := r.publishedSHA256(ctx, url+".sha256")
	if err != nil {
		return Binary{}, fmt.Errorf("refusing %s %s from %s: %w", component, v, url, err)
	}
	if got != want {
		return Binary{}, fmt.Errorf("refusing %s %s from %s: checksum mismatch: expected sha256 %s (published at %s.sha256), got %s; the mirror or cache may be corrupt", component, v, url, want, url, got)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return Binary{}, err
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return Binary{}, fmt.Errorf("install %s: %w", dest, err)
	}
	installed = true
	b, err = recordBinary(dest)
	if err != nil {
		return Binary{}, err
	}
	r.logger().Info("downloaded", "component", component, "version", v, "bytes", n, "took", time.Since(start).Round(time.Millisecond), "sha256", got)
	return done(b), nil
}

// publishedSHA256 fetches a .sha256 file: a hex sum, maybe followed by a
// file name.
func (r *Resolver) publishedSHA256(ctx context.Context, url string) (string, error) {
	resp, err := r.get(ctx, url)
	if err != nil {
		return "", fmt.Errorf("fetch its checksum: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return "", fmt.Errorf("no checksum published at %s; will not use an unverified binary", url)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetch its checksum: GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", fmt.Errorf("fetch its checksum: read %s: %w", url, err)
	}
	fields := strings.Fields(string(body))
	if len(fields) == 0 {
		return "", fmt.Errorf("checksum file %s is empty", url)
	}
	sum := strings.ToLower(fields[0])
	if raw, err := hex.DecodeString(sum); err != nil || len(raw) != sha256.Size {
		return "", fmt.Errorf("checksum file %s holds %q, not a sha256", url, fields[0])
	}
	return sum, nil
}

func (r *Resolver) get(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "skewtest")
	return r.client().Do(req)
}

// removeEmptyDirs removes dir and its parents up to, not including, stop,
// as long as they are empty.
func removeEmptyDirs(dir, stop string) {
	for dir != stop && strings.HasPrefix(dir, stop+string(filepath.Separator)) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// progressLogger logs how much of a download arrived, every
// progressInterval.
type progressLogger struct {
	logger *slog.Logger
	url    string
	total  int64
	n      int64
	last   time.Time
}

func (p *progressLogger) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	if now := time.Now(); now.Sub(p.last) >= progressInterval {
		p.last = now
		attrs := []any{"url", p.url, "bytes", p.n}
		if p.total > 0 {
			attrs = append(attrs, "total", p.total, "percent", p.n*100/p.total)
		}
		p.logger.Info("downloading", attrs...)
	}
	return len(b), nil
}

func (r *Resolver) moduleBuilder() *ModuleBuilder {
	if r.Module != nil {
		return r.Module
	}
	return &ModuleBuilder{CacheDir: r.cacheDir(), Logger: r.Logger}
}

// resolveModule builds a release from the k8s.io/kubernetes Go module.
func (r *Resolver) resolveModule(ctx context.Context, component, v string) (Binary, error) {
	if r.arch() != runtime.GOARCH {
		return Binary{}, badSource("module:%s builds for this machine's architecture (%s), not %s: use %s or release:%s", v, runtime.GOARCH, r.arch(), v, v)
	}
	parsed, err := version.ParseSemantic(v)
	if err != nil {
		return Binary{}, err
	}
	built, err := r.moduleBuilder().Build(ctx, parsed, component)
	if err != nil {
		return Binary{}, err
	}
	b, ok := built[component]
	if !ok {
		return Binary{}, fmt.Errorf("module build of %s %s returned no binary", component, v)
	}
	return b, nil
}

// resolveFile uses an executable on the local disk as it is.
func (r *Resolver) resolveFile(ctx context.Context, component, p string) (Binary, error) {
	path, err := absPath(p)
	if err != nil {
		return Binary{}, err
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Binary{}, badSource("%s binary file:%s does not exist: build one (make WHAT=cmd/%s in a kubernetes checkout, or use checkout:/path/to/kubernetes) or use module:vX.Y.Z", component, path, component)
	}
	if err != nil {
		return Binary{}, fmt.Errorf("%s binary file:%s: %w", component, path, err)
	}
	if fi.IsDir() {
		return Binary{}, badSource("%s binary file:%s is a directory, not an executable (for a kubernetes checkout use checkout:%s)", component, path, path)
	}
	if fi.Mode()&0o111 == 0 {
		return Binary{}, badSource("%s binary file:%s is not executable (chmod +x %s)", component, path, path)
	}
	return r.localBinary(ctx, path, "file:"+path)
}

// localBinary describes a binary used where it is: the version it reports
// and its sha256.
func (r *Resolver) localBinary(ctx context.Context, path, source string) (Binary, error) {
	v, err := r.binaryVersion(ctx, path)
	if err != nil {
		return Binary{}, err
	}
	sum, err := FileSHA256(path)
	if err != nil {
		return Binary{}, err
	}
	return Binary{Version: v, Source: source, Path: path, SHA256: sum}, nil
}

// resolveCheckout builds component in a local kubernetes checkout.
func (r *Resolver) resolveCheckout(ctx context.Context, component, p string) (Binary, error) {
	dir, err := absPath(p)
	if err != nil {
		return Binary{}, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return Binary{}, fmt.Errorf("checkout:%s: %w", dir, err)
	}
	if !fi.IsDir() {
		return Binary{}, badSource("checkout:%s is not a directory (for a binary use file:%s)", dir, dir)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if errors.Is(err, fs.ErrNotExist) {
		return Binary{}, badSource("checkout:%s is not a kubernetes checkout: it has no go.mod (want a clone of https://github.com/kubernetes/kubernetes)", dir)
	}
	if err != nil {
		return Binary{}, fmt.Errorf("checkout:%s: %w", dir, err)
	}
	if mod := modulePath(gomod); mod != "k8s.io/kubernetes" {
		return Binary{}, badSource("checkout:%s is not a kubernetes checkout: its go.mod declares module %q, want k8s.io/kubernetes", dir, mod)
	}
	argv := []string{"make", "WHAT=cmd/" + component, "KUBE_BUILD_PLATFORMS=linux/" + r.arch()}
	r.logger().Info("building in the kubernetes checkout (several minutes when cold)", "dir", dir, "command", strings.Join(argv, " "))
	start := time.Now()
	if out, err := r.run(ctx, dir, argv...); err != nil {
		return Binary{}, fmt.Errorf("%s in %s: %w\n%s", strings.Join(argv, " "), dir, err, lastLines(string(out), 20))
	}
	r.logger().Info("built", "dir", dir, "component", component, "took", time.Since(start).Round(time.Second))
	path, err := r.checkoutOutput(dir, component)
	if err != nil {
		return Binary{}, err
	}
	return r.localBinary(ctx, path, "checkout:"+dir)
}

// checkoutOutput finds what `make WHAT=cmd/<component>` built: the newest of
// the places the kubernetes build puts binaries for the target platform.
func (r *Resolver) checkoutOutput(dir, component string) (string, error) {
	arch := r.arch()
	candidates := []string{
		filepath.Join(dir, "_output", "local", "bin", "linux", arch, component),
		filepath.Join(dir, "_output", "local", "go", "bin", "linux_"+arch, component),
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == arch {
		// Native builds also land here (_output/bin links to
		// _output/local/bin/<platform>).
		candidates = append(candidates,
			filepath.Join(dir, "_output", "bin", component),
			filepath.Join(dir, "_output", "local", "go", "bin", component))
	}
	var best string
	var bestTime time.Time
	for _, c := range candidates {
		fi, err := os.Stat(c)
		if err != nil || fi.IsDir() {
			continue
		}
		if best == "" || fi.ModTime().After(bestTime) {
			best, bestTime = c, fi.ModTime()
		}
	}
	if best == "" {
		return "", fmt.Errorf("make in %s built no %s: looked for %s", dir, component, strings.Join(candidates, ", "))
	}
	return best, nil
}

var versionOutputRE = regexp.MustCompile(`Kubernetes (v[0-9]+\.[0-9]+\.[0-9]+\S*)`)

// binaryVersion runs `<path> --version` ("Kubernetes v1.36.3").
func (r *Resolver) binaryVersion(ctx context.Context, path string) (string, error) {
	out, err := r.run(ctx, "", path, "--version")
	if err != nil {
		hint := ""
		if r.arch() != runtime.GOARCH {
			hint = fmt.Sprintf(" (it is built for %s; this machine is %s)", r.arch(), runtime.GOARCH)
		}
		return "", badSource("%s --version%s: %w: %s", path, hint, err, lastLines(string(out), 5))
	}
	m := versionOutputRE.FindStringSubmatch(string(out))
	if m == nil {
		return "", badSource("%s --version printed %q, want \"Kubernetes vX.Y.Z\"", path, strings.TrimSpace(lastLines(string(out), 3)))
	}
	v, _, ok := parseKubeVersion(m[1])
	if !ok {
		return "", badSource("%s --version reports %q, not a usable Kubernetes version; build it with make, which stamps the version", path, m[1])
	}
	return v, nil
}

func (r *Resolver) run(ctx context.Context, dir string, argv ...string) ([]byte, error) {
	if r.Runner != nil {
		return r.Runner(ctx, dir, argv...)
	}
	return execRun(ctx, r.logger(), dir, argv...)
}

// execRun runs argv with os/exec, logging every 30 s that it is still
// running.
func execRun(ctx context.Context, logger *slog.Logger, dir string, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	return RunWithProgress(logger, cmd, strings.Join(argv, " "))
}

// RunWithProgress runs cmd, which may take minutes, logging every 30 s
// that it is still running, and returns its combined output.
func RunWithProgress(logger *slog.Logger, cmd *exec.Cmd, what string) ([]byte, error) {
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	start := time.Now()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return out.Bytes(), err
		case <-tick.C:
			logger.Info("still running", "command", what, "elapsed", time.Since(start).Round(time.Second))
		}
	}
}

// absPath expands a leading ~/ and makes p absolute.
func absPath(p string) (string, error) {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		p = filepath.Join(home, rest)
	}
	return filepath.Abs(p)
}

var moduleLineRE = regexp.MustCompile(`(?m)^\s*module\s+"?([^\s"]+)"?`)

// modulePath returns the module path a go.mod declares, or "".
func modulePath(gomod []byte) string {
	m := moduleLineRE.FindSubmatch(gomod)
	if m == nil {
		return ""
	}
	return string(m[1])
}
