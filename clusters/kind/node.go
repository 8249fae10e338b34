package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"strings"
	"time"

	kindnodes "sigs.k8s.io/kind/pkg/cluster/nodes"
	kindexec "sigs.k8s.io/kind/pkg/exec"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes"
)

var (
	_ nodes.Node           = (*Node)(nil)
	_ nodes.WithKubeletLog = (*Node)(nil)
)

// kubeletDropIn points kind's kubelet.service at the swapped-in binary,
// keeping the arguments of kind's own 10-kubeadm.conf.
const kubeletDropIn = "/etc/systemd/system/kubelet.service.d/20-skewtest.conf"

// Node is a kind node container; commands run in it through kind's own
// nodes.Node (docker exec), so they see the node's mount namespace.
type Node struct {
	kind kindnodes.Node
}

// String is the node's name (the container's, which is also the
// Kubernetes node's).
func (n *Node) String() string { return n.kind.String() }

// KubeletRootDir implements nodes.Node.
func (n *Node) KubeletRootDir() string { return "/var/lib/kubelet" }

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
		var ee *osexec.ExitError
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

func (n *Node) run(ctx context.Context, argv ...string) (exec.Result, error) {
	res, err := exec.Output(ctx, n, argv...)
	if err != nil {
		return res, fmt.Errorf("on %s: %w", n, err)
	}
	return res, nil
}

// StopKubelet implements nodes.Node: systemctl stop, then wait until the
// unit is inactive.
func (n *Node) StopKubelet(ctx context.Context) error {
	if _, err := n.run(ctx, "systemctl", "stop", "kubelet"); err != nil {
		return fmt.Errorf("stop kubelet on %s: %w", n, err)
	}
	return n.waitUnit(ctx, "inactive", "failed")
}

// StartKubelet implements nodes.Node and returns once the kubelet answers
// its /healthz inside the node, as on the local provider. kind's unit
// restarts a crashing kubelet every second, so a kubelet that exits (a
// rejected flag, config field or feature gate) is caught by systemd's
// restart count instead of waiting for a health it never reaches.
func (n *Node) StartKubelet(ctx context.Context) error {
	restarts := n.restarts(ctx)
	if _, err := n.run(ctx, "systemctl", "start", "kubelet"); err != nil {
		return fmt.Errorf("start kubelet on %s: %w", n, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := exec.Output(ctx, n, "curl", "-sf", "--max-time", "1", "http://127.0.0.1:10248/healthz"); err == nil {
			return nil
		}
		if r := n.restarts(ctx); r > restarts || time.Now().After(deadline) {
			logs, _ := exec.Output(ctx, n, "journalctl", "-u", "kubelet", "--no-pager", "-n", "15", "-o", "cat")
			return fmt.Errorf("start kubelet on %s: the kubelet did not become healthy (systemd restarted it %d times); last log lines:\n%s", n, r-restarts, logs.Stdout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("start kubelet on %s: %w", n, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// KubeletLog implements nodes.WithKubeletLog: the journal of the kubelet
// unit's current invocation inside the node.
func (n *Node) KubeletLog(ctx context.Context) (string, error) {
	res, err := n.run(ctx, nodes.SystemdKubeletLogArgv("kubelet")...)
	if err != nil {
		return "", fmt.Errorf("kubelet log of %s: %w", n, err)
	}
	return res.Stdout, nil
}

// restarts is systemd's restart count of the kubelet unit.
func (n *Node) restarts(ctx context.Context) int {
	res, err := exec.Output(ctx, n, "systemctl", "show", "-p", "NRestarts", "--value", "kubelet")
	if err != nil {
		return 0
	}
	var r int
	fmt.Sscan(strings.TrimSpace(res.Stdout), &r)
	return r
}

func (n *Node) waitUnit(ctx context.Context, want ...string) error {
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		res, _ := exec.Output(ctx, n, "systemctl", "is-active", "kubelet")
		last = strings.TrimSpace(res.Stdout)
		for _, w := range want {
			if last == w {
				return nil
			}
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Output(ctx, n, "journalctl", "-u", "kubelet", "--no-pager", "-n", "20")
			return fmt.Errorf("kubelet on %s is %q, want %s; last log lines:\n%s", n, last, strings.Join(want, " or "), logs.Stdout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubelet on %s is %q: %w", n, last, ctx.Err())
		case <-tick.C:
		}
	}
}

// SwapKubelet implements nodes.Node: copies bin into the node as
// /kind/skewtest/kubelet-<version> and points kind's kubelet.service at it
// with a systemd drop-in.
func (n *Node) SwapKubelet(ctx context.Context, bin binaries.Binary) error {
	f, err := os.Open(bin.Path)
	if err != nil {
		return fmt.Errorf("swap kubelet on %s: %w", n, err)
	}
	defer f.Close()
	target := "/kind/skewtest/kubelet-" + bin.Version
	if _, err := n.run(ctx, "mkdir", "-p", "/kind/skewtest"); err != nil {
		return fmt.Errorf("swap kubelet on %s: %w", n, err)
	}
	if _, err := exec.OutputStdin(ctx, n, f, "sh", "-c", `cat > "$1.tmp" && chmod 0755 "$1.tmp" && mv "$1.tmp" "$1"`, "sh", target); err != nil {
		return fmt.Errorf("swap kubelet on %s: copy %s: %w", n, bin.Path, err)
	}
	res, err := n.run(ctx, "sha256sum", target)
	if err != nil {
		return fmt.Errorf("swap kubelet on %s: %w", n, err)
	}
	if got := strings.Fields(res.Stdout); len(got) == 0 || got[0] != bin.SHA256 {
		return fmt.Errorf("swap kubelet on %s: %s has sha256 %q after the copy, want %s", n, target, res.Stdout, bin.SHA256)
	}
	dropIn := "[Service]\nExecStart=\nExecStart=" + target + " $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS\n"
	if _, err := exec.OutputStdin(ctx, n, strings.NewReader(dropIn), "sh", "-c", `cat > "$1"`, "sh", kubeletDropIn); err != nil {
		return fmt.Errorf("swap kubelet on %s: write %s: %w", n, kubeletDropIn, err)
	}
	if _, err := n.run(ctx, "systemctl", "daemon-reload"); err != nil {
		return fmt.Errorf("swap kubelet on %s: %w", n, err)
	}
	return nil
}
