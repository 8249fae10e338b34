package binaries

// This file holds the check that root runs nothing from a cache another
// user could write.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// CheckCacheDir refuses, for a caller running as root, a cache that another
// user could write into or swap: root runs the kubelets, containerd, the
// runtime shim and kops from it, and the sha256 recorded beside each
// binary proves nothing against whoever can write both. Every directory
// from the cache up to / must be root's and writable by root alone, but
// for sticky ones (/tmp), where nobody else may rename what is root's. A
// missing cache is checked from its nearest existing directory (the run
// makes the rest, as root's). It is nil for other callers: what they run,
// they run as themselves. The error is ErrBadSource, naming the directory
// and the fix.
func CheckCacheDir(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return badSource("cache %s: %w", dir, err)
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return badSource("cache %s: %w", abs, err)
		default:
			if problem := othersCanWrite(p, fi); problem != "" {
				// Above the cache is someone's home, say: not root's to take.
				fix := "give root a cache of its own (SKEWTEST_CACHE=/var/cache/skewtest)"
				if p == abs && fi.Mode()&os.ModeSymlink == 0 {
					fix += fmt.Sprintf(" or make this one root's (chown -R root:root %s && chmod -R go-w %s)", abs, abs)
				}
				return badSource("the binary cache %s is not root's alone: %s is %s, so another user could replace the kubelets, "+
					"containerd and kops that root runs from it; %s", abs, p, problem, fix)
			}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// othersCanWrite says how users other than root could change what p
// holds, or "" when they cannot.
func othersCanWrite(p string, fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		return "of an unknown owner"
	case st.Uid != 0:
		return fmt.Sprintf("owned by uid %d", st.Uid)
	case fi.Mode()&os.ModeSymlink != 0:
		// A link of root's in a directory of root's: where it points is
		// checked too, as the path goes on through it (below).
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "a symbolic link that does not resolve"
		}
		if err := CheckCacheDir(target); err != nil {
			return "a symbolic link to " + target + ", which is not root's alone"
		}
		return ""
	case fi.IsDir() && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0:
		return fmt.Sprintf("writable by others (mode %#o)", fi.Mode().Perm())
	}
	return ""
}
