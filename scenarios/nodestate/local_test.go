package nodestate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/exec"
)

// These run the real script (sh, cat, GNU find) on this host, without
// mounts, so they need no privileges.

func mkfile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotLocalEmptyRoot(t *testing.T) {
	root := t.TempDir() // no pods/, no plugins/
	s, err := Reader{Node: exec.Local{}, KubeletRoot: root, MountinfoPath: "/proc/self/mountinfo"}.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Entries) != 0 || len(s.PodUIDs()) != 0 || len(s.VolData()) != 0 || len(s.Mounts()) != 0 {
		t.Errorf("snapshot of an empty root is not empty:\n%s", s)
	}
	if len(s.AllMounts()) == 0 || !strings.Contains(s.Mountinfo, " / ") {
		t.Errorf("mount table not read: %q", s.Mountinfo)
	}
	if lo := s.Leftovers([]string{"x"}); len(lo) != 0 {
		t.Errorf("Leftovers = %v", lo)
	}
}

func TestSnapshotLocalMissingRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "nope")
	_, err := Reader{Node: exec.Local{}, KubeletRoot: root, MountinfoPath: "/proc/self/mountinfo"}.Snapshot(context.Background())
	if err == nil || !strings.Contains(err.Error(), "kubelet root "+root+" is missing") {
		t.Fatalf("error = %v, want the missing root named", err)
	}
	_, err = Reader{Node: exec.Local{}, KubeletRoot: t.TempDir(), MountinfoPath: "/proc/self/nope"}.Snapshot(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot read mount table /proc/self/nope") {
		t.Fatalf("error = %v, want the mount table named", err)
	}
}

func TestSnapshotLocalTree(t *testing.T) {
	tmp := t.TempDir()
	// A symlinked root: mount points are matched against the resolved one.
	real := filepath.Join(tmp, "real kubelet")
	root := filepath.Join(tmp, "link")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, root); err != nil {
		t.Fatal(err)
	}
	uid := "9d2b0000-0000-4000-8000-000000000001"
	csi := filepath.Join(root, "pods", uid, "volumes/kubernetes.io~csi/pv1")
	mkfile(t, filepath.Join(csi, "vol_data.json"), `{"specVolID":"pv1","volumeHandle":"h1","driverName":"d","extra":{"a":1}}`+"\n")
	mkfile(t, filepath.Join(root, "pods", uid, "volumes/kubernetes.io~csi/pv2/vol_data.json"), "") // truncated
	mkfile(t, filepath.Join(root, "pods", uid, "volumes/kubernetes.io~csi/pv3/vol_data.json"), "a\x00b")
	mkfile(t, filepath.Join(root, "pods", uid, "volumes/kubernetes.io~csi/pv4/vol_data.json"), strings.Repeat("x", maxVolDataSize+1))
	mkfile(t, filepath.Join(root, "pods", uid, "etc-hosts"), "127.0.0.1 localhost\n")
	if err := os.MkdirAll(filepath.Join(csi, "mount"), 0o750); err != nil {
		t.Fatal(err)
	}
	// Deeper than MaxDepth: not listed.
	mkfile(t, filepath.Join(root, "pods", uid, "volumes/kubernetes.io~empty-dir/cache/a/b/c"), "x")
	if err := os.Symlink("/dev/loop0", filepath.Join(root, "plugins/kubernetes.io/csi/volumeDevices/pv9/dev", uid)); err == nil {
		t.Fatal("symlink into a missing dir succeeded")
	}
	if err := os.MkdirAll(filepath.Join(root, "plugins/kubernetes.io/csi/volumeDevices/pv9/dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/loop0", filepath.Join(root, "plugins/kubernetes.io/csi/volumeDevices/pv9/dev", uid)); err != nil {
		t.Fatal(err)
	}

	s, err := Reader{Node: exec.Local{}, KubeletRoot: root, MountinfoPath: "/proc/self/mountinfo"}.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot took %v:\n%s", s.Duration, s)
	if s.ResolvedRoot != real {
		t.Errorf("ResolvedRoot = %q, want %q", s.ResolvedRoot, real)
	}
	if got := s.PodUIDs(); len(got) != 1 || got[0] != uid {
		t.Errorf("PodUIDs = %q", got)
	}
	p := s.Pod(uid)
	if !p.Exists || len(p.Mounts) != 0 {
		t.Errorf("Pod = %+v", p)
	}
	for _, want := range []string{"etc-hosts", "volumes/kubernetes.io~csi/pv1/mount", "volumes/kubernetes.io~empty-dir/cache/a/b"} {
		if _, ok := s.Lookup("pods/" + uid + "/" + want); !ok {
			t.Errorf("entry %s missing", want)
		}
	}
	if _, ok := s.Lookup("pods/" + uid + "/volumes/kubernetes.io~empty-dir/cache/a/b/c"); ok {
		t.Error("entry deeper than MaxDepth (6 below pods/) listed")
	}
	if en, ok := s.Lookup("plugins/kubernetes.io/csi/volumeDevices/pv9/dev/" + uid); !ok || en.Type != TypeSymlink || en.Target != "/dev/loop0" {
		t.Errorf("block symlink = %+v, %v", en, ok)
	}
	if len(p.PluginEntries) != 1 {
		t.Errorf("PluginEntries = %q", p.PluginEntries)
	}
	vd := s.VolData()
	prefix := "pods/" + uid + "/volumes/kubernetes.io~csi/"
	if v := vd[prefix+"pv1/vol_data.json"]; v.Err != "" || v.SpecVolID != "pv1" || v.VolumeHandle != "h1" || string(v.Other["extra"]) != `{"a":1}` {
		t.Errorf("pv1 vol_data = %+v", v)
	}
	if v := vd[prefix+"pv2/vol_data.json"]; v.Err != "empty file" {
		t.Errorf("pv2 vol_data = %+v", v)
	}
	if v := vd[prefix+"pv3/vol_data.json"]; v.Raw != "ab" || !strings.Contains(v.Err, "not a JSON object") {
		t.Errorf("pv3 vol_data = %+v", v)
	}
	if v := vd[prefix+"pv4/vol_data.json"]; !strings.Contains(v.Err, "not read") {
		t.Errorf("pv4 vol_data = %+v", v)
	}
	lo := s.Leftovers([]string{uid})
	if len(lo) != 2 || lo[0].Kind != LeftoverPodDir || lo[1].Kind != LeftoverPluginEntry || !strings.Contains(lo[1].Detail, "symlink -> /dev/loop0") {
		t.Errorf("Leftovers = %v", lo)
	}

	if err := os.RemoveAll(filepath.Join(real, "pods", uid)); err != nil {
		t.Fatal(err)
	}
	after, err := Reader{Node: exec.Local{}, KubeletRoot: root, MountinfoPath: "/proc/self/mountinfo"}.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if lo := after.Leftovers([]string{uid}); len(lo) != 1 || lo[0].Kind != LeftoverPluginEntry {
		t.Errorf("Leftovers after removing the pod dir = %v", lo)
	}
	d := Diff(s, after)
	if !strings.Contains(d, "- dir pods/"+uid+"\n") || !strings.Contains(d, "- file pods/"+uid+"/etc-hosts\n") || strings.Contains(d, "+ ") {
		t.Errorf("Diff:\n%s", d)
	}
}
