package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/loopdev"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// TestCleanDetachesLoopDevices: what the CSI driver's EBS mode leaves when
// the harness is killed (a loop device over a backing file in the run
// directory, its device node bind-mounted onto a file as a block volume's
// target is) is unmounted and detached by Clean, and the run directory
// removed; a loop device over a file elsewhere is left alone. The run
// directory is a bind of itself, as Up makes it (mountns.go): unmounted
// first, it would leave the loop device's backing file reading relative
// to the gone bind, and the device attached.
func TestCleanDetachesLoopDevices(t *testing.T) {
	testgate.RequireRoot(t, "makes real loop devices and mounts for Clean to detach")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runDir := filepath.Join(t.TempDir(), "run")
	mkSparse := func(path string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(8 << 20); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return path
	}
	vol := mkSparse(filepath.Join(runDir, "csi", "state", "volumes", "vol-1.img"))
	if err := shareRunDir(runDir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(runDir, unix.MNT_DETACH) })
	ours, err := loopdev.Attach(ctx, vol)
	if err != nil {
		t.Fatal(err)
	}
	other := mkSparse(filepath.Join(t.TempDir(), "not-ours.img"))
	theirs, err := loopdev.Attach(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = loopdev.Detach(context.Background(), theirs)
		// Once Clean freed it, the device may be another test's.
		if loopdev.BackingFile(ours) == vol {
			_ = loopdev.Detach(context.Background(), ours)
		}
	})
	target := filepath.Join(runDir, "kubelet", "plugins", "kubernetes.io", "csi", "volumeDevices", "publish", "pv", "uid")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(ours, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })

	if err := Clean(ctx, runDir); err != nil {
		t.Fatalf("Clean: %v", err)
	}
	// Still attached to the run's volume, not attached at all: other
	// packages' tests attach loop devices meanwhile, and losetup --find
	// hands them the device Clean freed.
	if f := loopdev.BackingFile(ours); f == vol {
		t.Errorf("%s still attached to %s after Clean", ours, f)
	}
	if f := loopdev.BackingFile(theirs); f != other {
		t.Errorf("Clean touched %s, a loop device over %s outside the run directory (now %q)", theirs, other, f)
	}
	if _, err := os.Stat(runDir); err == nil {
		t.Errorf("run directory %s still there", runDir)
	}
}
