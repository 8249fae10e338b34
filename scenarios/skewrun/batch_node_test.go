package skewrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

// A batch node is handed to the next run only when it holds nothing a live
// pod does not explain. These snapshots are real: the snapshot script runs
// on a kubelet root under a temporary directory, with a mount table of
// its own (no mounts are made).
func TestLeftoversIn(t *testing.T) {
	const (
		live = "11111111-1111-1111-1111-111111111111"
		dead = "22222222-2222-2222-2222-222222222222"
		pv   = "skewtest-csi-ab12-b1-0"
	)
	global := "plugins/kubernetes.io/csi/csi.skewtest.k8s.io/3bf725cb/globalmount"
	podMount := func(uid string) string {
		return "pods/" + uid + "/volumes/kubernetes.io~csi/" + pv + "/mount"
	}
	withPVC := func(uid string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", UID: types.UID(uid)},
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-web-0"}}}}}}
	}
	noVolume := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "idle", UID: live}}

	// snapshot makes a kubelet root holding dirs (relative paths) and a
	// mount table with mounts (relative to the root) as tmpfs, and reads it.
	snapshot := func(t *testing.T, dirs, mounts []string) *nodestate.Snapshot {
		t.Helper()
		root := t.TempDir()
		for _, d := range append(append([]string{"pods", "plugins/kubernetes.io/csi/volumeDevices/staging"}, dirs...), mounts...) {
			if err := os.MkdirAll(filepath.Join(root, d), 0o750); err != nil {
				t.Fatal(err)
			}
		}
		table := "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
		for i, m := range mounts {
			table += fmt.Sprintf("%d 27 0:%d / %s rw,relatime shared:%d - tmpfs csi.skewtest.k8s.io/vol-%s rw\n", 100+i, 40+i, filepath.Join(root, m), i+2, pv)
		}
		mi := filepath.Join(t.TempDir(), "mountinfo")
		if err := os.WriteFile(mi, []byte(table), 0o600); err != nil {
			t.Fatal(err)
		}
		snap, err := nodestate.Reader{Node: exec.Local{}, KubeletRoot: root, MountinfoPath: mi}.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}

	for _, tc := range []struct {
		name   string
		pods   []corev1.Pod
		dirs   []string
		mounts []string
		want   []string // one substring per leftover, in order
	}{{
		name:   "a live pod and its volume: clean",
		pods:   []corev1.Pod{withPVC(live)},
		mounts: []string{global, podMount(live)},
	}, {
		name: "an empty node: clean, the kubelet's own dirs under the CSI plugin's are not a run's",
	}, {
		name:   "a dead pod's mounted volume: named",
		pods:   []corev1.Pod{withPVC(live)},
		mounts: []string{global, podMount(live), podMount(dead)},
		want:   []string{"pod " + dead + ": pod-dir", podMount(dead) + ": tmpfs"},
	}, {
		name: "a dead pod's directory with nothing mounted: named",
		dirs: []string{"pods/" + dead + "/volumes/kubernetes.io~csi/" + pv},
		want: []string{dead},
	}, {
		name:   "a global mount while no pod uses a volume: named",
		pods:   []corev1.Pod{noVolume},
		mounts: []string{global},
		want:   []string{"globalmount with no pod on the node using a volume"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := leftoversIn(tc.pods, snapshot(t, tc.dirs, tc.mounts))
			if len(got) != len(tc.want) {
				t.Fatalf("leftovers %q, want %d naming %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("leftover %d is %q, want it to name %q", i, got[i], w)
				}
			}
		})
	}
}
