//go:build images

package kind

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
)

// The kubelets the images tests run: the node image's own and an older one.
var (
	imagesTestNewest = version.MustParseSemantic("v1.37.2")
	imagesTestOlder  = version.MustParseSemantic("v1.36.3")
)

// imagesTestSetup builds what an images test of a kind cluster runs: the
// v1.37.2 and v1.36.3 kubelets and the offline node image, bounded by go
// test's -timeout alone (cold, that takes tens of minutes on a busy 2-core
// machine, and is not what the test tests). ctx is cancelled by SIGINT
// and SIGTERM: a test binary dies of SIGINT without running its defers,
// and these tests have a private dockerd and kind nodes to remove, so an
// interrupt (Ctrl-C on make test-images, CI cancelling) lets Down run.
func imagesTestSetup(t *testing.T) (ctx context.Context, logger *slog.Logger, own, old binaries.Binary) {
	t.Helper()
	ctx, stop := signal.NotifyContext(t.Context(), os.Interrupt, syscall.SIGTERM)
	t.Cleanup(stop)
	logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	b := &binaries.ModuleBuilder{CacheDir: binaries.DefaultCacheDir(), Logger: logger}
	build := func(v *version.Version) binaries.Binary {
		bins, err := b.Build(ctx, v, "kubelet")
		if err != nil {
			t.Fatalf("kubelet %s: %v", v, err)
		}
		return bins["kubelet"]
	}
	own, old = build(imagesTestNewest), build(imagesTestOlder)
	if _, err := BuildNodeImage(ctx, imagesTestNewest, binaries.DefaultCacheDir(), logger); err != nil {
		t.Fatalf("node image %s: %v", imagesTestNewest, err)
	}
	return ctx, logger, own, old
}
