package nodestate

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// Real mounts on this host: tmpfs and bind mounts laid out the way the
// kubelet lays them out, read through exec.Local with the real script.

// cleanupMounts makes sure nothing stays mounted at or below dir when the
// test ends, even when it fails halfway: every remaining mount is detached
// (MNT_DETACH), deepest first and the last stacked first. Call it right
// after t.TempDir so it runs before the temp dir is removed.
func cleanupMounts(t *testing.T, dir string) {
	t.Helper()
	t.Cleanup(func() {
		for range 10 {
			ms, err := mountinfo.ParseFile("/proc/self/mountinfo")
			if err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
			left := mountinfo.Under(ms, dir)
			if len(left) == 0 {
				return
			}
			slices.Reverse(left) // the last mounted first
			sort.SliceStable(left, func(i, j int) bool {
				return strings.Count(left[i].MountPoint, "/") > strings.Count(left[j].MountPoint, "/")
			})
			for _, m := range left {
				// EINVAL: already gone with a detached parent.
				if err := syscall.Unmount(m.MountPoint, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
					t.Errorf("cleanup: unmount %s: %v", m.MountPoint, err)
				}
			}
		}
		t.Errorf("cleanup: mounts remain below %s", dir)
	})
}

func mustMount(t *testing.T, source, target, fstype string, flags uintptr, data string) {
	t.Helper()
	if err := syscall.Mount(source, target, fstype, flags, data); err != nil {
		t.Fatalf("mount %s on %s (%s): %v", source, target, fstype, err)
	}
}

