package csidriver

import (
	"fmt"
	"path/filepath"

	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

// readMountInfo parses this process's mount table.
func readMountInfo() ([]mountinfo.Mount, error) {
	return mountinfo.ParseFile("/proc/self/mountinfo")
}

// canonical makes path absolute and clean and resolves symlinks where it can,
// because the mount table holds resolved paths.
func canonical(path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		p = filepath.Clean(path)
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// mountsAt returns the mount table entries whose mount point is exactly path
// (stacked mounts give more than one), in mount order.
func mountsAt(path string) ([]mountinfo.Mount, error) {
	mounts, err := readMountInfo()
	if err != nil {
		return nil, fmt.Errorf("reading mount table: %w", err)
	}
	p := canonical(path)
	var out []mountinfo.Mount
	for _, m := range mounts {
		if m.MountPoint == p {
			out = append(out, m)
		}
	}
	return out, nil
}

// isMountPoint reports whether path is exactly a mount point. It compares
// paths, not st_dev: a bind mount of the same filesystem has the same device.
func isMountPoint(path string) (bool, error) {
	ms, err := mountsAt(path)
	return len(ms) > 0, err
}
