package binaries

// This file resolves binary source specs: the Resolver, and the dispatch
// of each parsed spec to its source (release.go, source_file.go,
// checkout.go, image.go, patch.go, and module.go through resolveModule).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/version"
)

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
	// A version the module proxy cannot build, and a patch that is not
	// there, not a diff or does not apply, are refused before any build
	// starts, not after the builds of the entries before it.
	for i, p := range parsed {
		var err error
		switch p.Kind {
		case KindModule:
			var v *version.Version
			if v, err = version.ParseSemantic(p.Value); err == nil {
				err = r.moduleBuilder().CheckServed(ctx, v, component)
			}
		case KindPatch:
			err = r.checkPatch(ctx, component, p)
		}
		if err != nil {
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

// specKey makes equal sources equal: file:./k and file:/abs/k are one,
// as are patch:./d@v and patch:/abs/d@v.
func specKey(s Spec) Spec {
	switch s.Kind {
	case KindFile, KindCheckout:
		if abs, err := absPath(s.Value); err == nil {
			s.Value = abs
		}
	case KindPatch:
		file, v := s.patchParts()
		if abs, err := absPath(file); err == nil {
			s.Value = abs + "@" + v
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
	if err := CheckCacheDir(r.CacheDir); err != nil {
		return Binary{}, err
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
	case KindPatch:
		b, err = r.resolvePatch(ctx, component, s)
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
	level := slog.LevelInfo
	if _, seen := announced.LoadOrStore(component+"\x00"+b.Source+"\x00"+b.SHA256, true); seen {
		level = slog.LevelDebug
	}
	r.logger().Log(ctx, level, "resolved", "component", component, "version", b.Version, "source", b.Source, "path", b.Path, "sha256", b.SHA256)
	return b, nil
}

// announced holds the binaries this process has logged as resolved: a
// batch or a suite resolves the same few kubelets for every run it plans,
// and says so once (later ones at debug level); each run's report still
// lists its binaries.
var announced sync.Map

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

func (r *Resolver) moduleBuilder() *ModuleBuilder {
	if r.Module != nil {
		return r.Module
	}
	return &ModuleBuilder{CacheDir: r.cacheDir(), Logger: r.Logger}
}

// moduleVersion is the version v of a source built from the Go module
// (spec, module: or patch:), which builds for this machine alone.
func (r *Resolver) moduleVersion(spec, v string) (*version.Version, error) {
	if r.arch() != runtime.GOARCH {
		return nil, badSource("%s builds for this machine's architecture (%s), not %s: use %s or release:%s", spec, runtime.GOARCH, r.arch(), v, v)
	}
	return version.ParseSemantic(v)
}

// resolveModule builds a release from the k8s.io/kubernetes Go module.
func (r *Resolver) resolveModule(ctx context.Context, component, v string) (Binary, error) {
	parsed, err := r.moduleVersion(KindModule+":"+v, v)
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
