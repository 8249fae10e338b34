package nodestate

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/exec"
)

// fakeNode is a Cmder that answers every command with canned output, and
// keeps the argv it was asked to run.
type fakeNode struct {
	stdout, stderr string
	code           int
	argv           [][]string
}

func (f *fakeNode) Command(_ context.Context, name string, args ...string) exec.Cmd {
	f.argv = append(f.argv, append([]string{name}, args...))
	return &fakeCmd{node: f}
}

type fakeCmd struct {
	node           *fakeNode
	stdout, stderr io.Writer
}

type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
func (e exitError) ExitCode() int { return int(e) }

func (c *fakeCmd) Run() error {
	if c.stdout != nil {
		io.WriteString(c.stdout, c.node.stdout)
	}
	if c.stderr != nil {
		io.WriteString(c.stderr, c.node.stderr)
	}
	if c.node.code != 0 {
		return exitError(c.node.code)
	}
	return nil
}
func (c *fakeCmd) SetEnv(...string) exec.Cmd      { return c }
func (c *fakeCmd) SetStdin(io.Reader) exec.Cmd    { return c }
func (c *fakeCmd) SetStdout(w io.Writer) exec.Cmd { c.stdout = w; return c }
func (c *fakeCmd) SetStderr(w io.Writer) exec.Cmd { c.stderr = w; return c }

// output builds what the snapshot script prints: records are lists of
// fields, each NUL-terminated.
func output(mountinfoText, resolved string, records ...[]string) string {
	var b strings.Builder
	for _, f := range []string{header, "M", mountinfoText, "R", resolved} {
		b.WriteString(f + "\x00")
	}
	for _, r := range records {
		for _, f := range r {
			b.WriteString(f + "\x00")
		}
	}
	b.WriteString("END\x00")
	return b.String()
}

func e(typ, p string) []string { return []string{"E", typ, p, ""} }

const (
	oldUID = "0b6e4c1a-1111-4c1e-9d2b-aaaaaaaaaaaa"
	newUID = "0b6e4c1a-2222-4c1e-9d2b-bbbbbbbbbbbb"
	gone   = "0b6e4c1a-3333-4c1e-9d2b-cccccccccccc"
	driver = "csi.example.com"
	handle = "vol-0123"
	kr     = "/var/lib/kubelet"
)

// sha256("vol-0123")
var sha = strings.Split(CSIGlobalMountPath(driver, handle), "/")[4]

func fixtureMountinfo(withOld bool) string {
	lines := []string{
		`27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw`,
		`30 27 8:16 / /var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/` + sha + `/globalmount rw shared:40 - ext4 /dev/sdb rw`,
		`31 27 8:16 / /var/lib/kubeletX/pods/` + oldUID + `/volumes/kubernetes.io~csi/pv1/mount rw - ext4 /dev/sdb rw`,
		`50 27 8:16 / /var/lib/kubelet/pods/` + newUID + `/volumes/kubernetes.io~csi/pv1/mount rw shared:40 - ext4 /dev/sdb rw`,
		`51 27 0:70 / /var/lib/kubelet/pods/` + newUID + `/volumes/kubernetes.io~projected/kube-api-access-new rw - tmpfs tmpfs rw`,
	}
	if withOld {
		lines = append(lines,
			`40 27 8:16 / /var/lib/kubelet/pods/`+oldUID+`/volumes/kubernetes.io~csi/pv1/mount rw shared:40 - ext4 /dev/sdb rw`,
			`41 27 0:60 / /var/lib/kubelet/pods/`+oldUID+`/volumes/kubernetes.io~projected/kube-api-access-abc rw - tmpfs tmpfs rw,size=1024k`,
			`42 27 254:0 /mnt/disks/pv2 /var/lib/kubelet/pods/`+oldUID+`/volumes/kubernetes.io~local-volume/pv2 rw - ext4 /dev/vda rw`,
			`43 27 254:0 /mnt/disks/pv2/sub /var/lib/kubelet/pods/`+oldUID+`/volume-subpaths/pv2/app/0 rw - ext4 /dev/vda rw`,
			`44 27 0:5 /sdc /var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pv3/`+oldUID+` rw - devtmpfs udev rw`,
		)
	}
	return strings.Join(lines, "\n") + "\n"
}

