package existing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes"
)

var (
	_ nodes.Node           = (*Node)(nil)
	_ nodes.WithKubeletLog = (*Node)(nil)
)

// Suffixes of the files SwapKubelet leaves beside Config.KubeletBinary.
const (
	// NewSuffix names the upload in progress.
	NewSuffix = ".skewtest-new"
	// OrigSuffix names the node's own kubelet, kept by the first swap and
	// put back by RestoreKubelet.
	OrigSuffix = ".skewtest-orig"
)

// pollInterval is how often Stop/StartKubelet ask the service manager for
// the unit's state.
const pollInterval = 250 * time.Millisecond

// defaultWait bounds waiting for the unit's state when ctx has no deadline.
const defaultWait = 2 * time.Minute

// Node is a node of an existing cluster reached over SSH. It implements
// nodes.Node. Commands run as the SSH user through its login shell, under
// sudo -n when that user is not root; they share one SSH connection per
// node, dialled on first use and again if it breaks.
type Node struct {
	name    string
	addr    string
	sudo    bool
	conn    *conn
	rootDir string
	unit    string
	binary  string
	svc     ServiceManager
	log     *slog.Logger
}

// String is the node's name.
func (n *Node) String() string { return n.name }

// Address is the host:port its SSH connection goes to.
func (n *Node) Address() string { return n.addr }

// KubeletRootDir is Config.KubeletRootDir.
func (n *Node) KubeletRootDir() string { return n.rootDir }

// KubeletBinary is the path the kubelet unit runs (Config.KubeletBinary).
func (n *Node) KubeletBinary() string { return n.binary }

// Command implements exec.Cmder: argv runs on the node over a new SSH
// session. Cancelling ctx sends SIGKILL to the command's process group and
// closes the session.
func (n *Node) Command(ctx context.Context, name string, args ...string) exec.Cmd {
	return &sshCmd{n: n, ctx: ctx, argv: append([]string{name}, args...)}
}

// Close closes the node's SSH connection; a later command dials again.
func (n *Node) Close() error { return n.conn.Close() }

