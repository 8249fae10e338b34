//go:build vmnode

package existing

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/existing/internal/sshdtest"
)

// The guest: SKEWTEST_VM_SSH is its host:port, SKEWTEST_VM_KEY and
// SKEWTEST_VM_KNOWN_HOSTS what `skewtest vm up` prints; it logs in as root.
// The kubelets come from $SKEWTEST_CACHE/module, which the guest shares
// read-only at the same path.
const (
	vmSSHEnv        = "SKEWTEST_VM_SSH"
	vmKeyEnv        = "SKEWTEST_VM_KEY"
	vmKnownHostsEnv = "SKEWTEST_VM_KNOWN_HOSTS"
	vmHelperEnv     = "SKEWTEST_VM_KILL_HELPER"
)

// kopsNodeSetup lays the guest out as kops lays out a node
// (nodeup/pkg/model/kubelet.go): containerd as a unit, the kubelet at
// /usr/local/bin/kubelet as kubelet.service with its flags in
// /etc/sysconfig/kubelet (EnvironmentFile), its config in
// /var/lib/kubelet/kubelet.conf, Restart=always, KillMode=process. The
// kubelet runs standalone: there is no API server in the guest.
const kopsNodeSetup = `set -eu
C=${SKEWTEST_CACHE:-/root/.cache/skewtest}
# Idempotent: an earlier round's kubelet must not keep running a binary
# replaced under it.
systemctl stop kubelet.service 2>/dev/null || true
rm -f /usr/local/bin/kubelet.skewtest-orig /usr/local/bin/kubelet.skewtest-new
install -m 0755 "$C/module/v1.37.2/bin/kubelet" /usr/local/bin/kubelet
install -m 0755 "$C/tools/github.com_containerd_containerd_v2@v2.4.2/bin/containerd" /usr/local/bin/containerd
cat > /etc/systemd/system/containerd.service <<'UNIT'
[Service]
ExecStart=/usr/local/bin/containerd
Restart=always
Delegate=yes
KillMode=process
[Install]
WantedBy=multi-user.target
UNIT
mkdir -p /etc/sysconfig /var/lib/kubelet
cat > /var/lib/kubelet/kubelet.conf <<'CONF'
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
failSwapOn: false
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
healthzBindAddress: 127.0.0.1
healthzPort: 10248
CONF
echo 'DAEMON_ARGS="--config=/var/lib/kubelet/kubelet.conf --v=2"' > /etc/sysconfig/kubelet
cat > /lib/systemd/system/kubelet.service <<'UNIT'
[Unit]
Description=Kubernetes Kubelet Server, laid out as kops does
After=containerd.service
[Service]
EnvironmentFile=/etc/sysconfig/kubelet
ExecStart=/usr/local/bin/kubelet $DAEMON_ARGS
Restart=always
RestartSec=2s
StartLimitInterval=0
KillMode=process
[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now containerd.service
systemctl enable kubelet.service
`

func vmProvider(t *testing.T, stateDir string) (*Provider, *Node) {
	t.Helper()
	addr := os.Getenv(vmSSHEnv)
	if addr == "" {
		t.Fatalf("%s is not set: this test (build tag vmnode) needs a running guest: skewtest vm up, then its SSH address, key and known_hosts in %s, %s, %s", vmSSHEnv, vmSSHEnv, vmKeyEnv, vmKnownHostsEnv)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := sshdtest.WriteKubeconfig(kc, "https://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{
		Kubeconfig: kc, KubeletBinary: "/usr/local/bin/kubelet", RunID: "vm", StateDir: stateDir,
		SSH:    SSHConfig{User: "root", KeyFile: os.Getenv(vmKeyEnv), KnownHostsFile: os.Getenv(vmKnownHostsEnv), Timeout: time.Minute},
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

func cachedKubelet(t *testing.T, v string) binaries.Binary {
	t.Helper()
	path := filepath.Join(binaries.DefaultCacheDir(), "module", v, "bin", "kubelet")
	sum, err := binaries.FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return binaries.Binary{Component: "kubelet", Version: v, Path: path, SHA256: sum}
}

// runningVersion is what the unit's running kubelet reports.
func runningVersion(t *testing.T, ctx context.Context, n *Node) string {
	t.Helper()
	st, err := n.driver.State(ctx)
	if err != nil || st.ActiveState != "active" || st.MainPID == 0 {
		t.Fatalf("unit state %+v, %v", st, err)
	}
	res, err := exec.Output(ctx, n, "sh", "-c", `"$(readlink /proc/$1/exe)" --version`, "sh", strconv.Itoa(st.MainPID))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(res.Stdout), "Kubernetes "))
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
	timed := func(what string, f func() error) {
		t.Helper()
		s := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: %s", what, time.Since(s).Round(time.Millisecond))
	}
	timed("lay the guest out as a kops node", func() error {
		_, err := exec.Output(ctx, n, "sh", "-c", kopsNodeSetup)
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
	sc := bufio.NewScanner(out)
	swapped := false
	for sc.Scan() {
		t.Logf("helper: %s", sc.Text())
		if sc.Text() == "SWAPPED" {
			swapped = true
			break
		}
	}
	if !swapped {
		cmd.Wait()
		t.Fatal("the helper never swapped")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	var ee *osexec.ExitError
	if !errors.As(werr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want SIGKILL", werr)
	}
	t.Logf("harness killed with SIGKILL mid-hop after %s", time.Since(s).Round(time.Millisecond))
	st, err := n.driver.State(ctx)
	if err != nil || st.ActiveState == "active" {
		t.Fatalf("unit after the kill: %+v, %v", st, err)
	}
	left, err := n.driver.Original(ctx)
	if err != nil || !left.Kept || left.SHA256 != orig.SHA256 {
		t.Fatalf("after the kill: %+v, %v; want the own kubelet kept", left, err)
	}
	state, err := ReadState(killDir)
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
