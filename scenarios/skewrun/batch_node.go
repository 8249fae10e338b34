package skewrun

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"sigs.k8s.io/skewtest/clusters/conditions"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

// nodeCheckTimeout bounds reading a node's state between two runs of a
// batch.
const nodeCheckTimeout = 30 * time.Second

// nodeLeftovers lists what node holds that no pod explains, once a run's
// workload is gone: the directories, mounts and plugin entries of pods
// the API no longer has on it, and any mount under the CSI plugin's
// directory (a global mount, a block volume's staging or publish bind)
// while no pod on it uses a volume. The directories the kubelet keeps
// there (volumeDevices/staging, publish) are its own, not a run's. A node not Ready
// at kubeletVersion has that as its leftover. Empty: the node is clean
// for the next run.
func (c *runCluster) nodeLeftovers(ctx context.Context, node nodes.Node, kubeletVersion string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, nodeCheckTimeout)
	defer cancel()
	cs, err := c.clientset()
	if err != nil {
		return nil, err
	}
	var out []string
	get := func(ctx context.Context, name string) (*corev1.Node, error) {
		return cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	var status string
	if ready, _ := conditions.NodeReadyAtWith(get, node.String(), kubeletVersion, &status)(ctx); !ready {
		out = append(out, fmt.Sprintf("the node is not Ready at kubelet %s (%s)", kubeletVersion, status))
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node.String()).String()})
	if err != nil {
		return nil, err
	}
	snap, err := (&nodestate.Reader{Node: node, KubeletRoot: node.KubeletRootDir()}).Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return append(out, leftoversIn(pods.Items, snap)...), nil
}

// leftoversIn is what snap holds that pods, the API's pods on its node,
// do not explain: the state of pods the API no longer has, and mounts
// under the CSI plugin's directory while no pod uses a volume.
func leftoversIn(pods []corev1.Pod, snap *nodestate.Snapshot) []string {
	live := map[string]bool{}
	usesVolumes := false
	for _, p := range pods {
		live[string(p.UID)] = true
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil || v.CSI != nil || v.Ephemeral != nil {
				usesVolumes = true
			}
		}
	}
	var gone []string
	for _, uid := range snap.PodUIDs() {
		if !live[uid] {
			gone = append(gone, uid)
		}
	}
	var out []string
	for _, l := range snap.Leftovers(gone) {
		out = append(out, l.String())
	}
	if !usesVolumes {
		for _, m := range mountinfo.Under(snap.Mounts(), snap.Abs(csiPluginDir)) {
			out = append(out, "mount "+m.MountPoint+" with no pod on the node using a volume")
		}
	}
	return out
}

// csiPluginDir is the CSI plugin's directory under the kubelet root:
// global mounts and block volumes' staging and publish binds.
const csiPluginDir = "plugins/kubernetes.io/csi"
