//go:build images

package kind

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"sigs.k8s.io/skewtest/clusters/binaries"
	skexec "sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/images"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// TestSeveralWorkers brings up a kind cluster of three workers from the
// offline node image, each with its own first kubelet (v1.37.2, v1.36.3,
// v1.37.2), and checks what a run on any of them needs: each worker is a
// test node, Ready at its own kubelet; the workload and CSI driver images
// are in each worker's containerd; the CSI driver is registered with each
// worker's kubelet; each worker's PVs are named apart, its local volumes
// mounted in that worker alone. Then Down leaves the host as it was.
func TestSeveralWorkers(t *testing.T) {
	testgate.RequireRoot(t, "a private dockerd and kind nodes; make test-images runs it")
	sigCtx, logger, own, old := imagesTestSetup(t)
	newest := imagesTestNewest
	ctx, cancel := context.WithTimeout(sigCtx, 20*time.Minute)
	defer cancel()
	// No run, and no other test that changes the host, overlaps this one:
	// the footprint compared after Down is the host's.
	lock, err := hostlock.Acquire(ctx, hostlock.Path(), hostlock.Holder{RunID: "kind-workers-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	before := footprint.Take(ctx)

	runRoot, err := os.MkdirTemp("/tmp", "kw")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(runRoot)
	kubelets := []binaries.Binary{own, old, own}
	p, err := New(Config{RunID: "workers-" + time.Now().Format("150405"), RunRoot: runRoot, CacheDir: binaries.DefaultCacheDir(),
		APIServerVersion: newest, Kubelets: kubelets, NodeImage: "offline", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	downed := false
	defer func() {
		if !downed {
			if err := p.Down(context.WithoutCancel(ctx)); err != nil {
				t.Errorf("Down: %v", err)
			}
		}
	}()
	start := time.Now()
	if err := p.Up(ctx); err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Logf("kind cluster of %d workers up in %s", len(kubelets), time.Since(start).Round(100*time.Millisecond))

	ns, err := p.TestNodes(ctx)
	if err != nil || len(ns) != len(kubelets) {
		t.Fatalf("TestNodes = %v, %v; want %d workers", ns, err, len(kubelets))
	}
	rc, err := p.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(rc)
	seen := map[string]bool{}
	for i, n := range ns {
		if seen[n.String()] {
			t.Errorf("worker %s listed twice", n)
		}
		seen[n.String()] = true
		node, err := cs.CoreV1().Nodes().Get(ctx, n.String(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := node.Status.NodeInfo.KubeletVersion; got != kubelets[i].Version {
			t.Errorf("worker %d (%s) runs kubelet %s, want its own first kubelet %s", i+1, n, got, kubelets[i].Version)
		}
		if _, tainted := controlPlaneTaint(node); tainted {
			t.Errorf("worker %s has the control plane's taint", n)
		}
		csiNode, err := cs.StorageV1().CSINodes().Get(ctx, n.String(), metav1.GetOptions{})
		if err != nil || !hasDriver(csiNode, csidriver.Name) {
			t.Errorf("CSI driver %s not registered with %s's kubelet: %v", csidriver.Name, n, err)
		}
		res, err := skexec.Output(ctx, n, "crictl", "images", "-q", images.Workload)
		if err != nil || strings.TrimSpace(res.Stdout) == "" {
			t.Errorf("workload image %s not in %s's containerd: %v %q", images.Workload, n, err, res.Stdout)
		}
		res, err = skexec.Output(ctx, n, "crictl", "images", "-q", images.CSIDriver)
		if err != nil || strings.TrimSpace(res.Stdout) == "" {
			t.Errorf("CSI driver image %s not in %s's containerd: %v %q", images.CSIDriver, n, err, res.Stdout)
		}
	}

	// Each worker's local volumes: named apart, mounted in that worker.
	var names []string
	for i, n := range ns {
		req := storage.Request{Kind: storage.Local, Namespace: "default", Claims: []string{"data-web-0"}, Node: n.String()}
		vols, err := p.ProvisionVolumes(ctx, req)
		if err != nil {
			t.Fatalf("ProvisionVolumes on %s: %v", n, err)
		}
		if len(vols.PVs) != 1 || vols.DeleteStorageClass {
			t.Fatalf("ProvisionVolumes on %s: %+v; want one PV and the StorageClass left to the cluster (several workers share it)", n, vols)
		}
		names = append(names, vols.PVs[0].Name)
		for j, other := range ns {
			res, _ := skexec.Output(ctx, other, "sh", "-c", "grep -c ' "+vols.PVs[0].Path+" ' /proc/self/mountinfo || true")
			if mounted := strings.TrimSpace(res.Stdout) != "0"; mounted != (i == j) {
				t.Errorf("PV %s of %s mounted in %s: %v", vols.PVs[0].Name, n, other, mounted)
			}
		}
	}
	if names[0] == names[1] || names[1] == names[2] || names[0] == names[2] {
		t.Errorf("the workers' PVs share names: %v", names)
	}
	t.Logf("PVs: %v", names)
	if _, err := p.ProvisionVolumes(ctx, storage.Request{Kind: storage.Local, Claims: []string{"x"}, Node: p.name + "-control-plane"}); err == nil {
		t.Errorf("ProvisionVolumes on the control plane: no error, want one naming the workers")
	}

	downed = true
	start = time.Now()
	if err := p.Down(context.WithoutCancel(ctx)); err != nil {
		t.Fatalf("Down: %v", err)
	}
	t.Logf("kind cluster of %d workers down in %s", len(kubelets), time.Since(start).Round(100*time.Millisecond))
	for _, d := range footprint.Diff(before, footprint.Take(ctx)) {
		t.Errorf("host changed: %s", d)
	}
}

func controlPlaneTaint(n *corev1.Node) (corev1.Taint, bool) {
	for _, t := range n.Spec.Taints {
		if t.Key == "node-role.kubernetes.io/control-plane" {
			return t, true
		}
	}
	return corev1.Taint{}, false
}

func hasDriver(n *storagev1.CSINode, driver string) bool {
	for _, d := range n.Spec.Drivers {
		if d.Name == driver {
			return true
		}
	}
	return false
}
