package dockerd

// This file names a daemon's own cgroup tree, finds the processes in it
// and removes it.

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
)

// cgroupParentFor returns the cgroup under which dir's daemon puts its
// containers: one of its own, so that Stop finds their processes and
// removes the cgroups.
func cgroupParentFor(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "/skewtest-dockerd-" + hex.EncodeToString(sum[:6])
}

// cgroupDirsOf are the directories of the daemon's cgroup parent in
// every cgroup hierarchy (one per v1 controller, and v2) where it exists.
func cgroupDirsOf(parent string) []string {
	hs, err := cgroups.Hierarchies()
	if err != nil {
		return nil
	}
	return cgroups.Dirs(hs, parent)
}

// cgroupProcs returns the live pids in the daemon's cgroups.
func cgroupProcs(parent string) []int {
	var pids []int
	for _, d := range cgroupDirsOf(parent) {
		for _, pid := range cgroups.Procs(d) {
			if !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// removeCgroups removes the daemon's cgroup trees, deepest first.
func removeCgroups(parent string) error { return cgroups.Remove(cgroupDirsOf(parent)) }
