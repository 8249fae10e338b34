// Package images builds the container images skewtest's pods use from
// podbin, a program of this module, so that no registry is needed: each
// image is a single static binary, written as a docker-archive tarball that
// `ctr images import` (local provider) or `kind load image-archive` takes.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Names of the images; localhost/ so that nothing ever tries a registry.
const (
	Pause    = "localhost/skewtest/pause:v1"
	Workload = "localhost/skewtest/workload:v1"
)

const podbinPackage = "sigs.k8s.io/skewtest/clusters/internal/podbin"

// Build compiles podbin and writes one tarball holding both images into
// dir. It returns the tarball's path. It needs the skewtest module source
// (the working directory must be inside it), which is where tests and
// `make test-skew` run.
func Build(ctx context.Context, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "podbin")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, podbinPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s (run from inside the skewtest source tree): %w\n%s", podbinPackage, err, out)
	}
	content, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	refs := map[name.Reference]v1.Image{}
	for ref, entrypoint := range map[string][]string{
		Pause:    {"/podbin", "pause"},
		Workload: {"/podbin", "workload", "/data"},
	} {
		img, err := image(content, entrypoint)
		if err != nil {
			return "", err
		}
		tag, err := name.NewTag(ref)
		if err != nil {
			return "", err
		}
		refs[tag] = img
	}
	out := filepath.Join(dir, "images.tar")
	f, err := os.Create(out)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := tarball.MultiRefWrite(refs, f); err != nil {
		return "", fmt.Errorf("write image tarball %s: %w", out, err)
	}
	return out, f.Close()
}

func image(podbin []byte, entrypoint []string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "podbin", Mode: 0o755, Size: int64(len(podbin)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(podbin); err != nil {
		return nil, err
	}
	// /data is where the workload's volume is mounted; /tmp for good measure.
	for _, d := range []string{"data/", "tmp/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o777, Typeflag: tar.TypeDir}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
	cfg.Config.Entrypoint = entrypoint
	cfg.Config.Labels = map[string]string{"io.skewtest.image": strings.Join(entrypoint, " ")}
	return mutate.ConfigFile(img, cfg)
}
