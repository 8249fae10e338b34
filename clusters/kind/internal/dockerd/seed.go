package dockerd

// This file keeps a daemon's images for the next daemon: a seed is a
// data-root holding images only, which Stop writes when asked (KeepSeed)
// and Start copies into a new daemon's data-root before dockerd starts, so that an image is imported once, not on every start. The
// image layers' files (what a 700 MB node image unpacks to) are hard
// links, not copies: overlayfs only ever reads a lower layer, and the
// daemon writes its metadata by replacing files, never in place, so
// neither the daemon nor its containers change a file the seed shares.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec" // dockerd --version, before any daemon runs
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// storageDriver is the only graph driver whose layout a seed knows:
// the default on the ext4 and xfs hosts skewtest runs on.
const storageDriver = "overlay2"

// Version is dockerd's own version line (`dockerd --version`), which
// names the data-root layout a seed is in, for the key of one.
func Version(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, DockerdPath, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("dockerd: %s --version: %w%s", DockerdPath, err, stderrOf(err))
	}
	return strings.TrimSpace(string(out)), nil
}

// KeepSeed asks Stop to keep the daemon's images in dst, a seed for a
// later daemon's Config.Seed, once dockerd has stopped and before the
// data-root is removed: a running daemon's data-root is a mount of its
// own, which no hard link crosses. The seed is written under another name
// and renamed into place, so that it exists only whole; a dst that
// exists is left as it is. It must be on the file system of the daemon's
// directory. A seed that cannot be kept is logged, not an error: it is a
// cache.
func (d *Daemon) KeepSeed(dst string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.keepSeed = dst
}

// saveSeed writes into dst a data-root holding the images of the stopped
// daemon whose data-root is root, and nothing else. Every container must
// be gone (a container's layers are not an image's).
func saveSeed(ctx context.Context, root, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(root, "image", storageDriver)); err != nil {
		return fmt.Errorf("dockerd: seed: no %s image store in %s (seeds are made of %s only): %w", storageDriver, root, storageDriver, err)
	}
	if left, err := os.ReadDir(filepath.Join(root, "containers")); err == nil && len(left) > 0 {
		return fmt.Errorf("dockerd: seed: %s holds %d containers; a seed holds images only", root, len(left))
	}
	// Under the dockerd lock nobody else writes seeds: what an earlier,
	// killed saveSeed left is nobody's.
	stale, _ := filepath.Glob(dst + ".tmp-*")
	for _, s := range stale {
		_ = os.RemoveAll(s)
	}
	tmp := fmt.Sprintf("%s.tmp-%d", dst, os.Getpid())
	err := writeSeed(ctx, root, tmp)
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("dockerd: seed %s: %w", dst, err)
	}
	return nil
}

// writeSeed copies root's image store (image/overlay2: image configs,
// tags, the layer database) and the layers it names into seed.
func writeSeed(ctx context.Context, root, seed string) error {
	// The data-root, overlay2 and its l/ as the daemon made them, empty.
	for _, dir := range []string{".", storageDriver, filepath.Join(storageDriver, "l")} {
		fi, err := os.Stat(filepath.Join(root, dir))
		if err != nil {
			return err
		}
		if err := os.Mkdir(filepath.Join(seed, dir), fi.Mode().Perm()); err != nil {
			return err
		}
	}
	images := filepath.Join("image", storageDriver)
	if err := cloneTree(ctx, filepath.Join(root, images), filepath.Join(seed, images), nil); err != nil {
		return err
	}
	layers, err := seedLayers(filepath.Join(root, images))
	if err != nil {
		return err
	}
	if len(layers) == 0 {
		return errors.New("the daemon has no image layer")
	}
	for _, id := range layers {
		src := filepath.Join(root, storageDriver, id)
		if err := cloneTree(ctx, src, filepath.Join(seed, storageDriver, id), func(rel string) bool { return underDiff(rel) }); err != nil {
			return err
		}
		// overlay2 names each layer's diff by a short link in l/, which
		// its children's lower files list.
		short, err := os.ReadFile(filepath.Join(src, "link"))
		if err != nil {
			return err
		}
		if err := os.Symlink(filepath.Join("..", id, "diff"), filepath.Join(seed, storageDriver, "l", strings.TrimSpace(string(short)))); err != nil {
			return err
		}
	}
	return nil
}

// seedLayers are the overlay2 directories of every layer in an image
// store's layer database (each layer's cache-id).
func seedLayers(imageStore string) ([]string, error) {
	ids, err := filepath.Glob(filepath.Join(imageStore, "layerdb", "sha256", "*", "cache-id"))
	if err != nil {
		return nil, err
	}
	var layers []string
	for _, f := range ids {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		id := strings.TrimSpace(string(b))
		if id == "" || strings.ContainsAny(id, "/.") {
			return nil, fmt.Errorf("%s: not a layer's directory name: %q", f, id)
		}
		layers = append(layers, id)
	}
	slices.Sort(layers)
	return layers, nil
}

// underDiff says whether rel, relative to a layer's directory, is in the
// layer's files (what overlayfs mounts as a lower directory).
func underDiff(rel string) bool { return strings.HasPrefix(rel, "diff"+string(filepath.Separator)) }

