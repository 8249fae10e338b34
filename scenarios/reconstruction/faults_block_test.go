package reconstruction

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/loopdev"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// The reboot takes the pod's map link and publish binds and the kubelet's
// loop device over the map link, not the driver's loop device (the disk
// stays attached) nor anything of another pod; the staging dir is the one
// to obstruct.
func TestPlanBlockRebootTakesWhatARebootTakes(t *testing.T) {
	root := t.TempDir()
	mapLink := blockMapDir(blockPV) + "/" + keptUID
	publish := blockPublish(blockPV, keptUID)
	other := blockMapDir(blockPV) + "/" + otherID
	if err := os.MkdirAll(filepath.Join(root, blockStaging(blockPV)), 0o750); err != nil {
		t.Fatal(err)
	}
	snap := keptSnapshot(t, root, map[string]int{mapLink: 201, publish: 202, other: 203})
	loops := []loopdev.Device{
		{Path: "/dev/loop3", BackingFile: "/var/lib/skewtest/r/csi/state/volumes/vol-" + blockPV},
		{Path: "/dev/loop4", BackingFile: snap.Abs(mapLink)},
		{Path: "/dev/loop5", BackingFile: snap.Abs(other)},
	}
	r, err := planBlockReboot(snap, []string{keptUID}, []string{blockPV}, loops)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.loops) != 1 || r.loops[0].Path != "/dev/loop4" {
		t.Errorf("loop devices to detach %v, want the kubelet's over the pod's map link alone (/dev/loop4)", r.loops)
	}
	if want := []string{snap.Abs(mapLink), snap.Abs(publish)}; strings.Join(r.unmount, "|") != strings.Join(want, "|") {
		t.Errorf("unmount %v, want %v", r.unmount, want)
	}
	if len(r.staging) != 1 || r.staging[0] != snap.Abs(blockStaging(blockPV)) {
		t.Errorf("staging paths %v, want %s", r.staging, snap.Abs(blockStaging(blockPV)))
	}

	if _, err := planBlockReboot(snap, []string{"no-such-uid"}, []string{blockPV}, loops); err == nil || !strings.Contains(err.Error(), "would prove nothing") {
		t.Errorf("a pod without a mapped block volume: %v", err)
	}
	bare := keptSnapshot(t, t.TempDir(), map[string]int{mapLink: 201})
	if _, err := planBlockReboot(bare, []string{keptUID}, []string{blockPV}, nil); err == nil || !strings.Contains(err.Error(), "no staging dir") {
		t.Errorf("a block volume without its staging dir: %v", err)
	}
}

const (
	mapPathEmptyLine = `E1206 01:02:03.000000 1 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/csi.skewtest.k8s.io^vol-x podName:` + keptUID + ` nodeName:}" failed. No retries permitted until 2026-12-06 01:02:04 (durationBeforeRetry 500ms). Error: UnmapVolume.UnmapBlockVolume failed for volume "` + blockPV + `" (UniqueName: "kubernetes.io/csi/csi.skewtest.k8s.io^vol-x") pod "` + keptUID + `" (UID: "` + keptUID + `") : blkUtil.DetachFileDevice failed. globalUnmapPath:, podUID: ` + keptUID + `, bindMount: true: failed to unmap device from map path. mapPath is empty`
	unmapDoneLine    = `I1206 01:02:03.000000 1 operation_generator.go:1341] UnmapVolume succeeded for volume "kubernetes.io/csi/csi.skewtest.k8s.io^vol-x" (OuterVolumeSpecName: "block") pod "` + otherID + `" (UID: "` + otherID + `"). InnerVolumeSpecName "` + blockPV + `"`
)

// Each deleted pod's unmap is found by its UID, done or failed; a pod the
// kubelet has not unmapped yet has no line.
func TestUnmapLines(t *testing.T) {
	log := "I1206 unrelated " + keptUID + "\n" + mapPathEmptyLine + "\n" + unmapDoneLine + "\n"
	if got := unmapLines(log, []string{keptUID, otherID}); len(got) != 2 || !strings.Contains(got[0], "mapPath is empty") || !strings.Contains(got[1], "UnmapVolume succeeded") {
		t.Errorf("unmapLines = %q", got)
	}
	if got := unmapLines("I1206 unrelated "+keptUID+"\n", []string{keptUID}); len(got) != 0 {
		t.Errorf("no unmap logged, yet %q", got)
	}
}

