package local

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
)

// KubeletHandoff is how to run a node's kubelet in the provider's place:
// make test-hosts hands the node's kubelet to systemd, laid out as kops
// lays out a node, and tests that node from outside through the existing
// provider (clusters/vm/kopsnode).
type KubeletHandoff struct {
	// Binary is the kubelet the node ran.
	Binary string
	// Flags are the kubelet's flags, --config excepted.
	Flags []string
	// Config is its KubeletConfiguration. It names only fields every
	// supported version knows, so the kubelets of a plan all take it.
	Config string
	// HealthzPort is where it answers its health endpoint, on 127.0.0.1.
	HealthzPort int
	// Namespace is the command line that runs the kubelet, appended to
	// it, in a mount namespace of its own where the compiled-in device
	// plugin directory is the node's own, as the provider ran it
	// (mountns.go): a second kubelet on the host needs it, or the two
	// remove each other's registration socket as they start.
	Namespace []string
}

// HandOffKubelet stops the node's kubelet and returns how to run it
// elsewhere, with its health endpoint on 127.0.0.1:healthzPort (the
// kubelet's default is 10248), or on the port the provider gave it when
// healthzPort is 0 (a second kubelet on the host cannot take the default). From then on the node's kubelet is the
// other supervisor's: the provider never starts it again, and whoever runs
// it must stop it before Down, which tears down the node's containerd,
// CSI driver and cgroups under it.
func (n *Node) HandOffKubelet(ctx context.Context, healthzPort int) (KubeletHandoff, error) {
	if err := n.StopKubelet(ctx); err != nil {
		return KubeletHandoff{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	v, err := version.ParseSemantic(n.bin.Version)
	if err != nil {
		return KubeletHandoff{}, fmt.Errorf("hand off the kubelet of %s: no kubelet installed (%q): %w", n.l.name, n.bin.Version, err)
	}
	if healthzPort != 0 {
		n.ports.kubeletHealthz = healthzPort
	}
	return KubeletHandoff{Binary: n.bin.Path, Flags: n.kubeletFlags(v), Config: n.kubeletConfig(v), HealthzPort: n.ports.kubeletHealthz,
		Namespace: n.l.inOwnMountNamespace(n.p.devicePluginHolder, nil)}, nil
}
