package reconstruction

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

const (
	keptUID = "5f0b8a2e-1111-4c1e-9d2b-aaaaaaaaaaaa"
	otherID = "5f0b8a2e-2222-4c1e-9d2b-bbbbbbbbbbbb"
	keptPV  = "skewtest-csi-ab12-0"
	blockPV = "skewtest-csi-ab12-block-0"
)

// keptSnapshot reads a real snapshot of a kubelet root under root whose
// mount table holds mounts (relative to root) with the given mount IDs; no
// mount is made.
func keptSnapshot(t *testing.T, root string, mounts map[string]int) *nodestate.Snapshot {
	t.Helper()
	table := "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
	for rel, id := range mounts {
		if err := os.MkdirAll(filepath.Join(root, rel), 0o750); err != nil {
			t.Fatal(err)
		}
		table += fmt.Sprintf("%d 27 0:%d / %s rw,relatime - tmpfs tmpfs rw\n", id, id, filepath.Join(root, rel))
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

func keptPod() corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", UID: keptUID}}
}

// Each kind of change the untouched watch must see, one at a time, on a
// pod whose mounts are its volume, a subPath bind, a block volume's map
// link and publish bind (below plugins/, naming its UID) and its volume's
// staging mount; and nothing when nothing changed.
func TestUntouchedChangesSeeEveryMountOfThePod(t *testing.T) {
	vol := "pods/" + keptUID + "/volumes/kubernetes.io~csi/" + keptPV + "/mount"
	subpath := "pods/" + keptUID + "/volume-subpaths/" + keptPV + "/workload/1"
	mapLink := blockMapDir(blockPV) + "/" + keptUID
	publish := blockPublish(blockPV, keptUID)
	staging := nodestate.CSIGlobalMountPath("csi.skewtest.k8s.io", "vol-"+keptPV)
	before := map[string]int{vol: 101, subpath: 102, mapLink: 103, publish: 104, staging: 105}
	root := t.TempDir()
	s := &Scenario{volumes: storage.Volumes{PVs: []storage.PV{{Name: keptPV, Driver: "csi.skewtest.k8s.io", VolumeHandle: "vol-" + keptPV}}}}
	pvs := []string{blockPV, keptPV}
	s.running = []running{{uid: keptUID, name: "web-0", containers: map[string]string{}, pvs: pvs, mounts: s.podMounts(keptSnapshot(t, root, before), keptUID, pvs)}}
	if len(s.running[0].mounts) != len(before) {
		t.Fatalf("recorded mounts %v, want all %d of the pod's", s.running[0].mounts, len(before))
	}
	if got := s.untouchedChanges([]corev1.Pod{keptPod()}, keptSnapshot(t, root, before), nil); len(got) != 0 {
		t.Errorf("nothing changed, yet: %q", got)
	}
	for rel, what := range map[string]string{
		subpath: "the subPath bind",
		mapLink: "the block volume's map link",
		publish: "the block volume's publish bind",
		staging: "the volume's staging mount",
	} {
		now := map[string]int{}
		for k, v := range before {
			now[k] = v
		}
		now[rel] = 200
		got := s.untouchedChanges([]corev1.Pod{keptPod()}, keptSnapshot(t, root, now), nil)
		if len(got) != 1 || !strings.Contains(got[0].Detail, "was remounted (mount ID "+fmt.Sprint(before[rel])+", now 200)") || !strings.Contains(got[0].Detail, rel) {
			t.Errorf("%s remounted: changes %q", what, got)
		}
		delete(now, rel)
		got = s.untouchedChanges([]corev1.Pod{keptPod()}, keptSnapshot(t, root, now), nil)
		if len(got) != 1 || !strings.Contains(got[0].Detail, "was unmounted") {
			t.Errorf("%s unmounted: changes %q", what, got)
		}
	}
}

// The files of a kept pod's volumes, read on the node as the watch reads
// them: a marker, a configMap key, the ..data link and a block device's
// first sector. A rewritten marker, a payload moved to a new timestamped
// dir, a device whose marker is gone and a file gone are each a change.
func TestUntouchedChangesSeeFileContents(t *testing.T) {
	dir := t.TempDir()
	marker, key, data, dev := filepath.Join(dir, "marker"), filepath.Join(dir, "file.txt"), filepath.Join(dir, "..data"), filepath.Join(dir, "dev")
	write := func(p, content string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target string) {
		t.Helper()
		os.Remove(data)
		if err := os.Symlink(target, data); err != nil {
			t.Fatal(err)
		}
	}
	write(marker, "pod web-0 uid "+keptUID+" wrote this\n")
	write(key, "configMap ns/skewtest-shapes key file.txt")
	write(dev, rawMarkerMagic+"web-0 "+keptUID+"\x00\x00\x00rest of the sector")
	link("..2026_12_05_10_00_00.1")
	s := &Scenario{running: []running{{uid: keptUID, name: "web-0", containers: map[string]string{}, files: []keptFile{
		{how: fileContent, path: marker}, {how: fileContent, path: key}, {how: linkTarget, path: data}, {how: rawMarker, path: dev},
	}}}}
	held, err := s.readKeptFiles(t.Context(), exec.Local{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.running[0].files {
		f := &s.running[0].files[i]
		f.was = held[f.path]
	}
	if got := held[dev]; got != rawMarkerMagic+"web-0 "+keptUID {
		t.Errorf("the device's marker read as %q", got)
	}
	if got := held[data]; got != "..2026_12_05_10_00_00.1" {
		t.Errorf("the ..data link read as %q", got)
	}
	pods, snap := []corev1.Pod{keptPod()}, keptSnapshot(t, t.TempDir(), nil)
	check := func(what, want string) {
		t.Helper()
		now, err := s.readKeptFiles(t.Context(), exec.Local{})
		if err != nil {
			t.Fatal(err)
		}
		got := s.untouchedChanges(pods, snap, now)
		if want == "" {
			if len(got) != 0 {
				t.Errorf("%s: changes %q, want none", what, got)
			}
			return
		}
		if len(got) != 1 || !strings.Contains(got[0].Detail, want) {
			t.Errorf("%s: changes %q, want one naming %q", what, got, want)
		}
	}
	check("nothing changed", "")
	write(marker, "pod web-0 uid "+keptUID+" wrote this again\n")
	check("a marker rewritten", "file "+marker+" held \"pod web-0 uid "+keptUID+" wrote this\", now \"pod web-0 uid "+keptUID+" wrote this again\"")
	write(marker, "pod web-0 uid "+keptUID+" wrote this\n")
	link("..2026_12_05_10_00_09.2")
	check("the payload moved", "link "+data+" held \"..2026_12_05_10_00_00.1\", now \"..2026_12_05_10_00_09.2\"")
	link("..2026_12_05_10_00_00.1")
	write(dev, "\x00\x00\x00")
	check("the device's marker gone", "raw "+dev)
	write(dev, rawMarkerMagic+"web-0 "+keptUID+"\x00")
	os.Remove(key)
	check("the key gone", "file "+key+" held \"configMap ns/skewtest-shapes key file.txt\", now \"!cat:")
}

// The kubelet's own lines for an unmount of a running pod's volume, as
// v1.37.2 logs them (operation_generator.go, reconciler_common.go), name
// the pod's UID or its PV; the same lines for another pod or PV, and the
// lines of setting the volume up again, do not count.
func TestUnmountsLogged(t *testing.T) {
	s := &Scenario{running: []running{{uid: keptUID, name: "web-0", pvs: []string{blockPV, keptPV}}}}
	mine := []string{
		`I1205 10:00:03.100000 1 reconciler_common.go:163] "operationExecutor.UnmountVolume started for volume \"inline\" (UniqueName: \"kubernetes.io/csi/` + keptUID + `-inline\") pod \"` + keptUID + `\" (UID: \"` + keptUID + `\") "`,
		`I1205 10:00:03.200000 1 operation_generator.go:792] UnmountVolume.TearDown succeeded for volume "kubernetes.io/csi/` + keptUID + `-inline" pod "` + keptUID + `" (UID: "` + keptUID + `"). InnerVolumeSpecName "inline". PluginName "kubernetes.io/csi", VolumeGIDValue ""`,
		`I1205 10:00:03.300000 1 operation_generator.go:1245] UnmapVolume succeeded for volume "kubernetes.io/csi/csi.skewtest.k8s.io^vol-` + blockPV + `" pod "` + keptUID + `" (UID: "` + keptUID + `"). InnerVolumeSpecName "` + blockPV + `". PluginName "kubernetes.io/csi", VolumeGIDValue ""`,
		`I1205 10:00:03.400000 1 operation_generator.go:904] UnmountDevice succeeded for volume "` + keptPV + `" (UniqueName: "kubernetes.io/csi/csi.skewtest.k8s.io^vol-` + keptPV + `") on node "w"`,
		`I1205 10:00:03.500000 1 reconciler_common.go:299] "Volume detached for volume \"` + blockPV + `\" (UniqueName: \"kubernetes.io/csi/csi.skewtest.k8s.io^vol-` + blockPV + `\") on node \"w\" DevicePath \"\""`,
	}
	notMine := []string{
		`I1205 10:00:02.000000 1 reconciler_common.go:225] "operationExecutor.MountVolume started for volume \"inline\" (UniqueName: \"kubernetes.io/csi/` + keptUID + `-inline\") pod \"web-0\" (UID: \"` + keptUID + `\") "`,
		`I1205 10:00:02.100000 1 operation_generator.go:620] "MountVolume.SetUp succeeded for volume \"` + keptPV + `\" (UniqueName: \"kubernetes.io/csi/csi.skewtest.k8s.io^vol-` + keptPV + `\") pod \"web-0\" (UID: \"` + keptUID + `\") "`,
		`I1205 10:00:02.200000 1 operation_generator.go:792] UnmountVolume.TearDown succeeded for volume "kubernetes.io/empty-dir/` + otherID + `-scratch" pod "` + otherID + `" (UID: "` + otherID + `"). InnerVolumeSpecName "scratch". PluginName "kubernetes.io/empty-dir", VolumeGIDValue ""`,
		`I1205 10:00:02.300000 1 operation_generator.go:904] UnmountDevice succeeded for volume "` + keptPV + `-x" (UniqueName: "kubernetes.io/csi/csi.skewtest.k8s.io^vol-` + keptPV + `-x") on node "w"`,
	}
	got := s.unmountsLogged(strings.Join(append(append([]string(nil), notMine...), mine...), "\n"))
	if len(got) != len(mine) {
		t.Fatalf("%d lines found, want the %d unmounts of the running pod's volumes:\n%s", len(got), len(mine), strings.Join(got, "\n"))
	}
	for i, line := range got {
		if !strings.HasPrefix(line, mine[i][:30]) {
			t.Errorf("line %d is %q, want %q", i, line, mine[i])
		}
	}
}

// A shapes workload's kept pod reads back every shape's files; the
// service account token's projected volume, which the kubelet rewrites at
// every start, is not among them.
func TestKeptFilesOfTheShapes(t *testing.T) {
	shapes, err := LookupShapes(allShapes())
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cfgBind := "pods/" + keptUID + "/volume-subpaths/" + cfgVolume + "/workload/2"
	snap := keptSnapshot(t, root, map[string]int{cfgBind: 101})
	s := &Scenario{cfg: Config{Kind: storage.CSI, Name: "web"}, node: fakeNode{}, shapes: &shapeRun{list: shapes, has: map[string]bool{}}}
	for _, sh := range shapes {
		s.shapes.has[sh.Entry.Name] = true
	}
	pvs := map[string]string{volumeName: keptPV, blockVolume: blockPV, genVolume: "skewtest-csi-ab12-gen-0"}
	var got []string
	for _, f := range s.keptFiles(keptPod(), pvs, snap) {
		got = append(got, f.how+" "+strings.TrimPrefix(strings.TrimPrefix(f.path, snap.ResolvedRoot+"/"), "pods/"+keptUID+"/"))
	}
	want := []string{
		"file volumes/kubernetes.io~csi/" + keptPV + "/mount/marker",
		"raw volumeDevices/kubernetes.io~csi/" + blockPV,
		"file volumes/kubernetes.io~csi/" + keptPV + "/mount/sub/marker",
		"file " + s.hostPathDir() + "/sub/marker",
		"file volume-subpaths/cfg/workload/2",
		"file volumes/kubernetes.io~empty-dir/mem/marker",
		"link volumes/kubernetes.io~configmap/cfg/..data",
		"file volumes/kubernetes.io~configmap/cfg/file.txt",
		"link volumes/kubernetes.io~secret/sec/..data",
		"file volumes/kubernetes.io~secret/sec/token",
		"link volumes/kubernetes.io~projected/proj/..data",
		"file volumes/kubernetes.io~projected/proj/file.txt",
		"file volumes/kubernetes.io~projected/proj/token",
		"file volumes/kubernetes.io~projected/proj/uid",
		"file volumes/kubernetes.io~csi/skewtest-csi-ab12-gen-0/mount/marker",
		"file volumes/kubernetes.io~csi/inline/mount/marker",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("kept files:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
