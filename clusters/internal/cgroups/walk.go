package cgroups

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

// Hierarchy is one mounted cgroup hierarchy: a v1 controller's (or a named
// v1 hierarchy's) or the unified v2 one.
type Hierarchy struct {
	// MountPoint is where the hierarchy's root is mounted, e.g.
	// /sys/fs/cgroup/memory or /sys/fs/cgroup/unified.
	MountPoint string
	// Version is 1 or 2.
	Version int
}

// Mounted returns every cgroup hierarchy mounted at its root in
// mountsFile (normally /proc/self/mountinfo), once each: on hybrid hosts
// the v1 controllers and the v2 hierarchy, on unified hosts only v2.
func Mounted(mountsFile string) ([]Hierarchy, error) {
	mounts, err := mountinfo.ParseFile(mountsFile)
	if err != nil {
		return nil, err
	}
	return mounted(mounts), nil
}

// mounted picks the cgroup hierarchies out of mounts. A hierarchy mounted
// twice counts once (the first mount point); bind mounts of a hierarchy's
// subtree (a container's view) are not hierarchies.
func mounted(mounts []mountinfo.Mount) []Hierarchy {
	var out []Hierarchy
	seen := map[string]bool{}
	for _, m := range mounts {
		var v int
		switch m.FSType {
		case "cgroup":
			v = 1
		case "cgroup2":
			v = 2
		default:
			continue
		}
		// v1 hierarchies are told apart by their controllers (the super
		// options), the one v2 hierarchy by its type.
		key := m.FSType + " " + m.Source
		if v == 1 {
			key = m.FSType + " " + m.SuperOptions
		}
		if m.Root != "/" || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, Hierarchy{MountPoint: m.MountPoint, Version: v})
	}
	return out
}

// Owned walks every hierarchy and returns the cgroups whose directory name
// starts with prefix, as <mount point>/<path>, sorted. A matching cgroup's
// descendants (its kubepods, its containers) are not listed: they go with
// it. Any depth counts, so a cgroup placed below a systemd slice is found
// as well as one at a hierarchy's top.
func Owned(hierarchies []Hierarchy, prefix string) []string {
	var out []string
	for _, h := range hierarchies {
		_ = filepath.WalkDir(h.MountPoint, func(path string, e os.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				// A cgroup removed during the walk is gone: not an error.
				return nil
			}
			if path != h.MountPoint && strings.HasPrefix(e.Name(), prefix) {
				out = append(out, path)
				return filepath.SkipDir
			}
			return nil
		})
	}
	sort.Strings(out)
	return out
}
