package dockerd

// This file names a daemon's own cgroup tree, finds the processes in it
// and removes it.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
)

// cgroupParentFor returns the cgroup under which dir's daemon puts its
// containers: one of its own, so that Stop finds their processes and
// removes the cgroups.
func cgroupParentFor(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "/skewtest-dockerd-" + hex.EncodeToString(sum[:6])
}

// cgroupRoots returns <hierarchy>/<parent> for every cgroup hierarchy
// mounted in this mount namespace (one per v1 controller, and v2).
func cgroupRoots(parent string) []string {
	if parent == "" || parent == "/" {
		return nil
	}
	hs, err := cgroups.Mounted("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	roots := make([]string, 0, len(hs))
	for _, h := range hs {
		roots = append(roots, filepath.Join(h.MountPoint, parent))
	}
	return roots
}

// cgroupDirs returns the cgroups at and below root, deepest first.
func cgroupDirs(root string) []string {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.SliceStable(dirs, func(i, j int) bool {
		return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/")
	})
	return dirs
}

// cgroupProcs returns the pids in the daemon's cgroups.
func cgroupProcs(parent string) []int {
	var pids []int
	for _, root := range cgroupRoots(parent) {
		for _, d := range cgroupDirs(root) {
			b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
		}
	}
	return pids
}

// removeCgroups removes the daemon's cgroup trees.
func removeCgroups(parent string) error {
	var left []string
	for _, root := range cgroupRoots(parent) {
		for try := 0; ; try++ {
			left = left[:0:0]
			for _, d := range cgroupDirs(root) {
				if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
					left = append(left, d)
				}
			}
			if len(left) == 0 || try == 20 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(left) > 0 {
			return fmt.Errorf("cannot remove cgroups %s", strings.Join(left, ", "))
		}
	}
	return nil
}
