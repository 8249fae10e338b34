package loopdev

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// ListOn reads the node's loop devices with a command and must agree with
// List, which reads /sys/block itself.
func TestListOnAgreesWithList(t *testing.T) {
	want, err := List()
	if err != nil {
		t.Skipf("no %s here: %v", sysBlock, err)
	}
	got, err := ListOn(t.Context(), exec.Local{})
	if err != nil {
		t.Fatal(err)
	}
	// Devices may come and go between the two reads (other jobs share the
	// host): compare only those both saw.
	byPath := map[string]Device{}
	for _, d := range want {
		byPath[d.Path] = d
	}
	both := 0
	for _, d := range got {
		if w, ok := byPath[d.Path]; ok {
			both++
			if w != d {
				t.Errorf("ListOn %+v, List %+v", d, w)
			}
		}
	}
	if len(want) > 0 && both == 0 {
		t.Errorf("ListOn saw none of List's %d devices: %+v", len(want), got)
	}
}

func TestListInParsesBackingFiles(t *testing.T) {
	dir := t.TempDir()
	for name, backing := range map[string]string{
		"loop0": "/var/lib/x/vol.img\n",
		"loop7": "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/pv/dev/uid (deleted)\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, name, "loop"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "loop", "backing_file"), []byte(backing), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "loop3"), 0o755); err != nil { // not attached
		t.Fatal(err)
	}
	got, err := ListIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Path: "/dev/loop0", BackingFile: "/var/lib/x/vol.img"},
		{Path: "/dev/loop7", BackingFile: "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/pv/dev/uid", Deleted: true},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("ListIn = %+v, want %+v", got, want)
	}
}

// A kubelet maps a raw block volume by opening the device through a bind
// mount and attaching a loop device over it; once teardown has unmounted
// that bind, the kernel shows the loop device's backing file as "/", not
// under the run directory. DetachUnder must still find and detach it, or
// the volume's own loop device stays busy and leaks.
func TestDetachUnderFindsLoopDevicesOverLoopDevices(t *testing.T) {
	testgate.RequireRoot(t, "attaches loop devices over loop devices and bind-mounts them")
	ctx := t.Context()
	dir := t.TempDir()
	img := filepath.Join(dir, "vol.img")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	lower, err := Attach(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Detach(context.Background(), lower) })
	link := filepath.Join(dir, "dev-link")
	if err := os.WriteFile(link, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(lower, link, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	upper, err := Attach(ctx, link)
	if err != nil {
		_ = unix.Unmount(link, 0)
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Detach(context.Background(), upper) })
	// As teardown does: lazily, since the loop device holds the file open.
	if err := unix.Unmount(link, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if b := BackingFile(upper); strings.HasPrefix(b, dir) {
		t.Logf("the kernel still shows %s's backing file under the dir (%s); the test proves less", upper, b)
	}
	if err := DetachUnder(ctx, dir, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{upper, lower} {
		if b := BackingFile(d); b != "" {
			t.Errorf("%s still attached to %s", d, b)
		}
	}
}
