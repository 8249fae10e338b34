package local

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// hostPodLogDir is where a kubelet before 1.30 writes its pods' container
// logs, whatever its --root-dir: the directory is compiled in
// (podLogsRootDirectory in pkg/kubelet/kuberuntime), and the podLogsDir
// field that moves it under the run directory came in 1.30. Host kubelets
// are refused (checkHostKubelet) and local runs hold the host lock, so
// what appears there during a run is the run's own.
const hostPodLogDir = "/var/log/pods"

// podLogsDirSince is the first kubelet minor that takes podLogsDir.
var podLogsDirSince = version.MajorMinor(1, 30)

// writesHostPodLogs tells whether kubelet v writes its pods' logs to
// hostPodLogDir instead of its podLogsDir.
func writesHostPodLogs(v *version.Version) bool {
	return v != nil && v.LessThan(podLogsDirSince)
}

// podLogEntries are the names in dir, for the state's record of what was
// there before the run's kubelets; nil when dir does not exist.
func podLogEntries(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// removeRunPodLogs removes the pod log directories the run's kubelets made
// in dir: those not in before, the names there when the run began. The
// kubelet's links in linkDir (/var/log/containers) into them go too, and
// dir itself when the run made it and nothing is left in it. An entry with
// a mount under it is left, and named in the error.
func removeRunPodLogs(dir string, before []string, dirMade bool, linkDir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if slices.Contains(before, e.Name()) || !isPodLogDirName(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		removeLinksInto(linkDir, path)
		if err := removeDirOfRun(path); err != nil {
			errs = append(errs, err)
		}
	}
	if dirMade {
		removeEmptyDirs(dir)
	}
	return errors.Join(errs...)
}

// isPodLogDirName tells whether name is the kubelet's pod log directory
// name, <namespace>_<pod>_<uid>: anything else in the directory is not a
// kubelet's, whenever it came.
func isPodLogDirName(name string) bool {
	parts := strings.Split(name, "_")
	return len(parts) == 3 && parts[0] != "" && parts[1] != "" && len(parts[2]) == 36 && strings.Count(parts[2], "-") == 4
}