// What the fault records of a deleted pod stuck on 1.28.5 (still
// Terminating, its dir, map link and publish target left) with the
// kubelet's "mapPath is empty" unmap error is #119608's symptom exactly;
// the same on a kubelet with #122211 fails; another unmap error, the pod
// gone from the API, or #122211's own line is not #119608.
func TestStuckUnmapJudged(t *testing.T) {
	f, err := LookupFault("reboot-block")
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web-0", UID: keptUID, DeletionTimestamp: &now}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-1", UID: otherID}},
	}
	terminating := terminatingTraces([]string{keptUID}, pods)
	if len(terminating) != 1 || terminating[0].Path != "pods/"+keptUID {
		t.Fatalf("terminating traces %v, want the deleted pod web-0's alone", terminating)
	}
	left := []nodestate.Leftover{
		{UID: keptUID, Kind: nodestate.LeftoverPodDir, Path: "pods/" + keptUID},
		{UID: keptUID, Kind: nodestate.LeftoverPluginEntry, Path: blockMapDir(blockPV) + "/" + keptUID},
		{UID: keptUID, Kind: nodestate.LeftoverPluginEntry, Path: blockPublish(blockPV, keptUID)},
	}
	// The block shape's PVs are the shapes', not the StatefulSet's.
	s := &Scenario{oldUIDs: []string{keptUID}, shapes: &shapeRun{block: storage.Volumes{PVs: []storage.PV{{Name: blockPV}}}}}
	s.volumes.PVs = []storage.PV{{Name: keptPV}}
	observe := func(traces []catalogue.Trace, log string) catalogue.Observation {
		return catalogue.Observation{Detail: "stuck", Traces: append(append([]catalogue.Trace(nil), traces...), oldPodTraces(nil, left)...), Bind: s.bindings(), Log: log, Logged: true}
	}
	shipped := version.MustParseSemantic("1.28.5")
	if d, err := catalogue.Judge(f.Entry, shipped, nil, observe(terminating, mapPathEmptyLine)); err != nil || d == nil || !d.Reproduced() {
		t.Errorf("#119608 on 1.28.5: deviation %+v, error %v; want it reproduced", d, err)
	}
	var seen *catalogue.BugSeenError
	for _, v := range []string{"1.28.15", "1.37.2"} {
		if _, err := catalogue.Judge(f.Entry, version.MustParseSemantic(v), nil, observe(terminating, mapPathEmptyLine)); !errors.As(err, &seen) {
			t.Errorf("the same on %s: %v; want the bug seen where it is fixed", v, err)
		}
	}
	var ue *catalogue.UnexpectedError
	if _, err := catalogue.Judge(f.Entry, shipped, nil, observe(terminating, strings.Replace(mapPathEmptyLine, "mapPath is empty", "device or resource busy", 1))); !errors.As(err, &ue) || !strings.Contains(err.Error(), "UnmapVolume.UnmapBlockVolume failed") {
		t.Errorf("another unmap error: %v; want another failure naming it", err)
	}
	var pe *catalogue.PartialError
	if _, err := catalogue.Judge(f.Entry, shipped, nil, observe(nil, mapPathEmptyLine)); !errors.As(err, &pe) {
		t.Errorf("the pod gone from the API: %v; want the symptom in part", err)
	}
	uncertain := `I1206 01:02:02.000000 1 operation_generator.go:785] "MountVolume.markDeviceErrorState leaving volume uncertain" volumeName="kubernetes.io/csi/csi.skewtest.k8s.io^vol-x"`
	if _, err := catalogue.Judge(f.Entry, shipped, nil, observe(terminating, uncertain+"\n"+mapPathEmptyLine)); !errors.As(err, &ue) {
		t.Errorf("#122211's line beside it: %v; want another failure", err)
	}
}

// The fault deletes nothing while the kubelet is down; it acts once the
// kubelet runs (the failed re-stage, then the deletion) and after the
// cleanup (the symptom, the stuck pods' removal).
func TestRebootBlockSteps(t *testing.T) {
	p, err := plan.Parse("v1.28.5,v1.28.15")
	if err != nil {
		t.Fatal(err)
	}
	f, err := LookupFault("reboot-block")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Plan: p, Kubelets: make([]binaries.Binary, 2), Fault: &f}, fakeCluster{}, fakeNode{}, &reports.Run{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.hasShape(ShapeBlock) {
		t.Error("the fault's workload lacks the block shape")
	}
	var got []string
	for _, st := range s.Steps() {
		if st.Hop == 1 {
			got = append(got, strings.SplitN(st.Name, ": ", 2)[1])
		}
	}
	want := []string{"stop kubelet", "swap kubelet binary to v1.28.15", "record the node state the kubelet will find (nothing is deleted)", "plant fault reboot-block",
		"start kubelet v1.28.15", "fault reboot-block once the kubelet runs", "wait for the node Ready at kubelet v1.28.15", "wait until the old pods' mounts and directories are gone",
		"fault reboot-block after the cleanup", "re-created pods Running on the same volumes with their data", "kubelet metrics", "catalogue fault reboot-block on kubelet v1.28.15"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("hop 1 steps:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
