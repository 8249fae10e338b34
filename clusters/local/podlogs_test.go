package local

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
)

// Teardown removes only the pod log directories a run's old kubelets made
// in /var/log/pods (those not there before, named as a kubelet names
// them), the links into them, and the directory only if the run made it.
func TestRemoveRunPodLogs(t *testing.T) {
	root := t.TempDir()
	pods, links := filepath.Join(root, "pods"), filepath.Join(root, "containers")
	const (
		theirs = "default_web-0_0b9c6a4e-1111-4c1e-9d1e-000000000001"
		ours   = "skewtest_web-0_0b9c6a4e-2222-4c1e-9d1e-000000000002"
		notPod = "notes"
	)
	for _, d := range []string{theirs, ours, notPod} {
		if err := os.MkdirAll(filepath.Join(pods, d, "app"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pods, d, "app", "0.log"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(links, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]string{"web-0_skewtest_app-1.log": ours, "web-0_default_app-2.log": theirs} {
		if err := os.Symlink(filepath.Join(pods, d, "app", "0.log"), filepath.Join(links, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeRunPodLogs(pods, []string{theirs}, true, links); err != nil {
		t.Fatal(err)
	}
	left := podLogEntries(pods)
	slices.Sort(left)
	if want := []string{theirs, notPod}; !slices.Equal(left, want) {
		t.Errorf("left %v in the pod log dir, want %v: only the run's pod dirs go", left, want)
	}
	if _, err := os.Lstat(filepath.Join(links, "web-0_skewtest_app-1.log")); !os.IsNotExist(err) {
		t.Errorf("the link into the run's pod log dir is still there (%v)", err)
	}
	if _, err := os.Lstat(filepath.Join(links, "web-0_default_app-2.log")); err != nil {
		t.Errorf("the link into another pod's log dir was removed: %v", err)
	}

	// A directory the run made goes once nothing is left in it.
	made := filepath.Join(root, "made")
	if err := os.MkdirAll(filepath.Join(made, ours, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := removeRunPodLogs(made, nil, true, links); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(made); !os.IsNotExist(err) {
		t.Errorf("the pod log dir the run made is still there (%v)", err)
	}
	if err := removeRunPodLogs(filepath.Join(root, "never"), nil, true, links); err != nil {
		t.Errorf("a missing pod log dir: %v", err)
	}
}

func TestWritesHostPodLogs(t *testing.T) {
	for v, want := range map[string]bool{"v1.26.15": true, "v1.28.5": true, "v1.29.6": true, "v1.30.0": false, "v1.37.2": false} {
		if got := writesHostPodLogs(version.MustParseSemantic(v)); got != want {
			t.Errorf("writesHostPodLogs(%s) = %v, want %v", v, got, want)
		}
	}
}

// A kubelet before 1.27 gets the run's containerd as a flag: it has no
// containerRuntimeEndpoint field, and would dial the host's containerd.
func TestKubeletFlagsPerVersion(t *testing.T) {
	dir := t.TempDir()
	p := &Provider{dir: dir, nodeIP: net.IPv4(192, 0, 2, 10)}
	ports, err := p.allocatePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.newNode(0, layoutOf(dir, 0).state(testRunID), ports[0], binaries.Binary{})
	if err != nil {
		t.Fatal(err)
	}
	flag := "--container-runtime-endpoint=unix://" + n.l.containerdSocket()
	for v, want := range map[string]bool{"v1.26.15": true, "v1.27.16": false, "v1.28.5": false, "v1.37.2": false} {
		got := strings.Join(n.kubeletFlags(version.MustParseSemantic(v)), " ")
		if strings.Contains(got, flag) != want {
			t.Errorf("kubelet %s flags %q: runtime endpoint flag present = %v, want %v", v, got, !want, want)
		}
		if !strings.Contains(got, "--root-dir="+n.KubeletRootDir()) {
			t.Errorf("kubelet %s flags lack --root-dir: %q", v, got)
		}
	}
}
