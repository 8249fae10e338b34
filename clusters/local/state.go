package local

import (
	"encoding/json"
	"errors"
	"os"

	"sigs.k8s.io/skewtest/clusters/internal/statefile"
)

// state is what teardown needs to know about a run beyond what it can find
// under the run directory; it is written before the thing it describes is
// made, so a run killed half-way can still be cleaned by `skewtest clean`.
type state struct {
	// Nodes are the cluster's nodes in order: node i is laid out by
	// layoutOf(runDir, i).
	Nodes []nodeState `json:"nodes"`
	// IPTablesBefore lists "iptables|table|chain" that existed before the
	// kubelet ran; teardown removes the KUBE-* chains that did not.
	IPTablesBefore []string `json:"iptablesBefore"`
	// IPTablesRecorded is set once IPTablesBefore was taken (it may be
	// empty); without it teardown leaves iptables alone.
	IPTablesRecorded bool `json:"iptablesRecorded"`
	// ContainerdRunDirExisted tells whether /run/containerd existed before
	// the run (shims put their sockets in /run/containerd/s). Unset,
	// teardown removes the directory, but only if nothing but the run's
	// dead leftovers is in it (containerdRunDirInUse).
	ContainerdRunDirExisted bool `json:"containerdRunDirExisted"`
	// BootID is the kernel's boot ID when the state was written: after a
	// reboot nothing in /run is the run's. Empty in older state files.
	BootID string `json:"bootID,omitempty"`
	// HostKubeletDirMade is set when /var/lib/kubelet did not exist before
	// the run, and DevicePluginDirMade when /var/lib/kubelet/device-plugins
	// did not: the run makes that directory, over which each kubelet's
	// mount namespace binds its node's own (mountns.go), and teardown
	// removes the outermost of the two it made. Unset (also in older state
	// files), teardown leaves them alone.
	HostKubeletDirMade  bool `json:"hostKubeletDirMade"`
	DevicePluginDirMade bool `json:"devicePluginDirMade,omitempty"`
	// Sysctls are the kernel settings the kubelets and the CNI bridge
	// change (sysctl.Keys), as they were before the run; teardown writes
	// back every one that differs. Empty (older state files), teardown
	// leaves them alone.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// CNIDirMade is set when /var/lib/cni did not exist before the run:
	// teardown then removes it once it holds nothing.
	CNIDirMade bool `json:"cniDirMade,omitempty"`
	// ContainerLogDirMade is set when /var/log/containers, where every
	// kubelet links its containers' logs, did not exist before the run.
	ContainerLogDirMade bool `json:"containerLogDirMade,omitempty"`
	// PodLogsRecorded is set once PodLogsBefore was taken: then teardown
	// removes the pod log directories the run's kubelets before 1.30
	// made in /var/log/pods (hostPodLogDir), those not in PodLogsBefore,
	// and the directory itself when PodLogDirMade. Unset (older state
	// files), teardown leaves /var/log/pods alone.
	PodLogsRecorded bool     `json:"podLogsRecorded,omitempty"`
	PodLogsBefore   []string `json:"podLogsBefore,omitempty"`
	PodLogDirMade   bool     `json:"podLogDirMade,omitempty"`
	// Cgroup is the run's own cgroup on a unified (cgroup v2) host, with
	// the nodes' cgroup roots below it (see cgroups.go); nil on v1 hosts
	// and in older state files, where each node's CgroupRoot is made at
	// the top of every hierarchy.
	Cgroup *runCgroup `json:"cgroup,omitempty"`
}

// nodeState is one node's objects outside the run directory.
type nodeState struct {
	// Name is the node's name.
	Name string `json:"name"`
	// CgroupRoot is the kubelet's cgroupRoot: /skewtest-abcd on a v1
	// host, /skewtest-abcd/skewtest-worker (or, where systemd is PID 1,
	// /system.slice/skewtest-abcd.scope/skewtest-worker) on a v2 host.
	CgroupRoot string `json:"cgroupRoot"`
	// Bridge is the CNI bridge interface the node's pods use.
	Bridge string `json:"bridge"`
	// CNINetwork is the CNI network name (prefix of /var/lib/cni entries).
	CNINetwork string `json:"cniNetwork"`
}

const stateFile = "state.json"

func writeState(dir string, s state) error { return statefile.Write(dir, stateFile, s, 0o644) }

// readState reads dir's state; a run that wrote none has the zero state.
func readState(dir string) (state, error) {
	var b json.RawMessage
	err := statefile.Read(dir, stateFile, &b)
	if errors.Is(err, os.ErrNotExist) {
		return state{}, nil
	}
	if err != nil {
		return state{}, err
	}
	return parseState(b)
}

// parseState also reads the state files of runs made before clusters had
// several nodes, which kept their one node's fields at the top level, so
// `skewtest clean` still removes what such a run left.
func parseState(b []byte) (state, error) {
	var s struct {
		state
		nodeState
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return state{}, err
	}
	if len(s.Nodes) == 0 && s.nodeState != (nodeState{}) {
		s.nodeState.Name = NodeName
		s.Nodes = []nodeState{s.nodeState}
	}
	return s.state, nil
}
