package loopdev

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/skewtest/clusters/exec"
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
