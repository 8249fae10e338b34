package cgroups

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

// Hierarchies are the mount points of every cgroup hierarchy, v1 and v2,
// mounted under /sys/fs/cgroup, read from /proc/self/mountinfo: on a
// unified host /sys/fs/cgroup alone; on a hybrid host each v1 controller's
// directory and /sys/fs/cgroup/unified.
func Hierarchies() ([]string, error) {
	mounts, err := mountinfo.ParseFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return hierarchiesOf(mounts, Mount), nil
}

// hierarchiesOf is the mount points of the hierarchies (see mounted)
// mounted under top.
func hierarchiesOf(mounts []mountinfo.Mount, top string) []string {
	var out []string
	for _, h := range mounted(mounts) {
		if mountinfo.IsUnder(h.MountPoint, top) {
			out = append(out, h.MountPoint)
		}
	}
	return out
}

// Dirs are the directories of the cgroup rel (e.g. /skewtest-1a2b) that
// exist in hierarchies.
func Dirs(hierarchies []string, rel string) []string {
	if rel == "" || rel == "/" {
		// rel names the top of every hierarchy: the whole host.
		return nil
	}
	var dirs []string
	for _, h := range hierarchies {
		d := filepath.Join(h, rel)
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// MakeV1Root creates the cgroup rel in every v1 hierarchy and in a hybrid
// host's cgroup2 (the kubelet's cgroupfs driver refuses a cgroupRoot
// missing from one). A v1 cpuset child starts with no CPUs and no memory
// nodes, where no process can run, so each new one gets its parent's.
func MakeV1Root(hierarchies []string, rel string) error {
	for _, h := range hierarchies {
		d := h
		for _, part := range splitRel(rel) {
			d = filepath.Join(d, part)
			if err := os.Mkdir(d, 0o755); errors.Is(err, fs.ErrExist) {
				continue
			} else if err != nil {
				return &Error{Op: "create", Path: d, Err: err}
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if b, err := os.ReadFile(filepath.Join(filepath.Dir(d), f)); err == nil {
					if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
						return &Error{Op: "write " + f + " of", Path: d, Err: err}
					}
				}
			}
		}
	}
	return nil
}

// V2 is this host's cgroup2 hierarchy: /sys/fs/cgroup on a unified host,
// /sys/fs/cgroup/unified (where no controller is) on a hybrid one; false
// on a legacy host.
func V2() (Tree, bool) {
	switch m, _ := DetectMode(); m {
	case Unified:
		return Tree{Dir: Mount}, true
	case Hybrid:
		return Tree{Dir: filepath.Join(Mount, "unified")}, true
	}
	return Tree{}, false
}
