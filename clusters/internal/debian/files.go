package debian

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec" // tar on this host, packing an image before any node exists
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/mountinfo"
	"sigs.k8s.io/skewtest/internal/lines"
)

// tarFlags keep owners, permissions, hard links, xattrs (file capabilities)
// and ACLs exactly.
var tarFlags = []string{"--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls"}

// WriteRootfsTar writes root as an uncompressed tar (entries "./...") at
// out, through a temporary name.
func WriteRootfsTar(ctx context.Context, root, out string) error {
	part := out + ".part"
	args := append([]string{"-C", root, "-cf", part}, tarFlags...)
	args = append(args, ".")
	if o, err := exec.CommandContext(ctx, "tar", args...).CombinedOutput(); err != nil {
		os.Remove(part)
		return fmt.Errorf("tar %s: %w\n%s", root, err, lines.Last(string(o), 10))
	}
	return os.Rename(part, out)
}

// Untar unpacks tarball into dir (made if needed), keeping owners; with
// members, only those.
func Untar(ctx context.Context, tarball, dir string, members ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := append([]string{"-C", dir, "-xpf", tarball, "--same-owner"}, tarFlags...)
	args = append(args, members...)
	if o, err := exec.CommandContext(ctx, "tar", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("untar %s: %w\n%s", tarball, err, lines.Last(string(o), 10))
	}
	return nil
}

// UnmountUnder unmounts everything at or below dir, best effort: it runs
// on cleanup paths whose own error matters more.
func UnmountUnder(dir string) {
	if abs, err := filepath.Abs(dir); err == nil {
		_ = mountinfo.UnmountUnder(abs)
	}
}

// LockFile takes an exclusive flock on path, so that two builds of the
// same thing do not race; it gives up when ctx ends. The returned func
// releases it.
func LockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another build holding %s: %w", path, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// RemoveStale removes the temporary directories matching pattern, after
// unmounting anything left mounted below them. Call it under the lock
// that the builds making them hold: then they are nobody's.
func RemoveStale(pattern string) {
	matches, _ := filepath.Glob(pattern)
	for _, m := range matches {
		UnmountUnder(m)
		os.RemoveAll(m)
	}
}
