package kind

import (
	"context"
	"errors"
	"io"
	"time"

	kindnodes "sigs.k8s.io/kind/pkg/cluster/nodes"
	kindexec "sigs.k8s.io/kind/pkg/exec"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
	"sigs.k8s.io/skewtest/clusters/nodes"
)

var (
	_ nodes.Node           = (*Node)(nil)
	_ nodes.WithKubeletLog = (*Node)(nil)
)

// Node is a kind node container; commands run in it through kind's own
// nodes.Node (docker exec), so they see the node's mount namespace.
type Node struct {
	kind kindnodes.Node
}

// String is the node's name (the container's, which is also the
// Kubernetes node's).
func (n *Node) String() string { return n.kind.String() }

// KubeletRootDir implements nodes.Node.
func (n *Node) KubeletRootDir() string { return kubeletLayout.RootDir }

// Command implements exec.Cmder.
func (n *Node) Command(ctx context.Context, name string, args ...string) exec.Cmd {
	return &kindCmd{inner: n.kind.CommandContext(ctx, name, args...)}
}

type kindCmd struct{ inner kindexec.Cmd }

func (c *kindCmd) SetEnv(env ...string) exec.Cmd  { c.inner.SetEnv(env...); return c }
func (c *kindCmd) SetStdin(r io.Reader) exec.Cmd  { c.inner.SetStdin(r); return c }
func (c *kindCmd) SetStdout(w io.Writer) exec.Cmd { c.inner.SetStdout(w); return c }
func (c *kindCmd) SetStderr(w io.Writer) exec.Cmd { c.inner.SetStderr(w); return c }

// Run unwraps kind's RunError (which has Cause but no Unwrap) so the exit
// code of the command inside the node is visible to exec.ExitCode.
func (c *kindCmd) Run() error {
	err := c.inner.Run()
	var re *kindexec.RunError
	if errors.As(err, &re) {
		// os/exec's ExitError, from the docker exec kind ran.
		var ee interface{ ExitCode() int }
		if errors.As(re.Inner, &ee) {
			return &exitError{code: ee.ExitCode(), err: err}
		}
	}
	return err
}

type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

// StopKubelet implements nodes.Node through the shared systemd driver.
func (n *Node) StopKubelet(ctx context.Context) error { return n.driver().Stop(ctx) }

// SwapKubelet implements nodes.Node: the shared systemd driver puts bin at
// /usr/bin/kubelet (kind's own kept beside it as kubelet.skewtest-orig)
// and leaves kind's unit, flags and config as they are.
func (n *Node) SwapKubelet(ctx context.Context, bin binaries.Binary) error {
	return n.driver().Swap(ctx, bin)
}

// StartKubelet implements nodes.Node: it returns once the kubelet answers
// /healthz inside the node. kind's unit restarts a crashing kubelet every
// second, so a kubelet that exits (a rejected flag, config field or
// feature gate) is caught by systemd's restart count.
func (n *Node) StartKubelet(ctx context.Context) error { return n.driver().Start(ctx) }

// KubeletLog implements nodes.WithKubeletLog: the journal of the kubelet
// unit's current invocation inside the node.
func (n *Node) KubeletLog(ctx context.Context) (string, error) { return n.driver().RunLog(ctx) }

// kubeletLayout is where kind's node image keeps the kubelet: its
// kubelet.service runs /usr/bin/kubelet with Restart=always, kubeadm's
// flags in an EnvironmentFile and its config in /var/lib/kubelet.
var kubeletLayout = systemdkubelet.Layout{
	Unit:            "kubelet",
	Binary:          "/usr/bin/kubelet",
	EnvironmentFile: "/var/lib/kubelet/kubeadm-flags.env",
	Config:          "/var/lib/kubelet/config.yaml",
	RootDir:         "/var/lib/kubelet",
}

func (n *Node) driver() *systemdkubelet.Driver {
	return &systemdkubelet.Driver{Node: n, Layout: kubeletLayout, PollInterval: 100 * time.Millisecond, Timeout: time.Minute}
}