func fixtureRecords(withOld bool) [][]string {
	gm := "plugins/kubernetes.io/csi/" + driver + "/" + sha
	recs := [][]string{
		e("d", "plugins/kubernetes.io"),
		e("d", "plugins/kubernetes.io/csi"),
		e("d", "plugins/kubernetes.io/csi/"+driver),
		e("d", gm),
		e("f", gm+"/vol_data.json"),
		e("d", gm+"/globalmount"),
		e("d", gm+"/globalmount/lost+found"), // inside the global mount: dropped
		e("f", gm+"/globalmount/data.txt"),   // dropped
		e("s", "plugins/"+driver+"/csi.sock"),
		e("d", "pods/"+newUID),
		e("d", "pods/"+newUID+"/volumes"),
		e("d", "pods/"+newUID+"/volumes/kubernetes.io~csi"),
		e("d", "pods/"+newUID+"/volumes/kubernetes.io~csi/pv1"),
		e("f", "pods/"+newUID+"/volumes/kubernetes.io~csi/pv1/vol_data.json"),
		e("d", "pods/"+newUID+"/volumes/kubernetes.io~csi/pv1/mount"),
		e("f", "pods/"+newUID+"/volumes/kubernetes.io~csi/pv1/mount/data.txt"), // dropped
		e("d", "pods/"+newUID+"/volumes/kubernetes.io~projected"),
		e("d", "pods/"+newUID+"/volumes/kubernetes.io~projected/kube-api-access-new"),
		{"V", gm + "/vol_data.json", `{"volumeHandle":"vol-0123","driverName":"csi.example.com"}`, "ok"},
		{"V", "pods/" + newUID + "/volumes/kubernetes.io~csi/pv1/vol_data.json", "", "ok"},
		{"V", "pods/" + newUID + "/volumes/kubernetes.io~csi/pv1/mount/vol_data.json", "{}", "ok"}, // inside a mount: dropped
	}
	if !withOld {
		return recs
	}
	o := "pods/" + oldUID
	vd := "plugins/kubernetes.io/csi/volumeDevices"
	return append(recs,
		e("d", o),
		e("d", o+"/volumes"),
		e("d", o+"/volumes/kubernetes.io~csi"),
		e("d", o+"/volumes/kubernetes.io~csi/pv1"),
		e("f", o+"/volumes/kubernetes.io~csi/pv1/vol_data.json"),
		e("d", o+"/volumes/kubernetes.io~csi/pv1/mount"),
		e("d", o+"/volumes/kubernetes.io~local-volume"),
		e("d", o+"/volumes/kubernetes.io~local-volume/pv2"),
		e("d", o+"/volumes/kubernetes.io~local-volume/pv2/data"),       // same-device bind: find went in; dropped
		e("f", o+"/volumes/kubernetes.io~local-volume/pv2/data/x.txt"), // dropped
		e("d", o+"/volumes/kubernetes.io~projected"),
		e("d", o+"/volumes/kubernetes.io~projected/kube-api-access-abc"),
		e("d", o+"/volume-subpaths"),
		e("d", o+"/volume-subpaths/pv2"),
		e("d", o+"/volume-subpaths/pv2/app"),
		e("d", o+"/volume-subpaths/pv2/app/0"),
		e("f", o+"/volume-subpaths/pv2/app/0/inside"), // dropped
		e("d", o+"/volumeDevices"),
		e("d", o+"/volumeDevices/kubernetes.io~csi"),
		[]string{"E", "l", o + "/volumeDevices/kubernetes.io~csi/pv3", "/dev/sdc"},
		e("f", o+"/volumes/big/vol_data.json"),
		e("d", vd),
		e("d", vd+"/publish"),
		e("d", vd+"/publish/pv3"),
		e("f", vd+"/publish/pv3/"+oldUID),
		e("d", vd+"/pv3"),
		e("d", vd+"/pv3/dev"),
		e("d", vd+"/pv3/dev/"+oldUID),
		e("f", vd+"/pv3/dev/"+oldUID+"/x"),
		e("d", vd+"/pv3/data"),
		e("f", vd+"/pv3/data/vol_data.json"),
		[]string{"V", o + "/volumes/kubernetes.io~csi/pv1/vol_data.json", `{"specVolID":"pv1","volumeHandle":"vol-0123","driverName":"csi.example.com","nodeName":"n1","attachmentID":"csi-abc","volumeLifecycleMode":"Persistent","seLinuxMountContext":"system_u:object_r:container_file_t:s0"}`, "ok"},
		[]string{"V", vd + "/pv3/data/vol_data.json", "", "err"},
	)
}

