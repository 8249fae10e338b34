package reconstruction

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// The kubelet lists pods/ by name: the surviving pod must come after
// every deleted one for #119921's sharing to happen.
func TestSortsAfter(t *testing.T) {
	for _, tc := range []struct {
		uid    types.UID
		others []string
		want   bool
	}{
		{otherID, []string{keptUID}, true},
		{keptUID, []string{otherID}, false},
		{keptUID, []string{keptUID}, false},
		{"ffffffff-0000-4000-8000-000000000000", []string{keptUID, otherID}, true},
		{otherID, []string{keptUID, "ffffffff-0000-4000-8000-000000000000"}, false},
	} {
		if got := sortsAfter(tc.uid, tc.others); got != tc.want {
			t.Errorf("sortsAfter(%s, %v) = %v, want %v", tc.uid, tc.others, got, tc.want)
		}
	}
}

// The reboot takes every mount of the deleted pod and of the survivor,
// deepest first, and leaves the volume's CSI global mount and a third
// pod's mounts alone.
func TestSharedRebootMounts(t *testing.T) {
	third := "5f0b8a2e-3333-4c1e-9d2b-cccccccccccc"
	old := "pods/" + keptUID + "/volumes/kubernetes.io~csi/" + keptPV + "/mount"
	survivor := "pods/" + otherID + "/volumes/kubernetes.io~csi/" + keptPV + "/mount"
	subpath := "pods/" + otherID + "/volume-subpaths/" + keptPV + "/workload/1"
	global := nodestate.CSIGlobalMountPath("csi.skewtest.k8s.io", "vol-"+keptPV)
	snap := keptSnapshot(t, t.TempDir(), map[string]int{
		old: 101, survivor: 102, subpath: 103, global: 104,
		"pods/" + third + "/volumes/kubernetes.io~csi/" + keptPV + "/mount": 105,
	})
	got := sharedRebootMounts(snap, []string{keptUID, otherID})
	want := []string{snap.Abs(subpath), snap.Abs(old), snap.Abs(survivor)}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("mounts to take:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Only the old reconstruction's marking of the survivor's volume as
// Mounted is #119921; its pod missing from the desired state (the
// populator's race), a log that says neither, or no log at all is another
// failure.
func TestSharerNotPublished(t *testing.T) {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-sharer-0", UID: otherID}}
	marked := `I1206 01:02:03.000000 1 reconstruct.go:181] "Volume is marked as mounted and added into the actual state" pod="/" podName="` + otherID + `" volumeName="kubernetes.io/csi/csi.skewtest.k8s.io^vol-x"`
	markedOld := strings.ReplaceAll(marked, otherID, keptUID)
	notInDSW := `I1206 01:02:03.000000 1 reconstruct.go:110] "Reconciler sync states: could not find pod information in desired state, update it in actual state" reconstructedVolume={podName:` + otherID + `}`
	vol := "/k/pods/" + otherID + "/volumes/kubernetes.io~csi/" + keptPV + "/mount"
	seen, err := sharerNotPublished(p, keptPV, vol, 30*time.Second, markedOld+"\n"+marked+"\n", true)
	if err != nil || !strings.Contains(seen, "marked it Mounted") || !strings.Contains(seen, `podName="`+otherID) || !strings.Contains(seen, vol) {
		t.Errorf("#119921's marking: %q, %v", seen, err)
	}
	for name, tc := range map[string]struct {
		log     string
		haveLog bool
		want    string
	}{
		"the populator's race":       {notInDSW + "\n" + marked + "\n", true, "populator had not added it"},
		"only the deleted pod's":     {markedOld + "\n", true, "does not say it marked the volume Mounted"},
		"the node shows no log":      {"", false, "cannot show the kubelet's log"},
		"another pod's marking only": {strings.ReplaceAll(marked, otherID, "x"), true, "does not say"},
	} {
		if seen, err := sharerNotPublished(p, keptPV, vol, 30*time.Second, tc.log, tc.haveLog); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: seen %q, error %v; want an error saying %q", name, seen, err, tc.want)
		}
	}
}

// The survivor is made with the kubelet up (the fault's Stop), its volume
// taken with the deleted pod's while it is down, and watched after the
// deleted pod's cleanup.
func TestRebootSharedVolumeSteps(t *testing.T) {
	p, err := plan.Parse("v1.28.15,v1.28.5+NewVolumeManagerReconstruction=false")
	if err != nil {
		t.Fatal(err)
	}
	f, err := LookupFault("reboot-shared-volume")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Plan: p, Kubelets: make([]binaries.Binary, 2), Fault: &f}, fakeCluster{}, fakeGatesNode{}, &reports.Run{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range s.Steps() {
		if st.Hop == 1 {
			got = append(got, strings.SplitN(st.Name, ": ", 2)[1])
		}
	}
	want := []string{"stop kubelet", "swap kubelet binary to v1.28.5+NewVolumeManagerReconstruction=false", "force-delete the pods while the kubelet is down", "plant fault reboot-shared-volume",
		"start kubelet v1.28.5", "wait for the node Ready at kubelet v1.28.5", "wait until the old pods' mounts and directories are gone",
		"fault reboot-shared-volume after the cleanup", "re-created pods Running on the same volumes with their data", "kubelet metrics", "catalogue fault reboot-shared-volume on kubelet v1.28.5"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("hop 1 steps:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
