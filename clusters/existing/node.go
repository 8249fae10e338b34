package existing

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/sshnode"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
	"sigs.k8s.io/skewtest/clusters/nodes"
)

var (
	_ nodes.Node           = (*Node)(nil)
	_ nodes.WithKubeletLog = (*Node)(nil)
)

// Node is a node of an existing cluster reached over SSH. It implements
// nodes.Node. Commands run as the SSH user through its login shell, under
// sudo -n when that user is not root; they share one SSH connection per
// node, dialled on first use and again if it breaks. The kubelet is driven
// by the shared systemd driver.
type Node struct {
	*sshnode.Node
	// kubeletVersion is the version the API server reported for the
	// node's own kubelet when the node was resolved, for the Ready check
	// after a restore; empty for a Node made without the API server.
	kubeletVersion string
	driver         *systemdkubelet.Driver
	p              *provider
	log            *slog.Logger
}

// KubeletRootDir is Config.KubeletRootDir.
func (n *Node) KubeletRootDir() string { return n.driver.Layout.RootDir }

// KubeletBinary is the path the kubelet unit runs (Config.KubeletBinary).
func (n *Node) KubeletBinary() string { return n.driver.Layout.Binary }

// KubeletDriver is the shared systemd driver of the node's kubelet, for
// callers that put the node's own kubelet back themselves (Restore) or
// read its unit's state.
func (n *Node) KubeletDriver() *systemdkubelet.Driver { return n.driver }

// StopKubelet stops the kubelet unit and waits until its process has
// exited. Before the first change to a node, the provider records the
// node's own kubelet (binary path and sha256) in its state directory, so
// Down, or `skewtest clean` after a killed run, can put it back.
func (n *Node) StopKubelet(ctx context.Context) error {
	if err := n.p.record(ctx, n); err != nil {
		return fmt.Errorf("stop kubelet on %s: %w", n, err)
	}
	return n.driver.Stop(ctx)
}

// SwapKubelet installs bin as the node's kubelet binary (Config.KubeletBinary)
// through the shared systemd driver: upload beside it, sha256 checked on
// the node, the node's own binary renamed aside once to
// <KubeletBinary>.skewtest-orig, one rename; before the first swap the
// driver keeps the kubelet's checkpoint files too, since the run's
// kubelets rewrite them in formats the node's own may refuse. The kubelet
// must be stopped. Only the binary changes: its flags and config file stay
// the node's, so bin must be a version that accepts them.
func (n *Node) SwapKubelet(ctx context.Context, bin binaries.Binary) error {
	if err := n.p.record(ctx, n); err != nil {
		return fmt.Errorf("swap kubelet on %s: %w", n, err)
	}
	return n.driver.Swap(ctx, bin)
}

// StartKubelet starts the kubelet unit and returns once the kubelet
// answers its health endpoint on the node; a kubelet that exits instead is
// an error carrying the unit's last journal lines.
func (n *Node) StartKubelet(ctx context.Context) error { return n.driver.Start(ctx) }

// KubeletLog implements nodes.WithKubeletLog over SSH: the journal of the
// kubelet unit's current invocation.
func (n *Node) KubeletLog(ctx context.Context) (string, error) { return n.driver.RunLog(ctx) }

// checkReachable runs true on the node, explaining the usual failures.
func (n *Node) checkReachable(ctx context.Context) error {
	res, err := exec.Output(ctx, n, "true")
	switch {
	case err == nil:
		return nil
	case res.ExitCode < 0:
		// Dial, host key and auth errors name the node, address and fix.
		return err
	case n.Sudo() && strings.Contains(res.Stderr, "sudo"):
		return fmt.Errorf("node %s at %s: user %q needs passwordless sudo (sudo -n): %w", n, n.Address(), n.User(), err)
	default:
		return fmt.Errorf("node %s at %s: %w", n, n.Address(), err)
	}
}