func fixtureSnapshot(t *testing.T, withOld bool) (*Snapshot, *fakeNode) {
	t.Helper()
	node := &fakeNode{stdout: output(fixtureMountinfo(withOld), kr, fixtureRecords(withOld)...)}
	s, err := Reader{Node: node}.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return s, node
}

func TestSnapshotFixture(t *testing.T) {
	s, node := fixtureSnapshot(t, true)

	// One command, with the defaults.
	if len(node.argv) != 1 {
		t.Fatalf("ran %d commands, want 1: %q", len(node.argv), node.argv)
	}
	argv := node.argv[0]
	if argv[0] != "sh" || argv[1] != "-c" || !strings.Contains(argv[2], "find ") || !reflect.DeepEqual(argv[4:], []string{DefaultMountinfoPath, DefaultKubeletRoot, "6"}) {
		t.Errorf("argv = %q", argv)
	}

	if got, want := s.PodUIDs(), []string{oldUID, newUID}; !reflect.DeepEqual(got, want) {
		t.Errorf("PodUIDs() = %q, want %q", got, want)
	}
	if got := len(s.Mounts()); got != 8 {
		t.Errorf("len(Mounts()) = %d, want 8 (the kubeletX mount is not under the root): %+v", got, s.Mounts())
	}
	if s.HiddenEntries != 6 {
		t.Errorf("HiddenEntries = %d, want 6", s.HiddenEntries)
	}
	for _, hidden := range []string{
		"plugins/kubernetes.io/csi/" + driver + "/" + sha + "/globalmount/data.txt",
		"pods/" + oldUID + "/volumes/kubernetes.io~local-volume/pv2/data",
		"pods/" + oldUID + "/volume-subpaths/pv2/app/0/inside",
	} {
		if _, ok := s.Lookup(hidden); ok {
			t.Errorf("entry %s inside a mount point is listed", hidden)
		}
	}
	for _, kept := range []string{
		"pods/" + oldUID + "/volumes/kubernetes.io~local-volume/pv2",
		"plugins/" + driver + "/csi.sock",
	} {
		if _, ok := s.Lookup(kept); !ok {
			t.Errorf("entry %s missing", kept)
		}
	}
	if en, _ := s.Lookup("plugins/" + driver + "/csi.sock"); en.Type != TypeSocket {
		t.Errorf("csi.sock type = %q", en.Type)
	}

	old := s.Pod(oldUID)
	if !old.Exists {
		t.Error("old pod does not exist")
	}
	var mps []string
	for _, m := range old.Mounts {
		mps = append(mps, strings.TrimPrefix(m.MountPoint, kr+"/pods/"+oldUID+"/"))
	}
	wantMps := []string{
		"volumes/kubernetes.io~csi/pv1/mount",
		"volumes/kubernetes.io~projected/kube-api-access-abc",
		"volumes/kubernetes.io~local-volume/pv2",
		"volume-subpaths/pv2/app/0",
	}
	if !reflect.DeepEqual(mps, wantMps) {
		t.Errorf("old pod mounts = %q, want %q", mps, wantMps)
	}
	if len(old.Entries) != 17 || old.Entries[0] != "pods/"+oldUID+"/volume-subpaths" {
		t.Errorf("old pod entries (%d) = %q", len(old.Entries), old.Entries)
	}
	wantPlugin := []string{
		"plugins/kubernetes.io/csi/volumeDevices/publish/pv3/" + oldUID,
		"plugins/kubernetes.io/csi/volumeDevices/pv3/dev/" + oldUID,
		"plugins/kubernetes.io/csi/volumeDevices/pv3/dev/" + oldUID + "/x",
	}
	if !reflect.DeepEqual(old.PluginEntries, wantPlugin) {
		t.Errorf("PluginEntries = %q, want %q", old.PluginEntries, wantPlugin)
	}
	if len(old.PluginMounts) != 1 || old.PluginMounts[0].FSType != "devtmpfs" {
		t.Errorf("PluginMounts = %+v", old.PluginMounts)
	}
	if p := s.Pod(gone); p.Exists || len(p.Entries)+len(p.Mounts)+len(p.PluginEntries) != 0 {
		t.Errorf("Pod(gone) = %+v", p)
	}
	if p := s.Pod(""); p.Exists || len(p.PluginEntries) != 0 {
		t.Errorf("Pod(\"\") = %+v", p)
	}

	gmPath, n := s.CSIGlobalMount(driver, handle)
	if gmPath != "plugins/kubernetes.io/csi/csi.example.com/"+sha+"/globalmount" || n != 1 {
		t.Errorf("CSIGlobalMount = %q, %d", gmPath, n)
	}
	if _, n := s.CSIGlobalMount(driver, "other"); n != 0 {
		t.Errorf("CSIGlobalMount(other) count = %d", n)
	}
	if n := s.MountCount("pods/" + newUID + "/volumes/kubernetes.io~csi/pv1/mount"); n != 1 {
		t.Errorf("new pod's CSI mount count = %d", n)
	}

	vds := s.VolData()
	if len(vds) != 5 {
		t.Errorf("VolData() has %d files, want 5: %v", len(vds), vds)
	}
	v := vds["pods/"+oldUID+"/volumes/kubernetes.io~csi/pv1/vol_data.json"]
	if v.Err != "" || v.SpecVolID != "pv1" || v.VolumeHandle != handle || v.DriverName != driver || v.NodeName != "n1" ||
		v.AttachmentID != "csi-abc" || v.VolumeLifecycleMode != "Persistent" || string(v.Other["seLinuxMountContext"]) != `"system_u:object_r:container_file_t:s0"` {
		t.Errorf("old pod vol_data = %+v", v)
	}
	if v := vds["plugins/kubernetes.io/csi/"+driver+"/"+sha+"/vol_data.json"]; v.VolumeHandle != handle || v.Err != "" {
		t.Errorf("global vol_data = %+v", v)
	}
	if v := vds["pods/"+newUID+"/volumes/kubernetes.io~csi/pv1/vol_data.json"]; v.Err != "empty file" {
		t.Errorf("empty vol_data = %+v", v)
	}
	if v := vds["plugins/kubernetes.io/csi/volumeDevices/pv3/data/vol_data.json"]; !strings.Contains(v.Err, "cannot read") {
		t.Errorf("unreadable vol_data = %+v", v)
	}
	if v := vds["pods/"+oldUID+"/volumes/big/vol_data.json"]; !strings.Contains(v.Err, "not read") {
		t.Errorf("big vol_data = %+v", v)
	}

	lo := s.Leftovers([]string{oldUID, gone, oldUID})
	var got []string
	for _, l := range lo {
		if l.UID != oldUID {
			t.Errorf("leftover for %s: %v", l.UID, l)
		}
		got = append(got, l.Kind+" "+l.Path)
	}
	want := []string{
		"pod-dir pods/" + oldUID,
		"mount " + kr + "/plugins/kubernetes.io/csi/volumeDevices/publish/pv3/" + oldUID,
		"mount " + kr + "/pods/" + oldUID + "/volume-subpaths/pv2/app/0",
		"mount " + kr + "/pods/" + oldUID + "/volumes/kubernetes.io~csi/pv1/mount",
		"mount " + kr + "/pods/" + oldUID + "/volumes/kubernetes.io~local-volume/pv2",
		"mount " + kr + "/pods/" + oldUID + "/volumes/kubernetes.io~projected/kube-api-access-abc",
		"plugin-entry plugins/kubernetes.io/csi/volumeDevices/publish/pv3/" + oldUID,
		"plugin-entry plugins/kubernetes.io/csi/volumeDevices/pv3/dev/" + oldUID,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Leftovers =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(lo) > 4 {
		// The headline names what keeps the dir, mounts first, not the
		// kubelet's own entries in listing order.
		if d := lo[0].Detail; !strings.HasPrefix(d, `dir still present (17 entries), kept by volume-subpaths/pv2/app/0 (mounted), volumes/kubernetes.io~csi/pv1/mount (mounted), `) ||
			!strings.Contains(d, " more") || strings.Contains(d, "containers") {
			t.Errorf("pod-dir detail = %q", d)
		}
		if d := lo[4].Detail; d != "ext4 from /dev/vda[/mnt/disks/pv2]" {
			t.Errorf("local volume mount detail = %q", d)
		}
		if d := lo[6].Detail; d != "file, mounted 1 time(s)" {
			t.Errorf("publish entry detail = %q", d)
		}
	}
	if lo := s.Leftovers([]string{gone}); len(lo) != 0 {
		t.Errorf("Leftovers(gone) = %v", lo)
	}
	if lo := s.Leftovers(nil); len(lo) != 0 {
		t.Errorf("Leftovers(nil) = %v", lo)
	}
	if lo := s.Leftovers([]string{newUID}); len(lo) != 3 {
		t.Errorf("Leftovers(new) = %v, want the dir and 2 mounts", lo)
	}

	str := s.String()
	for _, want := range []string{
		"mounts below the kubelet root (8):",
		"  tmpfs " + kr + "/pods/" + oldUID + "/volumes/kubernetes.io~projected/kube-api-access-abc from tmpfs\n",
		"  symlink pods/" + oldUID + "/volumeDevices/kubernetes.io~csi/pv3 -> /dev/sdc\n",
		"  dir pods/" + newUID + "/volumes/kubernetes.io~csi/pv1/mount [mount point x1]\n",
		"6 inside mount points not listed",
		`"volumeLifecycleMode":"Persistent"`,
	} {
		if !strings.Contains(str, want) {
			t.Errorf("String() lacks %q:\n%s", want, str)
		}
	}
}

func TestDiffFixture(t *testing.T) {
	before, _ := fixtureSnapshot(t, true)
	after, _ := fixtureSnapshot(t, false)
	d := Diff(before, after)
	if d != Diff(before, after) {
		t.Fatal("Diff is not deterministic")
	}
	lines := strings.Split(strings.TrimSuffix(d, "\n"), "\n")
	// 5 mounts, 31-3 entries (3 lie inside mount points), 3 vol_data files.
	if len(lines) != 5+28+3 {
		t.Errorf("Diff has %d lines, want 36:\n%s", len(lines), d)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "- ") {
			t.Errorf("unexpected line %q", l)
		}
	}
	if lines[0] != "- mount devtmpfs "+kr+"/plugins/kubernetes.io/csi/volumeDevices/publish/pv3/"+oldUID+" from udev[/sdc]" {
		t.Errorf("first line = %q", lines[0])
	}
	if !strings.Contains(d, "\n- mount tmpfs "+kr+"/pods/"+oldUID+"/volumes/kubernetes.io~projected/kube-api-access-abc from tmpfs\n") {
		t.Errorf("Diff lacks the projected tmpfs:\n%s", d)
	}
	if !strings.Contains(d, "\n- dir pods/"+oldUID+"\n") || !strings.Contains(d, "\n- symlink pods/"+oldUID+"/volumeDevices/kubernetes.io~csi/pv3 -> /dev/sdc\n") {
		t.Errorf("Diff lacks the pod dir or the symlink:\n%s", d)
	}
	if back := Diff(after, before); strings.Count(back, "\n+ ") != 35 || strings.Contains(back, "- ") {
		t.Errorf("reverse Diff:\n%s", back)
	}
	if d := Diff(before, before); d != "" {
		t.Errorf("Diff(s, s) = %q", d)
	}
}

