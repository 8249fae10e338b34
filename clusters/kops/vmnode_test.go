//go:build vmnode

package kops

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/kubefake"
	"sigs.k8s.io/skewtest/clusters/internal/sshnode"
	"sigs.k8s.io/skewtest/clusters/internal/vmnode"
	"sigs.k8s.io/skewtest/clusters/kops/internal/fakeaws"
)

// TestKopsProviderNodeInVM drives the kops provider's worker Node against
// a real kubelet under the real systemd of a Debian 12 guest laid out as
// a kops node (the layout clusters/existing's VM test uses too), over the
// shared SSH code (clusters/internal/sshnode) with the host key checked: a hop (stop,
// swap to v1.36.3 with its sha256 checked on the node, start, the running
// process's binary checked), nodeup's boot-time reinstall of kops's
// kubelet caught by VerifyKubelet, and kops's own kubelet put back. The
// guest has no API server and no EBS: the API side is client-go's fake
// clientset holding no PV, so the EBS evidence here is empty.
func TestKopsProviderNodeInVM(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Minute)
	defer cancel()
	addr := vmnode.Addr(t)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	p, err := newProvider(Config{RunID: "vm", RunDir: filepath.Join(t.TempDir(), "run"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	// The EBS evidence reads PVs through the run's kubeconfig: client-go's
	// fake clientset stands behind it, holding none.
	if err := os.MkdirAll(p.cfg.RunDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.KubeconfigPath(), []byte(fakeaws.FakeKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	p.kube = func(*rest.Config) (kubeAPI, error) { return kubefake.New(), nil }
	p.clients = &awsClients{}
	dialer, err := sshnode.NewDialer(&sshnode.Config{User: "root", KeyFile: os.Getenv(vmnode.KeyEnv),
		KnownHostsFile: os.Getenv(vmnode.KnownHostsEnv), Timeout: time.Minute}, log)
	if err != nil {
		t.Fatal(err)
	}
	sk := newSSHKubelet(sshnode.New(dialer, "vm-node", addr), log, 1)
	sn, d := sk.Node, sk.d
	// TCG: the kubelet's start is 10-18 times slower than on hardware.
	d.Timeout, d.PollInterval = 10*time.Minute, time.Second
	n := newNode(p, sk, workerInstance{ID: "vm"})
	timed := func(what string, f func() error) { t.Helper(); vmnode.Timed(t, what, f) }
	timed("lay the guest out as a kops node", func() error {
		_, err := exec.Output(ctx, sn, "sh", "-c", vmnode.KopsNodeSetup)
		return err
	})
	timed("start kops's kubelet", func() error { return d.Start(ctx) })
	if v := vmnode.RunningVersion(t, ctx, sn, d); v != "v1.37.2" {
		t.Fatalf("kops's kubelet is %q", v)
	}
	envBefore, err := exec.Output(ctx, sn, "cat", layout.EnvironmentFile, layout.Config)
	if err != nil {
		t.Fatal(err)
	}

	old := vmnode.CachedKubelet(t, "v1.36.3")
	timed("hop: stop", func() error { return n.StopKubelet(ctx) })
	timed("hop: swap to v1.36.3 (upload over SSH, sha256 on the node)", func() error { return n.SwapKubelet(ctx, old) })
	timed("hop: start v1.36.3, running binary checked", func() error { return n.StartKubelet(ctx) })
	if v := vmnode.RunningVersion(t, ctx, sn, d); v != "v1.36.3" {
		t.Fatalf("after the hop the unit runs %q", v)
	}
	t.Logf("notes: %q", n.Notes())

	// What nodeup does at boot through kops-configuration.service.
	timed("nodeup reinstalls kops's kubelet", func() error {
		_, err := exec.Output(ctx, sn, "systemctl", "start", "kops-configuration.service")
		return err
	})
	// Start on the running unit only waits for its /healthz.
	timed("kops's kubelet healthy again", func() error { return d.Start(ctx) })
	err = n.VerifyKubelet(ctx)
	if err == nil || !strings.Contains(err.Error(), "nodeup") || !strings.Contains(err.Error(), old.SHA256) {
		t.Fatalf("VerifyKubelet after nodeup's reinstall: %v, want it caught", err)
	}
	t.Logf("caught: %v", err)

	timed("restore kops's own kubelet", func() error { return n.restore(ctx) })
	if v := vmnode.RunningVersion(t, ctx, sn, d); v != "v1.37.2" {
		t.Fatalf("after the restore the unit runs %q", v)
	}
	if err := n.VerifyKubelet(ctx); err != nil {
		t.Fatalf("after the restore: %v", err)
	}
	if res, _ := exec.Output(ctx, sn, "sh", "-c", "ls /usr/local/bin/kubelet*"); strings.TrimSpace(res.Stdout) != "/usr/local/bin/kubelet" {
		t.Errorf("left beside the kubelet: %q", res.Stdout)
	}
	envAfter, err := exec.Output(ctx, sn, "cat", layout.EnvironmentFile, layout.Config)
	if err != nil || envAfter.Stdout != envBefore.Stdout {
		t.Errorf("kops's flags or config changed: %q -> %q (%v)", envBefore.Stdout, envAfter.Stdout, err)
	}
}
