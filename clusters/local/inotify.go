package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/skewtest/clusters/internal/sysctl"
)

// inotifyInstancesKey bounds the inotify instances one user holds on the
// host: every node's kubelet (cAdvisor, its certificate and plugin
// watchers) and containerd take some, all root's, and at the kernel's
// default of 128 a cluster of sixteen nodes used them up: a kubelet exited
// at start with "Failed to start cAdvisor ... inotify_init: too many open
// files".
const inotifyInstancesKey = "fs.inotify.max_user_instances"

// Inotify instances a run takes, measured on a v1.37.2 cluster: 6 per
// kubelet and 2 per containerd, 8 for the control plane; headroom for
// what starts beside them.
const (
	inotifyPerNode      = 8
	inotifyControlPlane = 8
	inotifyHeadroom     = 32
)

// ensureInotifyInstances raises fs.inotify.max_user_instances to the run's
// value (sysctl.RunValues) when what this host's processes hold now and
// what a cluster of nodes nodes will take do not fit under it. The state
// recorded the setting before (sysctl.Keys), so teardown writes it back
// while it still holds the run's value. It returns a note for the log, ""
// when nothing changed.
func ensureInotifyInstances(nodes int) (string, error) {
	cur := sysctl.Read([]string{inotifyInstancesKey})[inotifyInstancesKey]
	limit, err := strconv.Atoi(cur)
	if err != nil {
		return "", nil // no such setting here: nothing to fit under
	}
	run, _ := strconv.Atoi(sysctl.RunValues[inotifyInstancesKey])
	need, raise, err := inotifyFit(nodes, inotifyInstancesHeld(), limit, run)
	if err != nil || !raise {
		return "", err
	}
	if err := sysctl.Set(inotifyInstancesKey, strconv.Itoa(run)); err != nil {
		return "", fmt.Errorf("local provider: %d nodes need about %d inotify instances and %s is %d: raising it to %d: %w", nodes, need, inotifyInstancesKey, limit, run, err)
	}
	return fmt.Sprintf("%s raised from %d to %d for %d nodes (about %d needed); teardown writes it back", inotifyInstancesKey, limit, run, nodes, need), nil
}

// inotifyFit is how many inotify instances a cluster of nodes needs while
// the host's processes hold held, and whether limit must be raised to
// run for it; an error when even run is too few.
func inotifyFit(nodes, held, limit, run int) (need int, raise bool, err error) {
	need = held + nodes*inotifyPerNode + inotifyControlPlane + inotifyHeadroom
	switch {
	case need <= limit:
		return need, false, nil
	case need > run:
		return need, false, fmt.Errorf("local provider: %d nodes need about %d inotify instances (%s), more than skewtest raises it to (%d); use fewer nodes", nodes, need, inotifyInstancesKey, run)
	}
	return need, true, nil
}

// inotifyInstancesHeld counts the inotify instances this host's processes
// hold: their descriptors on an inotify instance.
func inotifyInstancesHeld() int {
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && strings.HasSuffix(target, "inotify") {
			n++
		}
	}
	return n
}
