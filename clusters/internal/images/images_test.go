package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type layerFile struct {
	mode     int64
	typeflag byte
	content  []byte
}

func TestBuild(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	path, err := Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "images.tar") {
		t.Errorf("Build() = %s, want images.tar in %s", path, dir)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "podbin"))
	if err != nil {
		t.Fatalf("built podbin: %v", err)
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		t.Fatalf("podbin is not an ELF binary")
	}

	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, d := range m {
		tags = append(tags, d.RepoTags...)
	}
	slices.Sort(tags)
	if want := []string{Pause, Workload}; !slices.Equal(tags, want) {
		t.Errorf("tarball tags %q, want %q", tags, want)
	}

	tests := []struct {
		ref        string
		entrypoint []string
	}{
		{Pause, []string{"/podbin", "pause"}},
		{Workload, []string{"/podbin", "workload", "/data"}},
	}
	var layerDigests []string
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			if !strings.HasPrefix(tc.ref, "localhost/") {
				t.Errorf("image %s is not under localhost/: a runtime might try to pull it", tc.ref)
			}
			tag, err := name.NewTag(tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(path, &tag)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Config.Entrypoint, tc.entrypoint) {
				t.Errorf("Entrypoint %q, want %q", cfg.Config.Entrypoint, tc.entrypoint)
			}
			if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
				t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
			}
			if len(cfg.Config.Cmd) != 0 {
				t.Errorf("Cmd %q, want none", cfg.Config.Cmd)
			}

			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != 1 {
				t.Fatalf("%d layers, want 1", len(layers))
			}
			if len(cfg.RootFS.DiffIDs) != 1 {
				t.Errorf("config lists %d diff IDs, want 1", len(cfg.RootFS.DiffIDs))
			}
			d, err := layers[0].Digest()
			if err != nil {
				t.Fatal(err)
			}
			layerDigests = append(layerDigests, d.String())

			rc, err := layers[0].Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			files := map[string]layerFile{}
			tr := tar.NewReader(rc)
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				files[h.Name] = layerFile{mode: h.Mode, typeflag: h.Typeflag, content: b}
			}
			pb, ok := files["podbin"]
			if !ok {
				t.Fatalf("layer has no podbin; it holds %v", keys(files))
			}
			if pb.typeflag != tar.TypeReg || pb.mode != 0o755 {
				t.Errorf("podbin: type %q mode %o, want a regular file with mode 755", pb.typeflag, pb.mode)
			}
			if !bytes.Equal(pb.content, bin) {
				t.Errorf("podbin in the layer (%d bytes) differs from the built one (%d bytes)", len(pb.content), len(bin))
			}
			for _, d := range []string{"data/", "tmp/"} {
				if f, ok := files[d]; !ok || f.typeflag != tar.TypeDir {
					t.Errorf("layer has no directory %s (entrypoint mounts need it)", d)
				}
			}
		})
	}
	// Both images carry the same single layer.
	if len(layerDigests) == 2 && layerDigests[0] != layerDigests[1] {
		t.Errorf("layers differ: %v", layerDigests)
	}

	// A tag the tarball does not hold is not found.
	missing, err := name.NewTag("localhost/skewtest/other:v1")
	if err != nil {
		t.Fatal(err)
	}
	if img, err := tarball.ImageFromPath(path, &missing); err == nil {
		if _, err := img.ConfigFile(); err == nil {
			t.Error("tarball yields an image for a tag it does not hold")
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The busybox image holds the given busybox at /bin/busybox and a link for
// every program storage.BusyboxCommand runs, with /bin on PATH.
func TestBuildBusybox(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "busybox-in")
	content := []byte("\x7fELF not really busybox")
	if err := os.WriteFile(fake, content, 0o755); err != nil {
		t.Fatal(err)
	}
	const ref = "localhost/skewtest/busybox:test"
	path, err := BuildBusybox(filepath.Join(dir, "out"), fake, ref)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cfg.Config.Env, "PATH=/bin") || cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("config: env %q, platform %s/%s; want PATH=/bin, linux/%s", cfg.Config.Env, cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "bin/busybox" {
			b, _ := io.ReadAll(tr)
			if !bytes.Equal(b, content) || h.Mode != 0o755 {
				t.Errorf("bin/busybox: %d bytes mode %o, want the given file, mode 755", len(b), h.Mode)
			}
		}
		files[h.Name] = h
	}
	for _, prog := range []string{"sh", "sleep", "date", "mv", "cat"} {
		h, ok := files["bin/"+prog]
		if !ok || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("bin/%s: %+v; want a link to busybox (layer holds %v)", prog, h, keys(files))
		}
	}
	for _, d := range []string{"bin/busybox", "data/", "tmp/"} {
		if _, ok := files[d]; !ok {
			t.Errorf("layer lacks %s", d)
		}
	}
	if _, err := BuildBusybox(dir, filepath.Join(dir, "missing"), ref); err == nil {
		t.Error("BuildBusybox took a busybox that does not exist")
	}
}