// seedLayerFile says whether rel, relative to a seed, is one of a
// layer's files: overlay2/<id>/diff/...
func seedLayerFile(rel string) bool {
	layer, ok := strings.CutPrefix(rel, storageDriver+string(filepath.Separator))
	if !ok {
		return false
	}
	_, inLayer, ok := strings.Cut(layer, string(filepath.Separator))
	return ok && underDiff(inLayer)
}

// plantSeed makes dataRoot, which must not exist, a copy of seed: the
// layers' files hard-linked, the rest copied.
func plantSeed(ctx context.Context, seed, dataRoot string) error {
	if _, err := os.Lstat(dataRoot); err == nil {
		return fmt.Errorf("dockerd: seed: %s exists already", dataRoot)
	}
	if err := cloneTree(ctx, seed, dataRoot, seedLayerFile); err != nil {
		return fmt.Errorf("dockerd: plant seed %s in %s: %w", seed, dataRoot, err)
	}
	return nil
}

// keepSeed writes the seed KeepSeed asked for, from the stopped daemon's
// data-root, and logs what came of it.
func keepSeed(ctx context.Context, log *slog.Logger, root, dst string) {
	t0 := time.Now()
	if err := saveSeed(ctx, root, dst); err != nil {
		log.Warn("the daemon's images are not kept for the next daemon", "seed", dst, "err", err)
		return
	}
	log.Info("the daemon's images kept for the next daemon", "seed", dst, "took", time.Since(t0).Round(time.Millisecond))
}

// plant starts dataRoot from seed if there is one; a seed that cannot be
// planted is logged and the daemon starts empty, as without one.
func (d *Daemon) plant(ctx context.Context, seed, dataRoot string) {
	if _, err := os.Stat(seed); err != nil {
		d.log.Info("no seed of images yet: the daemon starts empty", "seed", seed)
		return
	}
	t0 := time.Now()
	if err := plantSeed(ctx, seed, dataRoot); err != nil {
		d.log.Warn("the seed of images could not be planted: the daemon starts empty", "seed", seed, "err", err)
		_ = os.RemoveAll(dataRoot)
		return
	}
	d.log.Info("data-root planted from the seed of images", "seed", seed, "took", time.Since(t0).Round(time.Millisecond))
}

// cloneTree makes dst a copy of the tree src: directories with their
// mode, owner, extended attributes (overlayfs keeps an opaque directory's
// mark in one) and times; symlinks; files that link(rel) says to share as
// hard links, any others copied with their mode, owner and times.
func cloneTree(ctx context.Context, src, dst string, link func(rel string) bool) error {
	type dir struct {
		path string
		st   *syscall.Stat_t
	}
	var dirs []dir
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	err := filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no stat", path)
		}
		switch {
		case e.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil && !(rel == "." && errors.Is(err, fs.ErrExist)) {
				return err
			}
			if err := copyXattrs(path, target); err != nil {
				return err
			}
			dirs = append(dirs, dir{target, st})
			return nil
		case link != nil && link(rel):
			return os.Link(path, target)
		case fi.Mode()&fs.ModeSymlink != 0:
			to, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.Symlink(to, target); err != nil {
				return err
			}
			return os.Lchown(target, int(st.Uid), int(st.Gid))
		case fi.Mode().IsRegular():
			return copyFile(path, target, fi, st)
		}
		return fmt.Errorf("%s: a %s, which is neither copied nor linked here", path, fi.Mode().Type())
	})
	if err != nil {
		return err
	}
	// Deepest first, so that making a child does not move its parent's
	// times again.
	for _, d := range slices.Backward(dirs) {
		if err := os.Lchown(d.path, int(d.st.Uid), int(d.st.Gid)); err != nil {
			return err
		}
		if err := os.Chmod(d.path, fs.FileMode(d.st.Mode&0o777)|modeBits(d.st.Mode)); err != nil {
			return err
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, d.path, []unix.Timespec{unix.Timespec(d.st.Atim), unix.Timespec(d.st.Mtim)}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}

// modeBits are the setuid, setgid and sticky bits of a stat mode as Go's
// file mode has them (os.Chmod takes those, not the raw bits).
func modeBits(m uint32) fs.FileMode {
	var out fs.FileMode
	if m&syscall.S_ISUID != 0 {
		out |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		out |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		out |= fs.ModeSticky
	}
	return out
}

func copyFile(src, dst string, fi fs.FileInfo, st *syscall.Stat_t) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := os.Chmod(dst, fi.Mode().Perm()|modeBits(st.Mode)); err != nil {
		return err
	}
	return os.Chtimes(dst, time.Unix(st.Atim.Unix()), time.Unix(st.Mtim.Unix()))
}

// copyXattrs gives dst the extended attributes of src.
func copyXattrs(src, dst string) error {
	size, err := unix.Llistxattr(src, nil)
	if err != nil || size == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		return err
	}
	buf := make([]byte, size)
	if size, err = unix.Llistxattr(src, buf); err != nil {
		return err
	}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:size]), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		vsize, err := unix.Lgetxattr(src, name, nil)
		if err != nil {
			return err
		}
		val := make([]byte, vsize)
		if vsize, err = unix.Lgetxattr(src, name, val); err != nil {
			return err
		}
		if err := unix.Lsetxattr(dst, name, val[:vsize], 0); err != nil {
			return fmt.Errorf("%s: set %s: %w", dst, name, err)
		}
	}
	return nil
}
