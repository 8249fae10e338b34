package nodes

import "strings"

// KubeletCheckpoints are the state files a kubelet keeps under its
// --root-dir and reads back at its next start, relative to that root. Each
// is written by one version and read by whatever version starts next, and
// a format a version does not know makes it refuse to start ("checkpoint
// is corrupted"): a downgrade across a format change meets it. Providers
// that swap kubelets remove them when a kubelet refuses them (local), or
// keep them before the first swap and put them back with the node's own
// kubelet (existing).
//
// The device manager's checkpoint is compiled into
// /var/lib/kubelet/device-plugins whatever the root: it is listed here for
// the default root only.
var KubeletCheckpoints = []string{
	"cpu_manager_state",
	"memory_manager_state",
	"dra_manager_state",
	// In-place pod resize: the status manager's (1.27 to 1.32), then the
	// allocation manager's.
	"pod_status_manager_state",
	"allocated_pods_state",
	"actuated_pods_state",
	"device-plugins/kubelet_internal_checkpoint",
}

// FindRefusedCheckpoint looks in a kubelet's log for its refusal of a
// checkpoint file (k8s.io/kubernetes/pkg/kubelet/checkpointmanager's
// "checkpoint is corrupted"): the line, ok false when there is none.
func FindRefusedCheckpoint(log string) (line string, ok bool) {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "checkpoint is corrupt") {
			return strings.TrimSpace(l), true
		}
	}
	return "", false
}
