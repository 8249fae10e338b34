package local

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// NodeName is the name of a cluster's first node, and of its only node
// when it has one.
const NodeName = "skewtest-worker"

// MaxNodes bounds Config.Kubelets: every node runs its own containerd and
// kubelet on this host, and more than this would not fit a test machine.
const MaxNodes = 16

// NodeNames are the names of a cluster's n nodes, as kind names workers:
// skewtest-worker, skewtest-worker2, skewtest-worker3, ...
func NodeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = NodeName + nodeSuffix(i)
	}
	return names
}

// nodeSuffix is what node i's name, files and host objects carry so that no
// two nodes share them: nothing for the first node, so a one-node cluster
// is laid out as it was before clusters had several nodes, and i+1 for the
// others (kubelet2, containerd2, skewtest-worker2).
func nodeSuffix(i int) string {
	if i == 0 {
		return ""
	}
	return strconv.Itoa(i + 1)
}

// nodeLayout is where node i keeps everything a kubelet must not share
// with another: its kubelet's root, config and pod logs, its containerd's
// directories and socket, its CNI network, its pid files and logs. Every
// path is under the run directory.
type nodeLayout struct {
	runDir string
	index  int
	suffix string
	name   string
}

func layoutOf(runDir string, i int) nodeLayout {
	return nodeLayout{runDir: runDir, index: i, suffix: nodeSuffix(i), name: NodeName + nodeSuffix(i)}
}

func (l nodeLayout) path(elem ...string) string {
	return filepath.Join(append([]string{l.runDir}, elem...)...)
}

// kubeletRoot is the kubelet's --root-dir; kubeletCertDir its --cert-dir
// (the kubelet's self-signed serving certificate), which otherwise
// defaults to /var/lib/kubelet/pki whatever the root.
func (l nodeLayout) kubeletRoot() string      { return l.path("kubelet" + l.suffix) }
func (l nodeLayout) kubeletCertDir() string   { return filepath.Join(l.kubeletRoot(), "pki") }
func (l nodeLayout) kubeletConfigDir() string { return l.path("kubelet-config" + l.suffix) }
func (l nodeLayout) podLogs() string          { return l.path("pod-logs" + l.suffix) }
func (l nodeLayout) flexvolume() string       { return l.path("flexvolume" + l.suffix) }
func (l nodeLayout) containerdDir() string    { return l.path("containerd" + l.suffix) }
func (l nodeLayout) containerdSocket() string {
	return filepath.Join(l.containerdDir(), "containerd.sock")
}
func (l nodeLayout) cniDir() string { return l.path("cni" + l.suffix) }

// kubeconfigName is the kubelet's client identity (system:node:<name>):
// the name of its key pair under pki/ and of its kubeconfig.
func (l nodeLayout) kubeconfigName() string { return "kubelet" + l.suffix }
func (l nodeLayout) kubeconfig() string {
	return l.path("kubeconfig", l.kubeconfigName()+".kubeconfig")
}

// Daemon names, which also name their log (logs/<name>.log) and pid file
// (pids/<name>.pid).
func (l nodeLayout) kubeletName() string    { return "kubelet" + l.suffix }
func (l nodeLayout) containerdName() string { return "containerd" + l.suffix }
func (l nodeLayout) kubeletPIDFile() string { return l.path("pids", l.kubeletName()+".pid") }

// kubeletLog is the log of the kubelet's run-th start (from 1), e.g.
// logs/kubelet-1-v1.37.2.log, logs/kubelet2-3-v1.36.3.log.
func (l nodeLayout) kubeletLog(run int, version string) string {
	return l.path("logs", fmt.Sprintf("%s-%d-%s.log", l.kubeletName(), run, version))
}

// nodeState names node i's objects outside the run directory: its kubelet's
// cgroup root, its CNI bridge and network (and so its /var/lib/cni entries).
func (l nodeLayout) state(runID string) nodeState {
	short := shortID(runID) + l.suffix
	return nodeState{
		Name:       l.name,
		CgroupRoot: "/skewtest-" + short,
		Bridge:     "skw" + short,
		CNINetwork: "skewtest-" + short,
	}
}

// podSubnet is the node's own pod range on its own bridge.
func (l nodeLayout) podSubnet() string { return fmt.Sprintf("10.244.%d.0/24", l.index) }