// StopKubelet stops the kubelet unit and waits until the service manager
// reports it inactive (or failed), until ctx's deadline (2 minutes if it
// has none).
func (n *Node) StopKubelet(ctx context.Context) error {
	if _, err := exec.Output(ctx, n, n.svc.argv(n.svc.Stop, n.unit)...); err != nil {
		return fmt.Errorf("stop kubelet on %s: %w", n, err)
	}
	err := n.waitState(ctx, "inactive", func(state string) (bool, error) {
		switch state {
		case "inactive", "failed":
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("stop kubelet on %s: %w", n, err)
	}
	return nil
}

// StartKubelet starts the kubelet unit and waits until the service manager
// reports it active. A unit that goes inactive or failed instead is an
// error naming the command that shows its log.
func (n *Node) StartKubelet(ctx context.Context) error {
	if _, err := exec.Output(ctx, n, n.svc.argv(n.svc.Start, n.unit)...); err != nil {
		return fmt.Errorf("start kubelet on %s: %w", n, err)
	}
	err := n.waitState(ctx, "active", func(state string) (bool, error) {
		switch state {
		case "active":
			return true, nil
		case "activating", "reloading", "deactivating":
			return false, nil
		}
		return false, fmt.Errorf("unit %s is %s after start; see %s on the node", n.unit, state, exec.JoinArgv(n.svc.argv(n.svc.Logs, n.unit)))
	})
	if err != nil {
		return fmt.Errorf("start kubelet on %s: %w", n, err)
	}
	return nil
}

// KubeletLog implements nodes.WithKubeletLog over SSH
// (ServiceManager.RunLogs).
func (n *Node) KubeletLog(ctx context.Context) (string, error) {
	res, err := exec.Output(ctx, n, n.svc.argv(n.svc.RunLogs, n.unit)...)
	if err != nil {
		return "", fmt.Errorf("kubelet log of %s: %w", n, err)
	}
	return res.Stdout, nil
}

// KubeletState is the unit's state as the service manager prints it
// ("active", "inactive", "failed", "activating", ...).
func (n *Node) KubeletState(ctx context.Context) (string, error) {
	res, err := exec.Output(ctx, n, n.svc.argv(n.svc.IsActive, n.unit)...)
	state, _, _ := strings.Cut(strings.TrimSpace(res.Stdout), "\n")
	state = strings.TrimSpace(state)
	if err != nil && (res.ExitCode < 0 || state == "") {
		// systemctl is-active exits non-zero for any state but active;
		// only no answer at all is an error.
		return "", err
	}
	if state == "" {
		return "", fmt.Errorf("%s printed no state", exec.JoinArgv(res.Argv))
	}
	return state, nil
}

// waitState polls the unit's state until done says so or fails.
func (n *Node) waitState(ctx context.Context, want string, done func(state string) (bool, error)) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultWait)
		defer cancel()
	}
	last := ""
	for {
		state, err := n.KubeletState(ctx)
		if err == nil {
			last = state
			ok, derr := done(state)
			if derr != nil {
				return derr
			}
			if ok {
				return nil
			}
		} else if ctx.Err() == nil {
			return err
		}
		t := time.NewTimer(pollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("unit %s still %q, not %s: %w", n.unit, last, want, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// SwapKubelet installs bin as the node's kubelet binary (Config.KubeletBinary):
// it streams bin.Path to <KubeletBinary>.skewtest-new, checks its sha256 on
// the node (against bin.SHA256 when set), makes it executable, keeps the
// node's own binary as <KubeletBinary>.skewtest-orig unless a previous swap
// already did, and renames the new file into place. The kubelet must be
// stopped. Only the binary changes: its flags and config file stay the
// node's, so bin must be a version that accepts them.
func (n *Node) SwapKubelet(ctx context.Context, bin binaries.Binary) error {
	what := bin.Path
	if bin.Version != "" {
		what = bin.Version + " (" + bin.Path + ")"
	}
	wrap := func(err error) error { return fmt.Errorf("swap kubelet on %s to %s: %w", n, what, err) }
	newPath, origPath := n.binary+NewSuffix, n.binary+OrigSuffix

	f, err := os.Open(bin.Path)
	if err != nil {
		return wrap(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := exec.OutputStdin(ctx, n, io.TeeReader(f, h), "sh", "-c", `cat > "$1"`, "sh", newPath); err != nil {
		return wrap(fmt.Errorf("upload to %s: %w", newPath, err))
	}
	sum := hex.EncodeToString(h.Sum(nil))
	removeNew := func() { _, _ = exec.Output(context.WithoutCancel(ctx), n, "rm", "-f", newPath) }
	if bin.SHA256 != "" && !strings.EqualFold(bin.SHA256, sum) {
		removeNew()
		return wrap(fmt.Errorf("local file %s has sha256 %s, want %s", bin.Path, sum, bin.SHA256))
	}
	res, err := exec.Output(ctx, n, "sha256sum", newPath)
	if err != nil {
		removeNew()
		return wrap(err)
	}
	if got, _, _ := strings.Cut(strings.TrimSpace(res.Stdout), " "); !strings.EqualFold(got, sum) {
		removeNew()
		return wrap(fmt.Errorf("uploaded %s has sha256 %q, sent %s", newPath, got, sum))
	}
	if _, err := exec.Output(ctx, n, "chmod", "0755", newPath); err != nil {
		removeNew()
		return wrap(err)
	}
	// Keep the node's own binary, once: later swaps must not replace it
	// with one of ours. cp -P keeps a symlink a symlink.
	const keep = `if { [ -e "$1" ] || [ -L "$1" ]; } && ! { [ -e "$2" ] || [ -L "$2" ]; }; then
rm -f "$2.tmp" && cp -P -p "$1" "$2.tmp" && mv -f "$2.tmp" "$2"
fi`
	if _, err := exec.Output(ctx, n, "sh", "-c", keep, "sh", n.binary, origPath); err != nil {
		removeNew()
		return wrap(fmt.Errorf("keep original as %s: %w", origPath, err))
	}
	if _, err := exec.Output(ctx, n, "mv", "-f", newPath, n.binary); err != nil {
		removeNew()
		return wrap(err)
	}
	n.log.Info("kubelet swapped", "node", n.name, "binary", n.binary, "version", bin.Version, "sha256", sum)
	return nil
}

// RestoreKubelet puts back the kubelet binary the first SwapKubelet kept
// (<KubeletBinary>.skewtest-orig), removing that copy; it does nothing if
// there is none. The kubelet must be stopped. Provider.Down does not call
// it: a run leaves the last swapped binary in place until someone restores
// it.
func (n *Node) RestoreKubelet(ctx context.Context) error {
	origPath := n.binary + OrigSuffix
	const restore = `if [ -e "$2" ] || [ -L "$2" ]; then mv -f "$2" "$1" && echo restored; fi`
	res, err := exec.Output(ctx, n, "sh", "-c", restore, "sh", n.binary, origPath)
	if err != nil {
		return fmt.Errorf("restore kubelet on %s from %s: %w", n, origPath, err)
	}
	if strings.TrimSpace(res.Stdout) == "restored" {
		n.log.Info("kubelet restored", "node", n.name, "binary", n.binary)
	} else {
		n.log.Info("kubelet not swapped, nothing to restore", "node", n.name, "missing", origPath)
	}
	return nil
}

// checkReachable runs true on the node, explaining the usual failures.
func (n *Node) checkReachable(ctx context.Context) error {
	res, err := exec.Output(ctx, n, "true")
	switch {
	case err == nil:
		return nil
	case res.ExitCode < 0:
		// Dial, host key and auth errors name the node, address and fix.
		return err
	case n.sudo && strings.Contains(res.Stderr, "sudo"):
		return fmt.Errorf("node %s at %s: user %q needs passwordless sudo (sudo -n): %w", n, n.addr, n.conn.d.user, err)
	default:
		return fmt.Errorf("node %s at %s: %w", n, n.addr, err)
	}
}
