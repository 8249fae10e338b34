package dockerd

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeDataRoot lays out what a dockerd with one image of one layer, and
// one container, keeps in its data-root (overlay2), as far as a seed
// cares: the image store, the layer's directory and short link, and the
// container's layer, which is no image's.
func fakeDataRoot(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "data")
	write := func(rel, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("image/overlay2/repositories.json", `{"Repositories":{}}`, 0o600)
	write("image/overlay2/imagedb/content/sha256/abc", `{"rootfs":{}}`, 0o600)
	write("image/overlay2/layerdb/sha256/chain1/cache-id", "layer1", 0o600)
	write("image/overlay2/layerdb/sha256/chain1/diff", "sha256:d1", 0o600)
	write("overlay2/layer1/link", "SHORT1", 0o644)
	write("overlay2/layer1/diff/usr/bin/tool", "binary", 0o755)
	write("overlay2/layer1/diff/etc/passwd", "root:x:0:0", 0o644)
	write("overlay2/container1/diff/var/log/x", "a container's", 0o644)
	write("overlay2/container1/link", "SHORT2", 0o644)
	write("containers/c1/config.v2.json", "{}", 0o600)
	for _, l := range []struct{ short, id string }{{"SHORT1", "layer1"}, {"SHORT2", "container1"}} {
		if err := os.MkdirAll(filepath.Join(root, "overlay2", "l"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../"+l.id+"/diff", filepath.Join(root, "overlay2", "l", l.short)); err != nil {
			t.Fatal(err)
		}
	}
	diff := filepath.Join(root, "overlay2", "layer1", "diff")
	if err := os.Symlink("tool", filepath.Join(diff, "usr", "bin", "alias")); err != nil {
		t.Fatal(err)
	}
	// A setgid, sticky directory with an extended attribute (overlayfs
	// marks an opaque directory with one; user.* works without root).
	tmp := filepath.Join(diff, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o1777|fs.ModeSetgid|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(tmp, "user.skewtest", []byte("y"), 0); err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			t.Skipf("no extended attributes on %s", tmp)
		}
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(diff, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	return root
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// A seed holds the image store and the image's layers, not a container's;
// planted, it is the same tree, its layer files shared with the seed, and
// nothing written in the planted data-root's own files reaches the seed.
func TestSeedWriteAndPlant(t *testing.T) {
	ctx := context.Background()
	root := fakeDataRoot(t)
	seed := filepath.Join(t.TempDir(), "seed")
	if err := writeSeed(ctx, root, seed); err != nil {
		t.Fatalf("writeSeed: %v", err)
	}
	for _, rel := range []string{"overlay2/container1", "overlay2/l/SHORT2", "containers"} {
		if _, err := os.Lstat(filepath.Join(seed, rel)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the seed has %s (%v), which is a container's, not an image's", rel, err)
		}
	}
	if to, err := os.Readlink(filepath.Join(seed, "overlay2", "l", "SHORT1")); err != nil || to != "../layer1/diff" {
		t.Errorf("the seed's short link of layer1: %q, %v", to, err)
	}

	planted := filepath.Join(t.TempDir(), "data")
	if err := plantSeed(ctx, seed, planted); err != nil {
		t.Fatalf("plantSeed: %v", err)
	}
	if err := plantSeed(ctx, seed, planted); err == nil {
		t.Errorf("plantSeed over an existing data-root: no error")
	}
	var seedFiles, plantedFiles []string
	for dir, out := range map[string]*[]string{seed: &seedFiles, planted: &plantedFiles} {
		_ = filepath.WalkDir(dir, func(p string, _ fs.DirEntry, _ error) error {
			rel, _ := filepath.Rel(dir, p)
			*out = append(*out, rel)
			return nil
		})
	}
	if !slices.Equal(seedFiles, plantedFiles) {
		t.Errorf("planted tree differs from the seed:\nseed    %v\nplanted %v", seedFiles, plantedFiles)
	}
	for _, rel := range seedFiles {
		s, p := filepath.Join(seed, rel), filepath.Join(planted, rel)
		sfi, _ := os.Lstat(s)
		pfi, _ := os.Lstat(p)
		if sfi.Mode() != pfi.Mode() {
			t.Errorf("%s: mode %v planted, %v in the seed", rel, pfi.Mode(), sfi.Mode())
		}
		if !sfi.IsDir() {
			shared := inode(t, s) == inode(t, p)
			if shared != seedLayerFile(rel) {
				t.Errorf("%s: shared with the seed %v, want %v (only a layer's files are hard links)", rel, shared, seedLayerFile(rel))
			}
		}
	}
	tmp := filepath.Join(planted, "overlay2", "layer1", "diff", "tmp")
	v := make([]byte, 8)
	if n, err := unix.Lgetxattr(tmp, "user.skewtest", v); err != nil || string(v[:n]) != "y" {
		t.Errorf("the planted directory lost its extended attribute: %q, %v", v[:max(n, 0)], err)
	}
	// The daemon replaces its metadata files; a copy is the planted
	// data-root's own.
	repos := filepath.Join(planted, "image", "overlay2", "repositories.json")
	if err := os.WriteFile(repos, []byte("changed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(seed, "image", "overlay2", "repositories.json")); string(b) != `{"Repositories":{}}` {
		t.Errorf("a write to the planted data-root changed the seed: %q", b)
	}
	// Removing the planted data-root, as a daemon's teardown does, leaves
	// the seed whole.
	if err := os.RemoveAll(planted); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(seed, "overlay2", "layer1", "diff", "usr", "bin", "tool")); err != nil || string(b) != "binary" {
		t.Errorf("the seed's layer after the planted data-root was removed: %q, %v", b, err)
	}
}

func TestSeedLayerFile(t *testing.T) {
	for rel, want := range map[string]bool{
		"overlay2/abc/diff/usr/bin/x": true,
		"overlay2/abc/diff/x":         true,
		"overlay2/abc/diff":           false,
		"overlay2/abc/link":           false,
		"overlay2/abc/lower":          false,
		"overlay2/l/SHORT":            false,
		"image/overlay2/abc/diff/x":   false,
		"overlay2":                    false,
	} {
		if got := seedLayerFile(rel); got != want {
			t.Errorf("seedLayerFile(%q) = %v, want %v", rel, got, want)
		}
	}
}

// writeSeed refuses layer IDs that would reach outside overlay2.
func TestSeedLayersRefusesBadIDs(t *testing.T) {
	store := t.TempDir()
	p := filepath.Join(store, "layerdb", "sha256", "c", "cache-id")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("../../etc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := seedLayers(store); err == nil {
		t.Errorf("seedLayers took a layer ID with a slash")
	}
}

// saveSeed keeps a stopped daemon's images only when no container is
// left, replaces a killed save's leftovers, and leaves a seed that is
// there as it is.
func TestSaveSeed(t *testing.T) {
	ctx := context.Background()
	root := fakeDataRoot(t)
	dst := filepath.Join(t.TempDir(), "seed")
	if err := saveSeed(ctx, root, dst); err == nil || !strings.Contains(err.Error(), "1 containers") {
		t.Errorf("saveSeed with a container left: %v, want a refusal", err)
	}
	if _, err := os.Lstat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused saveSeed left %s (%v)", dst, err)
	}
	if err := os.RemoveAll(filepath.Join(root, "containers", "c1")); err != nil {
		t.Fatal(err)
	}
	stale := dst + ".tmp-1"
	if err := os.MkdirAll(filepath.Join(stale, "half"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := saveSeed(ctx, root, dst); err != nil {
		t.Fatalf("saveSeed: %v", err)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a killed save's %s is left (%v)", stale, err)
	}
	left, _ := filepath.Glob(dst + ".tmp-*")
	if len(left) > 0 {
		t.Errorf("saveSeed left %v", left)
	}
	marker := filepath.Join(dst, "image", "overlay2", "repositories.json")
	if err := os.WriteFile(marker, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := saveSeed(ctx, root, dst); err != nil {
		t.Fatalf("saveSeed over an existing seed: %v", err)
	}
	if b, _ := os.ReadFile(marker); string(b) != "kept" {
		t.Errorf("saveSeed rewrote an existing seed")
	}
	if err := saveSeed(ctx, t.TempDir(), filepath.Join(t.TempDir(), "s")); err == nil {
		t.Errorf("saveSeed of a data-root with no overlay2 image store: no error")
	}
}
