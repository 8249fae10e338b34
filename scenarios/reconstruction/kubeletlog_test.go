package reconstruction

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

func TestLastKubeletError(t *testing.T) {
	const uid = "0d749d9d-c686-41c0-961d-89e5f807b8c1"
	// Lines as a v1.36.3 kubelet logged them for a local-volume run (the
	// first two cut, trimmed, from a real log), then an error line at level E.
	log := strings.Join([]string{
		`I1201 03:08:27.660933   20324 reconstruct.go:67] "Could not construct volume information" podName="` + uid + `" volumeSpecName="skewtest-local-e1ae-0" err="reconstructVolume.NewMounter failed for volume"`,
		`I1201 03:08:28.766340   20324 reconstruct.go:161] "Cleaning up mounts for volume that could not be reconstructed" podName="` + uid + `" volumeSpecName="skewtest-local-e1ae-0"`,
		`E1201 03:08:29.000000   20324 kubelet_volumes.go:263] "There were many similar errors. Turn up verbosity to see them." err="orphaned pod \"` + uid + `\" found, but error occurred when trying to remove the volumes dir: not a directory"`,
		`I1201 03:08:30.000000   20324 kubelet.go:1] "SyncLoop" pod="other"`,
	}, "\n")
	got := lastKubeletError(log, uid)
	if !strings.HasPrefix(got, "E1201 03:08:29") || !strings.Contains(got, "not a directory") {
		t.Errorf("lastKubeletError = %q, want the orphaned-pod error line", got)
	}
	if got := lastKubeletError(log, "no-such-uid"); got != "" {
		t.Errorf("lastKubeletError of an unknown UID = %q", got)
	}
	long := "E1201 x " + uid + " failed " + strings.Repeat("y", 1000)
	if got := lastKubeletError(long, uid); len(got) > maxQuoted+len("…") {
		t.Errorf("quoted %d bytes, want at most %d", len(got), maxQuoted)
	}
}

// The kubelet's own words when it unstages a volume, from a kind worker's
// journal (kubelet v1.37.2) where a re-created pod reached its volume only
// after the old pod's cleanup.
func TestFindUnmountDevice(t *testing.T) {
	log := `Dec 01 10:47:17 w kubelet[3354]: I1201 10:47:17.806085    3354 operation_generator.go:791] UnmountVolume.TearDown succeeded for volume "kubernetes.io/csi/csi.skewtest.k8s.io^vol-skewtest-5130-csi-0" pod "cb0def9f"
Dec 01 10:47:17 w kubelet[3354]: I1201 10:47:17.876368    3354 reconciler_common.go:292] "operationExecutor.UnmountDevice started for volume \"skewtest-5130-csi-0\" (UniqueName: \"kubernetes.io/csi/csi.skewtest.k8s.io^vol-skewtest-5130-csi-0\") on node \"w\" "
Dec 01 10:47:17 w kubelet[3354]: I1201 10:47:17.884902    3354 operation_generator.go:904] UnmountDevice succeeded for volume "skewtest-5130-csi-0" (UniqueName: "kubernetes.io/csi/csi.skewtest.k8s.io^vol-skewtest-5130-csi-0") on node "w"
`
	if got := findUnmountDevice(log, "skewtest-5130-csi-0"); !strings.Contains(got, "10:47:17.884902") {
		t.Errorf("findUnmountDevice(csi-0) = %q, want the UnmountDevice succeeded line", got)
	}
	// A started (not finished) unstage, or another PV's, is not one; nor
	// is a PV whose name the unstaged one's starts with.
	for _, pv := range []string{"skewtest-5130-csi-1", "skewtest-5130-csi"} {
		if got := findUnmountDevice(log, pv); got != "" {
			t.Errorf("findUnmountDevice(%s) = %q, want none", pv, got)
		}
	}
}

func TestLastKubeletErrorPrefersKlogErrors(t *testing.T) {
	const uid = "c1bdab73-bbc7-4e75-864b-b1d183dc111c"
	log := `E1202 04:59:25.196322   22186 kubelet_volumes.go:261] "There were many similar errors." err="orphaned pod \"` + uid + `\" found, but failed to rmdir() subpath at path /x/volume-subpaths/cfg/workload/2: not a directory"
time="2026-12-02T04:59:23Z" level=warning msg="Failed to remove cgroup (will retry)" error="rmdir /sys/fs/cgroup/cpuacct/pod` + uid + `/x: device or resource busy"`
	if got := lastKubeletError(log, uid); !strings.Contains(got, "not a directory") {
		t.Errorf("lastKubeletError = %q, want the kubelet's own error line", got)
	}
}

