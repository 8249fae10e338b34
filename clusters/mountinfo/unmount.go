package mountinfo

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"syscall"
)

// UnmountUnder unmounts everything mounted at or below dir in this
// process's mount namespace: deepest and latest first, detaching what is
// busy, repeating for stacked mounts. It returns an error naming what
// stayed mounted.
func UnmountUnder(dir string) error { return unmount(dir, true) }

// UnmountBelow is UnmountUnder but for dir's own mounts: a directory that
// is a mount of its own (a bind of itself) stays mounted, so that paths
// through it still read as they did (a loop device's backing file).
func UnmountBelow(dir string) error { return unmount(dir, false) }

func unmount(dir string, self bool) error {
	var under []Mount
	for range 10 {
		mounts, err := ParseFile("/proc/self/mountinfo")
		if err != nil {
			return err
		}
		under = Under(mounts, dir)
		if !self {
			under = slices.DeleteFunc(under, func(m Mount) bool { return m.MountPoint == path.Clean(dir) })
		}
		if len(under) == 0 {
			return nil
		}
		// Later mounts over earlier ones: reverse table order, then depth.
		for i, j := 0, len(under)-1; i < j; i, j = i+1, j-1 {
			under[i], under[j] = under[j], under[i]
		}
		sort.SliceStable(under, func(i, j int) bool {
			return strings.Count(under[i].MountPoint, "/") > strings.Count(under[j].MountPoint, "/")
		})
		for _, m := range under {
			if err := syscall.Unmount(m.MountPoint, 0); err != nil {
				_ = syscall.Unmount(m.MountPoint, syscall.MNT_DETACH)
			}
		}
	}
	var still []string
	for _, m := range under {
		still = append(still, m.MountPoint)
	}
	return fmt.Errorf("still mounted under %s: %s", dir, strings.Join(still, ", "))
}
