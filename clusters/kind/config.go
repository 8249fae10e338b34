package kind

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// kubeletVerbosity is the kubelets' log level: the kubelet logs each
// volume it reconstructs at start at level 2 ("Volume is marked as
// uncertain ..."), the lines that tell the metrics registration race from
// a kubelet that reconstructed nothing. kind's default, 0, hides them; the
// local provider and kops run their kubelets at 2 too.
const kubeletVerbosity = 2

// ecdsaFrom is the first Kubernetes version whose nodes kind configures
// with kubeadm's v1beta4 API, which has ClusterConfiguration's
// encryptionAlgorithm.
var ecdsaFrom = version.MustParseSemantic("v1.36.0")

// clusterSpec is what a cluster's kind config depends on.
type clusterSpec struct {
	// cgroupV1: the host's cgroups are not unified v2, where kubelets
	// from 1.35 need failCgroupV1: false.
	cgroupV1 bool
	workers  int
	// version is the node image's Kubernetes version.
	version *version.Version
	// kubeProxy: some pod reaches the API server by its Service, as the
	// upstream CSI hostpath driver's sidecars do. Without it the cluster
	// runs no kube-proxy: skewtest's CSI driver and workload never talk to
	// the API server, and kind's network (cmd/kindcni) reaches it by the
	// control plane's address, which kind gives it.
	kubeProxy bool
}

// initSkipPhases are the phases kubeadm init skips: kind's own
// (preflight, which would pull images), and the CoreDNS addon: nothing a
// run does resolves a name (the workload and CSI driver pods do not), and
// its pods starting on the workers would take CPU from their bring-up.
var initSkipPhases = []string{"preflight", "addon/coredns"}

// kubeProxyPhase is kubeadm init's kube-proxy addon, skipped where no pod
// needs a Service (clusterSpec.kubeProxy).
const kubeProxyPhase = "addon/kube-proxy"

// clusterConfig is one tainted control plane and spec.workers workers,
// their kubelets at kubeletVerbosity, without CoreDNS (initSkipPhases),
// and without kube-proxy unless spec.kubeProxy: on every node it started,
// unpacked its image and wrote its rules while the nodes came up. From ecdsaFrom, kubeadm makes the
// cluster's keys ECDSA P-256: it makes about fifteen at init, and an
// RSA-2048 key takes a 2-core machine a good part of a second to find, a
// P-256 key no time.
func clusterConfig(spec clusterSpec) *v1alpha4.Cluster {
	kubelet := fmt.Sprintf("kind: KubeletConfiguration\nlogging:\n  verbosity: %d\n", kubeletVerbosity)
	if spec.cgroupV1 {
		kubelet += "failCgroupV1: false\n"
	}
	cfg := &v1alpha4.Cluster{
		TypeMeta:             v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		KubeadmConfigPatches: []string{kubelet},
	}
	if spec.version != nil && spec.version.AtLeast(ecdsaFrom) {
		cfg.KubeadmConfigPatches = append(cfg.KubeadmConfigPatches, "kind: ClusterConfiguration\nencryptionAlgorithm: ECDSA-P256\n")
	}
	// A merge patch (RFC 7386) replaces a list whole: kind's skipPhases
	// are in initSkipPhases.
	skip := initSkipPhases
	if !spec.kubeProxy {
		skip = append(slices.Clone(skip), kubeProxyPhase)
	}
	initConfig := "kind: InitConfiguration\nskipPhases:\n"
	for _, phase := range skip {
		initConfig += fmt.Sprintf("- %q\n", phase)
	}
	cfg.KubeadmConfigPatches = append(cfg.KubeadmConfigPatches, initConfig)
	cfg.Nodes = append(cfg.Nodes, v1alpha4.Node{Role: v1alpha4.ControlPlaneRole})
	for range spec.workers {
		cfg.Nodes = append(cfg.Nodes, v1alpha4.Node{Role: v1alpha4.WorkerRole})
	}
	return cfg
}
