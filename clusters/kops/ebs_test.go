package kops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"

	"sigs.k8s.io/skewtest/clusters/kops/internal/fakeaws"
)

// fakeKubelet is the worker's kubelet for the EBS tests: the node side is
// tested for real in the VM (vmnode_test.go); here it only keeps which
// binary runs and lets a test move the world's attachments as the
// kubelet's stop and start would.
type fakeKubelet struct {
	mu      sync.Mutex
	running string // sha256
	own     string
	boot    string
	calls   []string
	onStart func()
}

func (f *fakeKubelet) rec(c string) { f.mu.Lock(); f.calls = append(f.calls, c); f.mu.Unlock() }

func (f *fakeKubelet) Command(ctx context.Context, name string, args ...string) exec.Cmd {
	panic("fake kubelet runs no commands")
}
func (f *fakeKubelet) String() string         { return "ip-172-20-1-1.ec2.internal" }
func (f *fakeKubelet) KubeletRootDir() string { return layout.RootDir }
func (f *fakeKubelet) StopKubelet(context.Context) error {
	f.rec("stop")
	return nil
}
func (f *fakeKubelet) SwapKubelet(_ context.Context, b binaries.Binary) error {
	f.rec("swap " + b.Version)
	f.mu.Lock()
	f.running = b.SHA256
	f.mu.Unlock()
	return nil
}
func (f *fakeKubelet) StartKubelet(context.Context) error {
	f.rec("start")
	if f.onStart != nil {
		f.onStart()
	}
	return nil
}
func (f *fakeKubelet) KubeletLog(context.Context) (string, error) { return "", nil }
func (f *fakeKubelet) FindRootDir(context.Context) error          { return nil }

func (f *fakeKubelet) Original(context.Context) (systemdkubelet.Original, error) {
	return systemdkubelet.Original{Binary: layout.Binary, SHA256: f.own}, nil
}
func (f *fakeKubelet) Restore(_ context.Context, sha string) error {
	f.rec("restore " + sha[:8])
	f.mu.Lock()
	f.running = sha
	f.mu.Unlock()
	return nil
}
func (f *fakeKubelet) Running(context.Context) (runningKubelet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return runningKubelet{PID: 42, SHA256: f.running, BootID: f.boot}, nil
}

const (
	ownSHA = "1111111111111111111111111111111111111111111111111111111111111111"
	oldSHA = "2222222222222222222222222222222222222222222222222222222222222222"
)

// ebsRun is a cluster up against the fakes with three PVs of the EBS CSI
// driver, their volumes attached to the worker, and the fake kubelet
// behind the worker's Node.
func ebsRun(t *testing.T) (*testRun, *fakeKubelet, []string) {
	t.Helper()
	tr := newTestRun(t, nil)
	ctx := t.Context()
	if err := tr.p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	fk := &fakeKubelet{running: ownSHA, own: ownSHA, boot: "boot-1"}
	tr.p.node.k = fk
	var vols []string
	if err := tr.store.Update(func(w *fakeaws.World) error {
		for i := range 3 {
			id := w.ID("vol")
			vols = append(vols, id)
			w.Volumes = append(w.Volumes, &fakeaws.Volume{ID: id, Tags: map[string]string{tagCluster: tr.p.cfg.ClusterName(), tagRunID: tr.p.cfg.RunID},
				Attachments: []fakeaws.Attachment{{Instance: tr.p.node.instance.ID, State: "attached"}}})
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pvc-%d", i)},
				Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
					CSI: &corev1.CSIPersistentVolumeSource{Driver: ebsDriver, VolumeHandle: id}}}}
			if _, err := tr.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.p.Down(context.Background()); err != nil {
			t.Errorf("Down: %v", err)
		}
	})
	return tr, fk, vols
}

