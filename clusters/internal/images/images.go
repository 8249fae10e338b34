// Package images builds the container images skewtest's pods use from
// podbin, a program of this module (package helpers gives it), so that no
// registry is needed: each image is a single static binary, written as a
// docker-archive tarball that `ctr images import` (local provider) or
// `kind load image-archive` takes.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"sigs.k8s.io/skewtest/clusters/internal/helpers"
)

// Names of the images; localhost/ so that nothing ever tries a registry.
const (
	Pause    = "localhost/skewtest/pause:v1"
	Workload = "localhost/skewtest/workload:v1"
	// CSIDriver runs skewtest's CSI node plugin as a DaemonSet (kind).
	CSIDriver = "localhost/skewtest/csi-driver:v1"
)

// Build writes podbin (helpers.Podbin) and one tarball holding both
// images into dir. It returns the tarball's path.
func Build(ctx context.Context, dir string) (string, error) {
	return build(ctx, dir, helpers.Podbin, "images.tar", map[string][]string{
		Pause:    {"/podbin", "pause"},
		Workload: {"/podbin", "workload", "/data"},
	})
}

// BuildCSIDriver writes the CSI driver's image (CSIDriver) as a tarball
// into dir and returns its path.
func BuildCSIDriver(ctx context.Context, dir string) (string, error) {
	return build(ctx, dir, helpers.CSIDriver, "csi-driver.tar", map[string][]string{
		CSIDriver: {"/" + helpers.CSIDriver.Name},
	})
}

// build writes the helper program prog into dir and images holding only
// it (as /<its name>), one per reference, into one tarball.
func build(ctx context.Context, dir string, prog helpers.Program, tarName string, entrypoints map[string][]string) (string, error) {
	bins, err := helpers.Write(ctx, dir, prog)
	if err != nil {
		return "", err
	}
	binName := prog.Name
	content, err := os.ReadFile(bins[binName])
	if err != nil {
		return "", err
	}
	refs := map[name.Reference]v1.Image{}
	for ref, entrypoint := range entrypoints {
		img, err := image(binName, content, entrypoint)
		if err != nil {
			return "", err
		}
		tag, err := name.NewTag(ref)
		if err != nil {
			return "", err
		}
		refs[tag] = img
	}
	out := filepath.Join(dir, tarName)
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

func image(binName string, bin []byte, entrypoint []string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: binName, Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
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
	return FromLayers([]v1.Layer{layer}, func(c *v1.Config) {
		c.Entrypoint = entrypoint
		c.Labels = map[string]string{"io.skewtest.image": strings.Join(entrypoint, " ")}
	})
}

// FromLayers makes a linux image of this machine's architecture (where
// skewtest's images run) from layers, with its runtime config set by edit.
func FromLayers(layers []v1.Layer, edit func(*v1.Config)) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
	edit(&cfg.Config)
	return mutate.ConfigFile(img, cfg)
}

// busyboxApplets are the programs storage.BusyboxCommand runs, as links to
// busybox in the image's /bin.
var busyboxApplets = []string{"sh", "cat", "date", "mv", "sleep"}

// BuildBusybox writes an image, ref, holding only a static busybox (as
// /bin/busybox, with links for the programs storage.BusyboxCommand needs)
// into a tarball in dir, and returns its path: the stock workload image
// of an existing cluster, for a cluster with no registry to pull it from
// (make test-hosts' kops-style node).
func BuildBusybox(dir, busybox, ref string) (string, error) {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdrs := []*tar.Header{
		{Name: "bin/", Mode: 0o755, Typeflag: tar.TypeDir},
		{Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg},
	}
	for _, a := range busyboxApplets {
		hdrs = append(hdrs, &tar.Header{Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, Typeflag: tar.TypeSymlink})
	}
	hdrs = append(hdrs, &tar.Header{Name: "data/", Mode: 0o777, Typeflag: tar.TypeDir}, &tar.Header{Name: "tmp/", Mode: 0o777, Typeflag: tar.TypeDir})
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			return "", err
		}
		if h.Name == "bin/busybox" {
			if _, err := tw.Write(bin); err != nil {
				return "", err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return "", err
	}
	img, err := FromLayers([]v1.Layer{layer}, func(c *v1.Config) {
		c.Env = []string{"PATH=/bin"}
		c.Entrypoint = []string{"/bin/sh"}
	})
	if err != nil {
		return "", err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "busybox.tar")
	f, err := os.Create(out)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := tarball.Write(tag, img, f); err != nil {
		return "", fmt.Errorf("write image tarball %s: %w", out, err)
	}
	return out, f.Close()
}