// A fault's Stop that deletes pods with the kubelet up can see their
// volume unstaged by the old kubelet (kill-during-publish: the replacement
// pod reached the kubelet only after the old pod's cleanup). With a driver
// whose volumes lose their data then, the hop's marker check must find
// that line in the stopped kubelet's log, and only in what it logged
// during the Stop: an older unstage was judged by an earlier hop.
func TestUnstagedInStop(t *testing.T) {
	const (
		pv    = "skewtest-csi-57ee9-b5-0"
		other = "skewtest-csi-57ee9-b5-1"
	)
	unstaged := func(name, at string) string {
		return `I1204 ` + at + `    24840 operation_generator.go:904] UnmountDevice succeeded for volume "` + name + `" (UniqueName: "kubernetes.io/csi/csi.skewtest.k8s.io^vol-` + name + `") on node "skewtest-worker9"` + "\n"
	}
	node := &gatedNode{log: unstaged(other, "04:18:20.000000")}
	s := &Scenario{node: node, volumes: storage.Volumes{UnstageLosesData: true, PVs: []storage.PV{{Name: pv}, {Name: other}}}}
	ctx := context.Background()

	mark := s.unstageLogMark(ctx)
	node.log += unstaged(pv, "04:18:38.687000") // during the Stop
	s.recordUnstagedInStop(ctx, mark)
	node.log = "" // the new kubelet's log says nothing of it

	if got := s.unstagedLine(ctx, pv); !strings.Contains(got, "04:18:38.687000") {
		t.Errorf("unstagedLine(%s) = %q, want the line the old kubelet logged during the Stop", pv, got)
	}
	if got := s.unstagedLine(ctx, other); got != "" {
		t.Errorf("unstagedLine(%s) = %q, want none: that unstage was logged before the Stop", other, got)
	}

	// A driver that keeps its data across an unstage (a disk) excuses
	// nothing, whatever the log says.
	disk := &Scenario{node: &gatedNode{log: unstaged(pv, "04:18:38.687000")}, volumes: storage.Volumes{PVs: []storage.PV{{Name: pv}}}}
	disk.recordUnstagedInStop(ctx, disk.unstageLogMark(ctx))
	if got := disk.unstagedLine(ctx, pv); got != "" {
		t.Errorf("unstagedLine with a disk-backed driver = %q, want none", got)
	}
}

// A witness start of the metrics race restarts the hop's kubelet, and the
// node then shows only the witness's log. The unstage of a force-deleted
// pod's volume, and the last error about an old pod, were logged by the
// hop's own start: the marker check and the leftovers' headline must
// still find them (a shapes run on kind lost its subPath marker to an
// unstage the check no longer saw once a witness start had run).
func TestHopLogBeforeAWitnessStart(t *testing.T) {
	const (
		pv  = "skewtest-2433-csi-b7-0"
		uid = "51c1866c-f40a-4ff0-85ca-17b249e571e5"
	)
	hopStart := `I1206 07:15:58.100000    4076 operation_generator.go:904] UnmountDevice succeeded for volume "` + pv + `" (UniqueName: "kubernetes.io/csi/csi.skewtest.k8s.io^vol-` + pv + `") on node "skewtest-worker"` + "\n" +
		`E1206 07:15:58.200000    4076 kubelet_volumes.go:263] "orphaned pod found, but error occurred during reading volume dir from disk" podUID="` + uid + `"` + "\n"
	witness := `I1206 07:17:20.000000    5120 reconstruct.go:97] "Volume reconstruction finished"` + "\n"
	node := &gatedNode{log: witness}
	s := &Scenario{node: node, hopStartLog: &hopStart, volumes: storage.Volumes{UnstageLosesData: true, PVs: []storage.PV{{Name: pv}}}}
	ctx := context.Background()

	if got := s.unstagedLine(ctx, pv); !strings.Contains(got, "07:15:58.100000") {
		t.Errorf("unstagedLine(%s) after a witness start = %q, want the hop's start's line", pv, got)
	}
	left := []nodestate.Leftover{{UID: uid, Kind: nodestate.LeftoverPodDir, Path: "pods/" + uid}}
	if got := s.leftoverHeadline(ctx, left); !strings.Contains(got, "07:15:58.200000") {
		t.Errorf("leftoverHeadline after a witness start = %q, want the hop's start's error line about %s", got, uid)
	}
	// Without a witness start the node's log is the hop's.
	node.log = hopStart
	s.hopStartLog = nil
	if got := s.unstagedLine(ctx, pv); got == "" {
		t.Errorf("unstagedLine(%s) with the hop's kubelet still running = %q, want its line", pv, got)
	}
}
