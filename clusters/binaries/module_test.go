package binaries

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// These tests ask the real Go module proxy (GOPROXY), the one source the
// module build uses.

func TestCheckServedRefusesAVersionWhoseStagingModulesTheProxyLacks(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	b := &ModuleBuilder{CacheDir: cache}
	// The proxy has k8s.io/kubernetes@v1.27.9 but not (verifiably) several
	// of its staging modules that the kubelet imports: measured, the build
	// used to fail after 27 s with raw go build output. Which ones it
	// refuses changes (on 2026-12-02 k8s.io/cloud-provider@v0.27.9 was
	// named in one run and not in another within the hour), so any one,
	// named with its import chain, will do.
	err := b.CheckServed(t.Context(), version.MustParseSemantic("v1.27.9"))
	if err == nil {
		t.Fatal("CheckServed(v1.27.9) = nil, want a refusal")
	}
	t.Log(err)
	if !errors.Is(err, ErrBadSource) {
		t.Errorf("error is not ErrBadSource (the user must pick another source): %v", err)
	}
	for _, want := range []string{"Go module proxy does not serve", "@v0.27.9, which it imports (cmd/kubelet → cmd/kubelet/app → ", "KUBELET_SOURCE=release", "file:", "checkout:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if _, err := os.Stat(filepath.Join(cache, "module")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused version left %s behind (%v)", filepath.Join(cache, "module"), err)
	}
}

func TestCheckServedRefusesAnUnreleasedVersion(t *testing.T) {
	t.Parallel()
	b := &ModuleBuilder{CacheDir: t.TempDir()}
	err := b.CheckServed(t.Context(), version.MustParseSemantic("v1.99.0"))
	if !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), "k8s.io/kubernetes@v1.99.0") {
		t.Errorf("CheckServed(v1.99.0) = %v, want an ErrBadSource naming k8s.io/kubernetes@v1.99.0", err)
	}
}

func TestCheckServedAcceptsAServedVersion(t *testing.T) {
	t.Parallel()
	b := &ModuleBuilder{CacheDir: t.TempDir()}
	if err := b.CheckServed(t.Context(), version.MustParseSemantic("v1.36.3")); err != nil {
		t.Errorf("CheckServed(v1.36.3) = %v, want nil", err)
	}
}

func TestCheckServedTellsAnUnreachableProxyFromAMissingModule(t *testing.T) {
	t.Setenv("GOPROXY", "http://127.0.0.1:9")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOFLAGS", "-modcacherw")
	b := &ModuleBuilder{CacheDir: t.TempDir()}
	err := b.CheckServed(t.Context(), version.MustParseSemantic("v1.36.3"))
	if err == nil || errors.Is(err, ErrBadSource) {
		t.Errorf("CheckServed with an unreachable proxy = %v, want an error that is not ErrBadSource (an infrastructure failure)", err)
	}
}
