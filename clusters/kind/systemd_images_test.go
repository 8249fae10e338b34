//go:build images

package kind

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apimachinerywait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"sigs.k8s.io/skewtest/clusters/binaries"
	skexec "sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// TestSystemdDriverOnKindNode drives the shared systemd kubelet driver
// against a real systemd: the worker of a kind cluster made from the
// offline node image (which make test-images builds). It stops the unit and
// checks no kubelet process is left, swaps to an older kubelet and sees
// the node Ready at that version through the API server, swaps to a
// kubelet that exits at once and sees Start fail fast with systemd's
// restart count and the journal, then restores the node's own kubelet and
// sees it Ready at its own version again.
func TestSystemdDriverOnKindNode(t *testing.T) {
	testgate.RequireRoot(t, "a private dockerd and kind nodes; make test-images runs it")
	sigCtx, _, own, old := imagesTestSetup(t)
	newest := imagesTestNewest
	ctx, cancel := context.WithTimeout(sigCtx, 30*time.Minute)
	defer cancel()

	// A short run root: the private dockerd's unix sockets live under it.
	runRoot, err := os.MkdirTemp("/tmp", "sd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(runRoot)
	p, err := New(Config{RunID: "sysd-" + time.Now().Format("150405"), RunRoot: runRoot, CacheDir: binaries.DefaultCacheDir(),
		APIServerVersion: newest, Kubelets: []binaries.Binary{own}, NodeImage: "offline"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Down(context.WithoutCancel(ctx)); err != nil {
			t.Errorf("Down: %v", err)
		}
	}()
	start := time.Now()
	if err := p.Up(ctx); err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Logf("kind cluster up in %s", time.Since(start).Round(time.Second))
	rc, err := p.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(rc)
	n := p.workers[0]
	d := n.driver()
	d.Log = nil
	readyAt := func(want string) {
		t.Helper()
		last := ""
		err := apimachinerywait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			node, err := cs.CoreV1().Nodes().Get(ctx, n.String(), metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = node.Status.NodeInfo.KubeletVersion
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && node.Status.NodeInfo.KubeletVersion == want {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("node %s not Ready at kubelet %s: %v (last: %s)", n, want, err, last)
		}
	}
	kubeletPIDs := func() string {
		res, _ := skexec.Output(ctx, n, "sh", "-c", "pidof kubelet || true")
		return strings.TrimSpace(res.Stdout)
	}

	orig, err := d.Original(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node's own kubelet: %+v", orig)

	timed := func(what string, f func() error) {
		t.Helper()
		s := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: %s", what, time.Since(s).Round(time.Millisecond))
	}
	timed("stop", func() error { return d.Stop(ctx) })
	if pids := kubeletPIDs(); pids != "" {
		t.Fatalf("kubelet processes %s still run after Stop", pids)
	}
	timed("swap to "+old.Version, func() error { return d.Swap(ctx, old) })
	timed("start "+old.Version, func() error { return d.Start(ctx) })
	timed("Ready at "+old.Version, func() error { readyAt(old.Version); return nil })

	// A kubelet that exits at once, as one rejecting a flag would.
	crash := filepath.Join(t.TempDir(), "kubelet")
	if err := os.WriteFile(crash, []byte("#!/bin/sh\necho 'skewtest: this kubelet refuses to start' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	crashBin := binaries.Binary{Component: "kubelet", Version: "v0.0.0-crash", Path: crash}
	timed("stop", func() error { return d.Stop(ctx) })
	timed("swap to a crashing kubelet", func() error { return d.Swap(ctx, crashBin) })
	s := time.Now()
	err = d.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "systemd restarted it") || !strings.Contains(err.Error(), "this kubelet refuses to start") {
		t.Fatalf("start of a crashing kubelet = %v", err)
	}
	t.Logf("start of a crashing kubelet failed after %s: %v", time.Since(s).Round(time.Millisecond), err)

	timed("restore", func() error { return d.Restore(ctx, orig.SHA256) })
	timed("Ready at "+own.Version+" after the restore", func() error { readyAt(own.Version); return nil })
	if out, _ := skexec.Output(ctx, n, "sh", "-c", "ls /usr/bin/kubelet*"); strings.TrimSpace(out.Stdout) != "/usr/bin/kubelet" {
		t.Errorf("files left beside the kubelet: %q", out.Stdout)
	}
	if got, err := d.Original(ctx); err != nil || got.SHA256 != orig.SHA256 || got.Kept {
		t.Errorf("/usr/bin/kubelet after the restore: %+v (%v), want the node's own, sha256 %s", got, err, orig.SHA256)
	}

	// The same node laid out as kops lays out its nodes: the binary in
	// /usr/local/bin, the flags in /etc/sysconfig/kubelet through
	// EnvironmentFile, the config in /var/lib/kubelet/kubelet.conf,
	// Restart=always, KillMode=process.
	if res, err := skexec.Output(ctx, n, "sh", "-c", kopsLayoutScript); err != nil {
		t.Fatalf("lay the node out as kops does: %v\n%s", err, res.Stdout)
	}
	readyAt(own.Version)
	kops := &systemdkubelet.Driver{Node: n, Layout: systemdkubelet.Layout{
		Unit: "kubelet", Binary: "/usr/local/bin/kubelet", EnvironmentFile: "/etc/sysconfig/kubelet",
		Config: "/var/lib/kubelet/kubelet.conf", RootDir: "/var/lib/kubelet",
	}, PollInterval: 100 * time.Millisecond, Timeout: 2 * time.Minute}
	unit, err := skexec.Output(ctx, n, "systemctl", "cat", "kubelet")
	if err != nil || !strings.Contains(unit.Stdout, "EnvironmentFile=/etc/sysconfig/kubelet") || !strings.Contains(unit.Stdout, "Restart=always") || strings.Contains(unit.Stdout, "10-kubeadm") {
		t.Fatalf("the kops-layout unit: %v\n%s", err, unit.Stdout)
	}
	kopsOrig, err := kops.Original(ctx)
	if err != nil {
		t.Fatal(err)
	}
	envBefore, err := skexec.Output(ctx, n, "cat", "/etc/sysconfig/kubelet")
	if err != nil {
		t.Fatal(err)
	}
	// The older kubelet gets flags of its own: one more, to see that the
	// swapped EnvironmentFile is what the unit started.
	oldArgs := strings.Replace(envBefore.Stdout, `DAEMON_ARGS="`, `DAEMON_ARGS="--v=3 `, 1)
	timed("kops layout: stop", func() error { return kops.Stop(ctx) })
	timed("kops layout: swap to "+old.Version+" with its own flags", func() error {
		return kops.Swap(ctx, old, systemdkubelet.File{Path: "/etc/sysconfig/kubelet", Content: []byte(oldArgs)})
	})
	timed("kops layout: start "+old.Version, func() error { return kops.Start(ctx) })
	timed("kops layout: Ready at "+old.Version, func() error { readyAt(old.Version); return nil })
	st, err := kops.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := skexec.Output(ctx, n, "sh", "-c", `tr '\0' ' ' < /proc/$1/cmdline`, "sh", strconv.Itoa(st.MainPID))
	if err != nil || !strings.HasPrefix(cmdline.Stdout, "/usr/local/bin/kubelet --v=3 ") {
		t.Errorf("the unit's kubelet runs %q (%v), want /usr/local/bin/kubelet with the swapped flags", cmdline.Stdout, err)
	}
	timed("kops layout: restore", func() error { return kops.Restore(ctx, kopsOrig.SHA256) })
	timed("kops layout: Ready at "+own.Version+" after the restore", func() error { readyAt(own.Version); return nil })
	envAfter, err := skexec.Output(ctx, n, "cat", "/etc/sysconfig/kubelet")
	if err != nil || envAfter.Stdout != envBefore.Stdout {
		t.Errorf("/etc/sysconfig/kubelet after the restore: %q (%v), want %q", envAfter.Stdout, err, envBefore.Stdout)
	}
	if out, _ := skexec.Output(ctx, n, "sh", "-c", "ls /usr/local/bin/kubelet* /etc/sysconfig/kubelet*"); len(strings.Fields(out.Stdout)) != 2 {
		t.Errorf("files left beside the kops layout's: %q", out.Stdout)
	}
}

// kopsLayoutScript turns kind's kubelet unit into kops's layout
// (nodeup/pkg/model/kubelet.go), keeping the flags kubeadm gave it.
// systemd splits an unquoted $DAEMON_ARGS into words, so each flag is
// one argument.
const kopsLayoutScript = `set -eu
cp -p /usr/bin/kubelet /usr/local/bin/kubelet
. /var/lib/kubelet/kubeadm-flags.env
mkdir -p /etc/sysconfig
printf 'DAEMON_ARGS="%s"\n' "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/kubelet.conf $KUBELET_KUBEADM_ARGS" > /etc/sysconfig/kubelet
cp -p /var/lib/kubelet/config.yaml /var/lib/kubelet/kubelet.conf
rm -f /etc/systemd/system/kubelet.service.d/10-kubeadm.conf
cat > /etc/systemd/system/kubelet.service <<'UNIT'
[Unit]
Description=Kubernetes Kubelet Server, laid out as kops does
[Service]
EnvironmentFile=/etc/sysconfig/kubelet
ExecStart=/usr/local/bin/kubelet $DAEMON_ARGS
Restart=always
RestartSec=2s
StartLimitInterval=0
KillMode=process
Slice=kubelet.slice
CPUAccounting=true
MemoryAccounting=true
[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl restart kubelet
`