// moveAttachments makes the world report every run volume's attachment
// as state for reads more reads.
func moveAttachments(t *testing.T, tr *testRun, state string, reads int) {
	if err := tr.store.Update(func(w *fakeaws.World) error {
		for _, v := range w.Volumes {
			if v.Tags[tagRunID] != "" && !v.DeleteOnTermination {
				for i := range v.Attachments {
					v.Attachments[i].Moving, v.Attachments[i].Lag = state, reads
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestEBSEvidenceThroughSwap: a hop (stop, swap, start) records each PV's
// EBS volume (by its CSI volumeHandle) and its attachment to the worker's
// instance before and after, waits while EC2 still reads the attachments
// as attaching, and puts IDs, states and the settle time in the step's
// notes and logs/ebs-evidence.txt.
func TestEBSEvidenceThroughSwap(t *testing.T) {
	t.Parallel()
	tr, fk, vols := ebsRun(t)
	ctx := t.Context()
	n := tr.p.node
	if err := n.StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.SwapKubelet(ctx, binaries.Binary{Component: "kubelet", Version: "v1.36.3", Path: "/dev/null", SHA256: oldSHA}); err != nil {
		t.Fatal(err)
	}
	fk.onStart = func() { moveAttachments(t, tr, "attaching", 3) }
	if err := n.StartKubelet(ctx); err != nil {
		t.Fatalf("StartKubelet: %v", err)
	}
	notes := strings.Join(n.Notes(), "\n")
	for _, v := range vols {
		if strings.Count(notes, v+" (pvc-") != 2 {
			t.Errorf("volume %s not in both notes:\n%s", v, notes)
		}
	}
	for _, want := range []string{"EBS before the kubelet stops", "EBS after the kubelet started", "settled in", "in-use, attached to " + n.instance.ID} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "attaching to") {
		t.Errorf("the after-snapshot was taken before the attachments settled:\n%s", notes)
	}
	t.Logf("notes:\n%s", notes)
	dir := filepath.Join(tr.artifacts, "logs")
	if err := tr.p.DumpClusterLogs(ctx, dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ebs-evidence.txt"))
	if err != nil || !strings.Contains(string(b), vols[0]) || !strings.Contains(string(b), "attaching") {
		t.Errorf("ebs-evidence.txt %q, %v: want every read, the attaching ones too", b, err)
	}
}

// TestEBSStuckAttachmentFailsTheHop: an attachment still detaching after
// the settle timeout fails the start, naming the volume and its state.
func TestEBSStuckAttachmentFailsTheHop(t *testing.T) {
	t.Parallel()
	tr, fk, vols := ebsRun(t)
	ctx := t.Context()
	n := tr.p.node
	if err := n.StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	fk.onStart = func() { moveAttachments(t, tr, "detaching", 1_000_000) }
	err := n.StartKubelet(ctx)
	if err == nil || !strings.Contains(err.Error(), "stuck") || !strings.Contains(err.Error(), vols[0]+" (pvc-0) detaching") {
		t.Fatalf("StartKubelet: %v, want the stuck volume named", err)
	}
	moveAttachments(t, tr, "", 0)
}

// TestEBSDetachedAfterHopFails: a volume attached before the hop and not
// after fails it.
func TestEBSDetachedAfterHopFails(t *testing.T) {
	t.Parallel()
	tr, fk, vols := ebsRun(t)
	ctx := t.Context()
	n := tr.p.node
	if err := n.StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	fk.onStart = func() {
		tr.store.Update(func(w *fakeaws.World) error {
			for _, v := range w.Volumes {
				if v.ID == vols[1] {
					v.Attachments = nil
				}
			}
			return nil
		})
	}
	err := n.StartKubelet(ctx)
	if err == nil || !strings.Contains(err.Error(), vols[1]) || !strings.Contains(err.Error(), `is "" after the kubelet started`) {
		t.Fatalf("StartKubelet: %v", err)
	}
}

// TestKubeletCheckedAfterReboot: after a reboot nodeup has put kops's own
// kubelet back; the start fails naming both sums, and the note says the
// node rebooted. Down puts kops's kubelet back.
func TestKubeletCheckedAfterReboot(t *testing.T) {
	t.Parallel()
	tr, fk, _ := ebsRun(t)
	ctx := t.Context()
	n := tr.p.node
	if err := n.StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.SwapKubelet(ctx, binaries.Binary{Version: "v1.36.3", Path: "/dev/null", SHA256: oldSHA}); err != nil {
		t.Fatal(err)
	}
	fk.onStart = func() {
		fk.mu.Lock()
		fk.boot, fk.running = "boot-2", ownSHA
		fk.mu.Unlock()
	}
	err := n.StartKubelet(ctx)
	if err == nil || !strings.Contains(err.Error(), "sha256 "+ownSHA) || !strings.Contains(err.Error(), "not the "+oldSHA) || !strings.Contains(err.Error(), "nodeup") {
		t.Fatalf("StartKubelet after a reboot: %v", err)
	}
	if notes := strings.Join(n.Notes(), "\n"); !strings.Contains(notes, "rebooted (boot ID boot-2, was boot-1)") {
		t.Errorf("notes: %s", notes)
	}
	if err := tr.p.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if fk.calls[len(fk.calls)-1] != "restore 11111111" {
		t.Errorf("Down did not put kops's kubelet back: %v", fk.calls)
	}
}