func mustUnmount(t *testing.T, target string) {
	t.Helper()
	if err := syscall.Unmount(target, 0); err != nil {
		t.Fatalf("unmount %s: %v", target, err)
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSnapshotRealMounts(t *testing.T) {
	testgate.RequireRoot(t, "mounts tmpfs and bind mounts laid out as a kubelet lays them out")
	for _, name := range []string{"kubelet", "kubelet root"} {
		t.Run(name, func(t *testing.T) { realMountScenario(t, name) })
	}
}

func realMountScenario(t *testing.T, rootName string) {
	base := t.TempDir()
	cleanupMounts(t, base)
	base, err := filepath.EvalSymlinks(base)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, rootName)
	const (
		uid     = "7c0d9f3e-5b1a-4e2f-9c3d-1a2b3c4d5e6f"
		driver  = "csi.example.com"
		handle  = "vol-1"
		fsSrc   = "skewtest"
		pvName  = "pv1"
		podPath = "pods/" + uid
	)
	rel := map[string]string{
		"csi":       podPath + "/volumes/kubernetes.io~csi/pv1/mount",
		"local":     podPath + "/volumes/kubernetes.io~local-volume/pv2",
		"projected": podPath + "/volumes/kubernetes.io~projected/kube-api-access-x",
		"subpath":   podPath + "/volume-subpaths/pv2/app/0",
		"global":    CSIGlobalMountPath(driver, handle),
		"publish":   "plugins/kubernetes.io/csi/volumeDevices/publish/pv3/" + uid,
	}
	abs := func(k string) string { return filepath.Join(root, rel[k]) }
	localSrc := filepath.Join(base, "local pv src") // same file system as root: find goes in
	blockSrc := filepath.Join(base, "blockdev")

	mkdirs(t, abs("csi"), abs("local"), abs("projected"), abs("subpath"), abs("global"), filepath.Dir(abs("publish")), filepath.Join(localSrc, "sub"))
	mkfile(t, filepath.Join(localSrc, "data.txt"), "local data")
	mkfile(t, filepath.Join(localSrc, "sub", "f.txt"), "subpath data")
	mkfile(t, blockSrc, "")
	mkfile(t, abs("publish"), "")
	mkfile(t, filepath.Join(filepath.Dir(abs("csi")), "vol_data.json"),
		`{"specVolID":"pv1","volumeHandle":"vol-1","driverName":"csi.example.com","nodeName":"node-1","attachmentID":"csi-123","volumeLifecycleMode":"Persistent"}`)
	mkfile(t, filepath.Join(filepath.Dir(abs("global")), "vol_data.json"), `{"volumeHandle":"vol-1","driverName":"csi.example.com"}`)

	// The CSI driver stages on the global mount; the kubelet publishes it
	// into the pod with a bind mount.
	mustMount(t, fsSrc, abs("global"), "tmpfs", 0, "size=1m,mode=0755")
	mkfile(t, filepath.Join(abs("global"), "data.txt"), "workload data")
	mustMount(t, abs("global"), abs("csi"), "", syscall.MS_BIND, "")
	mustMount(t, localSrc, abs("local"), "", syscall.MS_BIND, "")
	mustMount(t, fsSrc, abs("projected"), "tmpfs", 0, "size=1m")
	mkfile(t, filepath.Join(abs("projected"), "token"), "secret")
	mustMount(t, filepath.Join(localSrc, "sub"), abs("subpath"), "", syscall.MS_BIND, "")
	mustMount(t, blockSrc, abs("publish"), "", syscall.MS_BIND, "") // a file mount point

	reader := Reader{Node: exec.Local{}, KubeletRoot: root, MountinfoPath: "/proc/self/mountinfo"}
	ctx := context.Background()
	before, err := reader.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot took %v:\n%s", before.Duration, before)

	if before.ResolvedRoot != root {
		t.Errorf("ResolvedRoot = %q, want %q", before.ResolvedRoot, root)
	}
	if got := before.PodUIDs(); !slices.Equal(got, []string{uid}) {
		t.Errorf("PodUIDs = %q", got)
	}
	if got := len(before.Mounts()); got != 6 {
		t.Errorf("%d mounts below the kubelet root, want 6", got)
	}
	pod := before.Pod(uid)
	if !pod.Exists {
		t.Error("pod dir not found")
	}
	var got []string
	for _, m := range pod.Mounts {
		got = append(got, m.MountPoint)
	}
	sort.Strings(got)
	want := []string{abs("subpath"), abs("csi"), abs("local"), abs("projected")}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("pod mounts =\n%q\nwant\n%q", got, want)
	}
	for _, m := range pod.Mounts {
		if m.MountPoint == abs("csi") && (m.FSType != "tmpfs" || m.Source != fsSrc) {
			t.Errorf("CSI mount = %+v, want the global tmpfs bound", m)
		}
		if m.MountPoint == abs("local") && m.Root != localSrc {
			t.Errorf("local volume mount root = %q, want %q", m.Root, localSrc)
		}
	}
	if len(pod.PluginMounts) != 1 || pod.PluginMounts[0].MountPoint != abs("publish") {
		t.Errorf("PluginMounts = %+v", pod.PluginMounts)
	}
	if !slices.Equal(pod.PluginEntries, []string{rel["publish"]}) {
		t.Errorf("PluginEntries = %q", pod.PluginEntries)
	}
	if p, n := before.CSIGlobalMount(driver, handle); p != rel["global"] || n != 1 {
		t.Errorf("CSIGlobalMount = %q, %d; want %q, 1", p, n, rel["global"])
	}
	if n := before.MountCount(rel["csi"]); n != 1 {
		t.Errorf("MountCount(csi) = %d", n)
	}

	// Mount points are listed; what the workload put inside them is not.
	for _, k := range []string{"csi", "local", "projected", "subpath", "global", "publish"} {
		if _, ok := before.Lookup(rel[k]); !ok {
			t.Errorf("mount point %s not listed", rel[k])
		}
	}
	for _, inside := range []string{
		rel["global"] + "/data.txt",
		rel["csi"] + "/data.txt",
		rel["local"] + "/data.txt",
		rel["local"] + "/sub",
		rel["local"] + "/sub/f.txt",
		rel["projected"] + "/token",
		rel["subpath"] + "/f.txt",
	} {
		if _, ok := before.Lookup(inside); ok {
			t.Errorf("entry inside a mount point listed: %s", inside)
		}
	}
	for _, en := range before.Entries {
		if strings.Contains(en.Path, "data.txt") || strings.Contains(en.Path, "token") || strings.Contains(en.Path, "f.txt") {
			t.Errorf("workload file listed: %v", en)
		}
	}
	// local/data.txt, local/sub, local/sub/f.txt and subpath/f.txt share the
	// root's file system: find lists them and the parser drops them.
	if before.HiddenEntries != 4 {
		t.Errorf("HiddenEntries = %d, want 4", before.HiddenEntries)
	}

	vd := before.VolData()
	if len(vd) != 2 {
		t.Errorf("VolData has %d files, want 2: %v", len(vd), vd)
	}
	if v := vd[podPath+"/volumes/kubernetes.io~csi/pv1/vol_data.json"]; v.Err != "" || v.SpecVolID != pvName || v.VolumeHandle != handle ||
		v.DriverName != driver || v.NodeName != "node-1" || v.AttachmentID != "csi-123" || v.VolumeLifecycleMode != "Persistent" {
		t.Errorf("pod vol_data = %+v", v)
	}
	if v := vd[filepath.Dir(rel["global"])+"/vol_data.json"]; v.Err != "" || v.VolumeHandle != handle || v.DriverName != driver {
		t.Errorf("global vol_data = %+v", v)
	}

	lo := before.Leftovers([]string{uid})
	kinds := map[string]int{}
	for _, l := range lo {
		kinds[l.Kind]++
	}
	if kinds[LeftoverPodDir] != 1 || kinds[LeftoverMount] != 5 || kinds[LeftoverPluginEntry] != 1 || len(lo) != 7 {
		t.Errorf("Leftovers = %v, want the dir, 5 mounts and the publish entry", lo)
	}
	if s := before.String(); !strings.Contains(s, quote(abs("projected"))+" from "+fsSrc) || !strings.Contains(s, "dir "+quote(rel["csi"])+" [mount point x1]") {
		t.Errorf("String() lacks the projected mount or the CSI mount point:\n%s", s)
	}

	// What the kubelet does when it cleans the pod up.
	for _, k := range []string{"subpath", "projected", "local", "csi", "publish", "global"} {
		mustUnmount(t, abs(k))
	}
	for _, p := range []string{filepath.Join(root, podPath), filepath.Join(root, rel["publish"]), filepath.Dir(abs("global"))} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}

	after, err := reader.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lo := after.Leftovers([]string{uid}); len(lo) != 0 {
		t.Errorf("Leftovers after cleanup = %v", lo)
	}
	if n := len(after.Mounts()); n != 0 {
		t.Errorf("%d mounts left below the kubelet root", n)
	}
	if _, n := after.CSIGlobalMount(driver, handle); n != 0 {
		t.Errorf("global mount count after cleanup = %d", n)
	}
	if len(after.PodUIDs()) != 0 || len(after.VolData()) != 0 {
		t.Errorf("after cleanup: pods %q, vol_data %v", after.PodUIDs(), after.VolData())
	}
	d := Diff(before, after)
	t.Logf("diff:\n%s", d)
	for _, k := range []string{"csi", "global", "projected"} {
		line := "- mount tmpfs " + quote(abs(k)) + " from " + fsSrc + "\n"
		if !strings.Contains(d, line) {
			t.Errorf("Diff lacks %q", line)
		}
	}
	for _, k := range []string{"local", "subpath", "publish"} {
		if !strings.Contains(d, "- mount ") || !strings.Contains(d, " "+quote(abs(k))+" from ") {
			t.Errorf("Diff lacks the %s mount", k)
		}
	}
	if !strings.Contains(d, "\n- dir "+podPath+"\n") || strings.Contains(d, "\n+ ") || strings.HasPrefix(d, "+ ") {
		t.Errorf("Diff does not show only removals, including the pod dir:\n%s", d)
	}
	if got, want := strings.Count(d, "- mount "), 6; got != want {
		t.Errorf("Diff shows %d removed mounts, want %d", got, want)
	}
}