func TestDiffExact(t *testing.T) {
	mi := func(lines ...string) string {
		return strings.Join(append([]string{`1 0 8:1 / / rw - ext4 /dev/sda rw`}, lines...), "\n") + "\n"
	}
	parse := func(out string) *Snapshot {
		s, err := parseOutput("/k", "/proc/1/mountinfo", out)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := parse(output(mi(
		`2 1 0:40 / /k/pods/a/m rw - tmpfs tmpfs rw`,
		`3 1 0:41 / /k/pods/a/m rw - tmpfs tmpfs rw`, // stacked
		`4 1 0:42 / /k/pods/a/n\040x rw - tmpfs tmpfs rw`,
	), "/k", e("d", "pods/a"), e("d", "pods/a/m"), e("d", "pods/a/n x"), e("f", "pods/a/m/in")))
	after := parse(output(mi(
		`3 1 0:41 / /k/pods/a/m rw - tmpfs tmpfs rw`,
		`9 1 0:43 / /k/pods/b/m rw - tmpfs tmpfs rw`,
	), "/k", e("d", "pods/a"), e("f", "pods/a/m"), e("d", "pods/b"), e("d", "pods/b/m"), []string{"V", "pods/b/vol_data.json", "{}", "ok"}, e("f", "pods/b/vol_data.json")))
	want := `- mount tmpfs /k/pods/a/m from tmpfs
- mount tmpfs "/k/pods/a/n x" from tmpfs
+ mount tmpfs /k/pods/b/m from tmpfs
- dir pods/a/m
+ file pods/a/m
- dir "pods/a/n x"
+ dir pods/b
+ dir pods/b/m
+ file pods/b/vol_data.json
+ vol_data pods/b/vol_data.json {}
`
	if got := Diff(before, after); got != want {
		t.Errorf("Diff =\n%s\nwant\n%s", got, want)
	}
	if got := Diff(nil, nil); got != "" {
		t.Errorf("Diff(nil, nil) = %q", got)
	}
	if before.HiddenEntries != 1 {
		t.Errorf("HiddenEntries = %d, want 1 (pods/a/m/in)", before.HiddenEntries)
	}
}

// A kubelet root with a space: the mount table escapes it (\040), find
// prints it plainly; both must meet.
func TestSnapshotFixtureEscapedRoot(t *testing.T) {
	root := "/var/lib/my kubelet"
	uid := "u1"
	node := &fakeNode{stdout: output(
		`27 1 254:0 / / rw - ext4 /dev/vda rw`+"\n"+
			`40 27 0:60 / /var/lib/my\040kubelet/pods/u1/volumes/kubernetes.io~projected/kube-api-access-abc rw - tmpfs tmpfs rw`+"\n"+
			`41 27 0:61 / /var/lib/my\040kubeletX/pods/u1/volumes/kubernetes.io~projected/kube-api-access-abc rw - tmpfs tmpfs rw`+"\n",
		root,
		e("d", "pods/u1"), e("d", "pods/u1/volumes"), e("d", "pods/u1/volumes/kubernetes.io~projected"),
		e("d", "pods/u1/volumes/kubernetes.io~projected/kube-api-access-abc"),
		e("l", "pods/u1/volumes/kubernetes.io~projected/kube-api-access-abc/token"),
	)}
	s, err := Reader{Node: node, KubeletRoot: root + "/"}.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := node.argv[0][5]; got != root {
		t.Errorf("root argument = %q, want it cleaned", got)
	}
	p := s.Pod(uid)
	if len(p.Mounts) != 1 || p.Mounts[0].MountPoint != root+"/pods/u1/volumes/kubernetes.io~projected/kube-api-access-abc" {
		t.Errorf("mounts = %+v", p.Mounts)
	}
	if len(p.Entries) != 3 || s.HiddenEntries != 1 {
		t.Errorf("entries = %q, hidden %d", p.Entries, s.HiddenEntries)
	}
	if !strings.Contains(s.String(), `tmpfs "/var/lib/my kubelet/pods/u1/`) {
		t.Errorf("String() does not quote the path:\n%s", s)
	}
}

func TestSnapshotErrors(t *testing.T) {
	good := output(fixtureMountinfo(false), kr, fixtureRecords(false)...)
	tests := []struct {
		name    string
		node    *fakeNode
		reader  Reader
		wantErr string
	}{
		{"missing root", &fakeNode{stdout: header + "\x00M\x00" + fixtureMountinfo(false) + "\x00", stderr: "sh: cd: can't cd to /var/lib/kubelet", code: 11}, Reader{}, "kubelet root /var/lib/kubelet is missing"},
		{"unreadable mountinfo", &fakeNode{stderr: "cat: /proc/1/mountinfo: Permission denied", code: 10}, Reader{}, "cannot read mount table /proc/1/mountinfo"},
		{"find failed", &fakeNode{stderr: "find: 'pods/x': Permission denied", code: 12}, Reader{}, "Permission denied"},
		{"connection lost", &fakeNode{code: 255}, Reader{}, "(exit 255)"},
		{"truncated", &fakeNode{stdout: strings.TrimSuffix(good, "END\x00")}, Reader{}, "no END record"},
		{"truncated record", &fakeNode{stdout: header + "\x00M\x00\x00R\x00/k\x00E\x00d\x00"}, Reader{}, "truncated \"E\" record"},
		{"no header", &fakeNode{stdout: "hello"}, Reader{}, "header"},
		{"unknown record", &fakeNode{stdout: strings.Replace(good, "E\x00", "Q\x00", 1)}, Reader{}, `unexpected record "Q"`},
		{"bad mountinfo", &fakeNode{stdout: output("27 1 254:0 / / rw - ext4 /dev/vda rw\nbogus line\n", kr)}, Reader{}, "line 2"},
		{"relative root", &fakeNode{stdout: good}, Reader{KubeletRoot: "var/lib/kubelet"}, "not absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.reader
			r.Node = tt.node
			_, err := r.Snapshot(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Snapshot() error = %v, want one containing %q", err, tt.wantErr)
			}
			// The script goes in the evidence, never in the headline.
			if strings.Contains(err.Error(), "nodestate-snapshot") || len(err.Error()) > 300 {
				t.Errorf("error quotes the snapshot command (%d chars): %.200s", len(err.Error()), err)
			}
		})
	}
	if _, err := (Reader{}).Snapshot(context.Background()); err == nil {
		t.Error("Snapshot with a nil Node succeeded")
	}
}

func TestVolumeDirs(t *testing.T) {
	p := PodState{UID: "u1", Entries: []string{
		"pods/u1/containers",
		"pods/u1/volumes",
		"pods/u1/volumes/kubernetes.io~csi",
		"pods/u1/volumes/kubernetes.io~csi/pv1",
		"pods/u1/volumes/kubernetes.io~csi/pv1/mount",
		"pods/u1/volumes/kubernetes.io~csi/pv1/vol_data.json",
		"pods/u1/volumes/kubernetes.io~projected/kube-api-access-x",
		"pods/u1/volumeDevices/kubernetes.io~csi/pv2",
		"pods/u1/volume-subpaths/v/c/0",
	}}
	got := p.VolumeDirs()
	want := []string{"pods/u1/volumes/kubernetes.io~csi/pv1", "pods/u1/volumes/kubernetes.io~projected/kube-api-access-x", "pods/u1/volumeDevices/kubernetes.io~csi/pv2"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("VolumeDirs() = %v, want %v", got, want)
	}
}
