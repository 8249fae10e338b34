//go:build vmnode

package existing

import (
	"context"
	"errors"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/existing/internal/sshdtest"
	"sigs.k8s.io/skewtest/clusters/internal/vmnode"
)

// vmHelperEnv tells the helper test it is the harness to kill.
const vmHelperEnv = "SKEWTEST_VM_KILL_HELPER"

func vmProvider(t *testing.T, stateDir string) (*provider, *Node) {
	t.Helper()
	addr := vmnode.Addr(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := sshdtest.WriteKubeconfig(kc, "https://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(Config{
		Kubeconfig: kc, KubeletBinary: "/usr/local/bin/kubelet", RunID: "vm", StateDir: stateDir,
		SSH:    SSHConfig{User: "root", KeyFile: os.Getenv(vmnode.KeyEnv), KnownHostsFile: os.Getenv(vmnode.KnownHostsEnv), Timeout: time.Minute},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	n := p.Node("vm-node", addr)
	// TCG: the kubelet's start is 10-18 times slower than on hardware.
	n.driver.Timeout = 10 * time.Minute
	n.driver.PollInterval = time.Second
	return p, n
}

func cachedKubelet(t *testing.T, v string) binaries.Binary { return vmnode.CachedKubelet(t, v) }

// runningVersion is what the unit's running kubelet reports.
func runningVersion(t *testing.T, ctx context.Context, n *Node) string {
	return vmnode.RunningVersion(t, ctx, n, n.driver)
}

// TestKopsNodeInVM drives a real kubelet under the real systemd of a
// Debian 12 guest, laid out as a kops node, through the existing
// provider's Node over SSH with the host key checked: a hop (stop, swap
// to v1.36.3, start, healthy), a harness killed with SIGKILL in the
// middle of the next hop, and the restore from the state it left.
func TestKopsNodeInVM(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Minute)
	defer cancel()
	p, n := vmProvider(t, filepath.Join(t.TempDir(), "existing-vm"))
	// Up would write the state; there is no API server to attach to.
	if err := p.initState(); err != nil {
		t.Fatal(err)
	}
	timed := func(what string, f func() error) { t.Helper(); vmnode.Timed(t, what, f) }
	timed("lay the guest out as a kops node", func() error {
		_, err := exec.Output(ctx, n, "sh", "-c", vmnode.KopsNodeSetup)
		return err
	})
	timed("start the node's own kubelet", func() error { return n.driver.Start(ctx) })
	if v := runningVersion(t, ctx, n); v != "v1.37.2" {
		t.Fatalf("the node's own kubelet is %q", v)
	}
	orig, err := n.driver.Original(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the node's own kubelet: %+v", orig)

	old := cachedKubelet(t, "v1.36.3")
	timed("hop: stop", func() error { return n.StopKubelet(ctx) })
	timed("hop: swap to v1.36.3 (upload over SSH, sha256 on the node)", func() error { return n.SwapKubelet(ctx, old) })
	timed("hop: start v1.36.3", func() error { return n.StartKubelet(ctx) })
	if v := runningVersion(t, ctx, n); v != "v1.36.3" {
		t.Fatalf("after the hop the unit runs %q", v)
	}
	timed("restore after the hop", func() error { return n.driver.Restore(ctx, orig.SHA256) })
	if v := runningVersion(t, ctx, n); v != "v1.37.2" {
		t.Fatalf("after the restore the unit runs %q", v)
	}

	// A harness killed in the middle of a hop: stopped, swapped, not
	// started.
	killDir := filepath.Join(t.TempDir(), "existing-vm-killed")
	cmd := osexec.CommandContext(ctx, os.Args[0], "-test.run=^TestKopsNodeInVMHelper$", "-test.v")
	cmd.Env = append(os.Environ(), vmHelperEnv+"="+killDir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := time.Now()
	killWhenSwapped(t, cmd, out)
	t.Logf("harness killed with SIGKILL mid-hop after %s", time.Since(s).Round(time.Millisecond))
	st, err := n.driver.State(ctx)
	if err != nil || st.ActiveState == "active" {
		t.Fatalf("unit after the kill: %+v, %v", st, err)
	}
	left, err := n.driver.Original(ctx)
	if err != nil || !left.Kept || left.SHA256 != orig.SHA256 {
		t.Fatalf("after the kill: %+v, %v; want the own kubelet kept", left, err)
	}
	state, err := readState(killDir)
	if err != nil || len(state.Nodes) != 1 || state.Nodes[0].OriginalSHA256 != orig.SHA256 {
		t.Fatalf("state the killed run left: %+v, %v", state, err)
	}
	t.Logf("state left by the killed run: %+v", state.Nodes[0])

	// What skewtest clean does from that state, but the Ready check
	// through an API server: the guest has none.
	p2, n2 := vmProvider(t, killDir)
	d := *n2.driver
	d.Layout = state.Nodes[0].layout()
	timed("restore from the killed run's state", func() error { return d.Restore(ctx, state.Nodes[0].OriginalSHA256) })
	if err := p2.forget(state.Nodes[0].Name); err != nil {
		t.Fatal(err)
	}
	if v := runningVersion(t, ctx, n2); v != "v1.37.2" {
		t.Fatalf("after the restore the unit runs %q", v)
	}
	if res, _ := exec.Output(ctx, n2, "sh", "-c", "ls /usr/local/bin/kubelet*"); strings.TrimSpace(res.Stdout) != "/usr/local/bin/kubelet" {
		t.Errorf("left beside the kubelet: %q", res.Stdout)
	}
	if _, err := os.Stat(killDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state directory still there: %v", err)
	}
}

// TestKopsNodeInVMHelper is the harness TestKopsNodeInVM kills.
func TestKopsNodeInVMHelper(t *testing.T) {
	dir := os.Getenv(vmHelperEnv)
	if dir == "" {
		t.Fatal("run by TestKopsNodeInVM only")
	}
	ctx := context.Background()
	p, n := vmProvider(t, dir)
	if err := p.initState(); err != nil {
		t.Fatal(err)
	}
	if err := n.StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.SwapKubelet(ctx, cachedKubelet(t, "v1.35.4")); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("SWAPPED\n")
	time.Sleep(time.Hour)
}
