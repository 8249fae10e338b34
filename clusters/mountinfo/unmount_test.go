package mountinfo

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"sigs.k8s.io/skewtest/internal/testgate"
)

func TestUnmountUnder(t *testing.T) {
	testgate.RequireRoot(t, "mounts tmpfs, nested and beside the directory it unmounts under")
	dir := t.TempDir()
	nested := filepath.Join(dir, "a", "b")
	sibling := filepath.Join(dir + "-sibling") // path-aware: not under dir
	for _, d := range []string{nested, sibling} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = syscall.Unmount(sibling, syscall.MNT_DETACH)
		os.RemoveAll(sibling)
	})
	mount := func(target string) {
		t.Helper()
		if err := syscall.Mount("tmpfs", target, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount %s: %v", target, err)
		}
	}
	// Two tmpfs stacked on dir/a, one below it after the dirs are remade
	// inside the top mount, and one on a sibling that must stay.
	mount(filepath.Join(dir, "a"))
	mount(filepath.Join(dir, "a"))
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	mount(nested)
	mount(sibling)

	count := func(p string) int {
		mounts, err := ParseFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		return len(Under(mounts, p))
	}
	if n := count(dir); n != 3 {
		t.Fatalf("%d mounts under %s before, want 3", n, dir)
	}
	if err := UnmountUnder(dir); err != nil {
		t.Fatal(err)
	}
	if n := count(dir); n != 0 {
		t.Errorf("%d mounts left under %s", n, dir)
	}
	if n := count(sibling); n != 1 {
		t.Errorf("the sibling %s lost its mount (%d left), want it untouched", sibling, n)
	}
	if err := UnmountUnder(dir); err != nil {
		t.Errorf("a second call on a clean dir: %v", err)
	}
}

// UnmountBelow leaves dir's own mount (a bind of itself) and takes what
// is mounted below it.
func TestUnmountBelow(t *testing.T) {
	testgate.RequireRoot(t, "binds a directory over itself and mounts tmpfs below it")
	dir := t.TempDir()
	below := filepath.Join(dir, "below")
	if err := os.MkdirAll(below, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	if err := syscall.Mount("tmpfs", below, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := UnmountBelow(dir); err != nil {
		t.Fatal(err)
	}
	mounts, err := ParseFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if CountAt(mounts, below) != 0 {
		t.Errorf("%s still mounted after UnmountBelow", below)
	}
	if CountAt(mounts, dir) != 1 {
		t.Errorf("%s's own bind: %d mounts after UnmountBelow, want 1", dir, CountAt(mounts, dir))
	}
	if err := UnmountUnder(dir); err != nil {
		t.Fatal(err)
	}
}
