package local

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// hostCNIDir is libcni's cache (results/<network>-<container>-<ifname>),
// where containerd's CRI keeps a result for every network of every pod
// sandbox, whatever its CNI config and IPAM directories are: the run's
// bridge network, and the loopback network ("cni-loopback-<id>-lo"). A DEL
// removes them, but a killed containerd never sends one, and the loopback
// ones were measured to stay even then (69 after a day of runs).
const hostCNIDir = "/var/lib/cni"

// hostContainerLogDir is where every kubelet, whatever its podLogsDir,
// links its containers' logs.
const hostContainerLogDir = "/var/log/containers"

// cacheEntry is what of a libcni cache file tells whose it is.
type cacheEntry struct {
	NetNS string `json:"netns"`
}

// removeCNIEntries removes every cache entry of libcni whose pod network
// namespace lies under runDir (containerd keeps them in its state
// directory there), and those named after the run's networks. It returns
// how many it removed.
func removeCNIEntries(cniDir, runDir string, networks []string) (int, error) {
	return removeCNIEntriesIf(cniDir, func(name string, e cacheEntry) bool {
		for _, n := range networks {
			if n != "" && strings.HasPrefix(name, n+"-") {
				return true
			}
		}
		return under(e.NetNS, runDir)
	})
}

// RemoveOrphanedCNIEntries removes libcni cache entries of runs under
// runRoot whose directories are gone: left by runs made before teardown
// removed every entry of its own. Entries of runs whose directories still
// exist (running, or kept) stay: their own Clean removes them.
func RemoveOrphanedCNIEntries(runRoot string) (int, error) {
	return removeOrphanedCNIEntries(hostCNIDir, runRoot)
}

func removeOrphanedCNIEntries(cniDir, runRoot string) (int, error) {
	return removeCNIEntriesIf(cniDir, func(_ string, e cacheEntry) bool {
		if !under(e.NetNS, runRoot) {
			return false
		}
		rel, _ := filepath.Rel(runRoot, e.NetNS)
		run := filepath.Join(runRoot, strings.SplitN(rel, string(filepath.Separator), 2)[0])
		_, err := os.Lstat(run)
		return errors.Is(err, os.ErrNotExist)
	})
}

func removeCNIEntriesIf(cniDir string, ours func(name string, e cacheEntry) bool) (int, error) {
	dir := filepath.Join(cniDir, "results")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, de := range entries {
		path := filepath.Join(dir, de.Name())
		var e cacheEntry
		if b, err := os.ReadFile(path); err == nil {
			_ = json.Unmarshal(b, &e)
		}
		if !ours(de.Name(), e) {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func under(path, dir string) bool {
	return path != "" && dir != "" && strings.HasPrefix(filepath.Clean(path), filepath.Clean(dir)+"/")
}

// removeEmptyDirs removes dir and the directories inside it if no file is
// left in any of them.
func removeEmptyDirs(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i]) // fails on a directory that is not empty
	}
}
