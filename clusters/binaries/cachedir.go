package binaries

// This file holds the check that root runs nothing from a cache another
// user could write.

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/skewtest/clusters/internal/privdir"
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
	at, problem, err := privdir.PathProblem(abs)
	switch {
	case err != nil:
		return badSource("cache %s: %w", abs, err)
	case at == "":
		return nil
	}
	// Above the cache is someone's home, say: not root's to take.
	fix := "give root a cache of its own (SKEWTEST_CACHE=/var/cache/skewtest)"
	if fi, err := os.Lstat(abs); at == abs && err == nil && fi.Mode()&os.ModeSymlink == 0 {
		fix += fmt.Sprintf(" or make this one root's (chown -R root:root %s && chmod -R go-w %s)", abs, abs)
	}
	return badSource("the binary cache %s is not root's alone: %s is %s, so another user could replace the kubelets, "+
		"containerd and kops that root runs from it; %s", abs, at, problem, fix)
}
