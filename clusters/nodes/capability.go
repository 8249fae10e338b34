package nodes

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Capability is something a provider's test nodes have or can do beyond
// Node. Each provider's descriptor declares its nodes' capabilities
// (registry.Descriptor.NodeCapabilities), each catalogue entry the ones it
// needs (catalogue.Entry.Needs), and an entry runs on the providers whose
// nodes have them all: no provider is named outside clusters/.
//
// A capability backed by one of this package's optional interfaces is
// declared exactly when the provider's node type implements it
// (CheckCapabilities, which each provider's tests call).
type Capability string

const (
	// Disposable: the node is the run's own, made for it and gone after
	// it, so a fault may unmount its volumes, kill its containers and
	// restart its kubelet as a reboot or a crash would. Not a node of
	// someone else's cluster.
	Disposable Capability = "disposable"
	// SkewtestVolumes: the workload's volumes come from a CSI driver the
	// run deploys (Options.CSIMode's driver, or kind's hostpath driver),
	// so a shape can have inline ephemeral volumes and claims bound to
	// PVs the run makes; not from a StorageClass of the cluster's.
	SkewtestVolumes Capability = "skewtest-volumes"
	// BlockVolumes: raw block volumes attached through VolumeAttachments
	// (skewtest's CSI driver in CSI_MODE=ebs, among its descriptor's
	// CSIModes).
	BlockVolumes Capability = "block-volumes"
	// HostNode: the node is this host, its kubelet and CSI driver this
	// host's processes and its volumes mounts in this host's mount table
	// (registry.Descriptor.KubeletsOnHost). The faults whose plant or
	// judgement reads the kernel's state of the kubelet's volumes
	// directly (the CSI global mount, a container's processes, local PVs
	// of host dirs) are proven on such nodes only so far.
	HostNode Capability = "host-node"
	// CSIDriverControl: WithCSIDriver (stop, start, stall and fail calls
	// of the node's CSI driver).
	CSIDriverControl Capability = "csi-driver-control"
	// KubeletKill: WithKubeletKill (SIGKILL the kubelet).
	KubeletKill Capability = "kubelet-kill"
	// APIServerOutage: WithAPIServerOutage (cut the kubelet alone off
	// from the API server).
	APIServerOutage Capability = "apiserver-outage"
	// KubeletFeatureGates: WithKubeletFeatureGates (a plan entry's or a
	// fault's feature gates in the kubelet's configuration).
	KubeletFeatureGates Capability = "kubelet-feature-gates"
)

// interfaceCapabilities are the capabilities backed by an optional
// interface of this package, each with the test of a node for it.
var interfaceCapabilities = map[Capability]func(Node) bool{
	CSIDriverControl:    func(n Node) bool { _, ok := n.(WithCSIDriver); return ok },
	KubeletKill:         func(n Node) bool { _, ok := n.(WithKubeletKill); return ok },
	APIServerOutage:     func(n Node) bool { _, ok := n.(WithAPIServerOutage); return ok },
	KubeletFeatureGates: func(n Node) bool { _, ok := n.(WithKubeletFeatureGates); return ok },
}

// Capabilities are every capability, sorted.
func Capabilities() []Capability {
	out := []Capability{Disposable, SkewtestVolumes, BlockVolumes, HostNode}
	for c := range interfaceCapabilities {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// HasAll reports whether have holds every capability of needs.
func HasAll(have, needs []Capability) bool {
	for _, c := range needs {
		if !slices.Contains(have, c) {
			return false
		}
	}
	return true
}

// CheckCapabilities checks a provider's declared capabilities against its
// node type, given as a value of it (a nil pointer will do): each is a
// known capability, declared once, and those backed by an interface are
// declared exactly when the node implements it.
func CheckCapabilities(declared []Capability, node Node) error {
	var problems []string
	known := Capabilities()
	for i, c := range declared {
		if !slices.Contains(known, c) {
			problems = append(problems, fmt.Sprintf("%q is not a capability (want one of %v)", c, known))
		}
		if slices.Contains(declared[:i], c) {
			problems = append(problems, fmt.Sprintf("%q is declared twice", c))
		}
	}
	for c, has := range interfaceCapabilities {
		switch d, h := slices.Contains(declared, c), has(node); {
		case d && !h:
			problems = append(problems, fmt.Sprintf("%s is declared, but %T does not implement its interface", c, node))
		case h && !d:
			problems = append(problems, fmt.Sprintf("%T implements %s's interface, but the capability is not declared", node, c))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("node capabilities: %s", strings.Join(problems, "; "))
	}
	return nil
}
