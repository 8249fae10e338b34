package existing

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/skewtest/clusters/existing/internal/sshdtest"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
	"sigs.k8s.io/skewtest/clusters/registry"
	"sigs.k8s.io/skewtest/clusters/timeouts"
)

func TestSelectNodes(t *testing.T) {
	node := func(name string, labels map[string]string, taints ...string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		for _, k := range taints {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
		}
		return n
	}
	all := []corev1.Node{
		node("cp", map[string]string{"node-role.kubernetes.io/control-plane": ""}),
		node("old-master", nil, "node-role.kubernetes.io/master"),
		node("w2", map[string]string{"kubernetes.io/os": "linux"}),
		node("w1", nil, "example.com/other"),
	}
	names := func(ns []corev1.Node) string {
		var s []string
		for _, n := range ns {
			s = append(s, n.Name)
		}
		return strings.Join(s, ",")
	}
	got, err := selectNodes(all, nil)
	if err != nil || names(got) != "w1,w2" {
		t.Errorf("workers = %q, %v; want w1,w2", names(got), err)
	}
	got, err = selectNodes(all, []string{"cp", "w2", "cp"})
	if err != nil || names(got) != "cp,w2" {
		t.Errorf("named = %q, %v; want cp,w2", names(got), err)
	}
	if _, err := selectNodes(all, []string{"w1", "ghost"}); err == nil || !strings.Contains(err.Error(), "ghost") || !strings.Contains(err.Error(), "cp, old-master, w1, w2") {
		t.Errorf("missing node error = %v", err)
	}
	if _, err := selectNodes(all[:2], nil); err == nil || !strings.Contains(err.Error(), "Config.Nodes") {
		t.Errorf("no workers error = %v", err)
	}
}

func TestNodeReadyAndAddress(t *testing.T) {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}
	if err := nodeReady(&n); err == nil {
		t.Error("node without conditions is Ready")
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "PLEG"}}
	if err := nodeReady(&n); err == nil || !strings.Contains(err.Error(), "KubeletNotReady") {
		t.Errorf("not ready: %v", err)
	}
	n.Status.Conditions[0].Status = corev1.ConditionTrue
	if err := nodeReady(&n); err != nil {
		t.Error(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "w1"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.7"}}
	if got := internalIP(&n); got != "10.0.0.7" {
		t.Errorf("internalIP = %q", got)
	}
}

func TestDumpClusterLogs(t *testing.T) {
	srv := sshdtest.Start(t)
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := sshdtest.WriteKubeconfig(kc, "https://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(Config{
		Kubeconfig:  kc,
		KubeletUnit: "kubelet-x",
		SSH:         SSHConfig{User: srv.User, Port: srv.Port, KeyFile: srv.ClientKeyFile, KnownHostsFile: srv.KnownHostsFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Down(context.Background())
	p.maxLog = int64(len(fmt.Sprintf("journal of -u kubelet-x --no-pager --since @%d\n", p.started.Unix()))) + 20
	// A stand-in for journalctl, first in the sshd's PATH: it prints its
	// arguments and a line longer than the cap below.
	journalctl := "#!/bin/sh\necho \"journal of $*\"\necho 0123456789012345678901234567890123456789\n"
	if err := os.WriteFile(filepath.Join(srv.BinDir, "journalctl"), []byte(journalctl), 0o755); err != nil {
		t.Fatal(err)
	}
	good := p.Node("node-a", srv.Addr)
	closed, err := sshdtest.ClosedPort()
	if err != nil {
		t.Fatal(err)
	}
	bad := p.Node("node-b", "127.0.0.1:"+strconv.Itoa(closed))
	p.nodes = []*Node{good, bad} // as resolved by the API server

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := filepath.Join(dir, "logs")
	err = p.DumpClusterLogs(ctx, out)
	if err == nil || !strings.Contains(err.Error(), "node-b") {
		t.Errorf("DumpClusterLogs = %v, want an error for node-b only", err)
	}
	b, rerr := os.ReadFile(filepath.Join(out, "node-a", "kubelet.log"))
	// The journal from the run's start on: before it, it is the owner's.
	// And no more of it than the cap, saying it was cut.
	head := fmt.Sprintf("journal of -u kubelet-x --no-pager --since @%d\n", p.started.Unix())
	if rerr != nil || !strings.HasPrefix(string(b), head) || !strings.Contains(string(b), "[skewtest cut this file here") || len(b) > len(head)+20+200 {
		t.Errorf("node-a kubelet.log = %q, %v; want it to begin with %q and be cut after 20 more bytes", b, rerr, head)
	}
	if err != nil && strings.Contains(err.Error(), "node-a") {
		t.Errorf("node-a failed: %v", err)
	}
}

// The run's timeout factor is one of the shared options: the provider
// takes it from there, not from the environment, and stretches its
// kubelets' waits by it.
func TestTimeoutFactorFromTheRunsOptions(t *testing.T) {
	t.Setenv(timeouts.FactorEnv, "3") // not what the run decided
	dir := t.TempDir()
	kc, key, kh := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "id"), filepath.Join(dir, "known_hosts")
	if err := sshdtest.WriteKubeconfig(kc, "https://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sshdtest.WriteKey(key); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rp, err := Descriptor.New(registry.Options{RunID: "r1", RunRoot: dir, TimeoutFactor: 7},
		Config{Kubeconfig: kc, SSH: SSHConfig{KeyFile: key, KnownHostsFile: kh}})
	if err != nil {
		t.Fatal(err)
	}
	p := rp.(*provider)
	if p.slow != 7 {
		t.Errorf("the provider's factor = %d, want the run's 7", p.slow)
	}
	if got := p.Node("node-a", "127.0.0.1:1").driver.Timeout; got != 7*systemdkubelet.DefaultTimeout {
		t.Errorf("a node's kubelet waits %s, want 7 × %s", got, systemdkubelet.DefaultTimeout)
	}
}
