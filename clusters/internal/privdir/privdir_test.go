package privdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProblem(t *testing.T) {
	base := t.TempDir()
	own := filepath.Join(base, "own")
	if p, err := Ensure(own, 0o700); err != nil || p != "" {
		t.Fatalf("Ensure(%s) = %q, %v; want no problem", own, p, err)
	}
	if fi, err := os.Stat(own); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("Ensure made %s with %v (%v), want 0700", own, fi.Mode().Perm(), err)
	}
	shared := filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if p, _ := Problem(shared); !strings.Contains(p, "writable by others (mode 0777)") {
		t.Errorf("Problem(world-writable) = %q", p)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(own, link); err != nil {
		t.Fatal(err)
	}
	if p, _ := Problem(link); !strings.Contains(p, "symbolic link") {
		t.Errorf("Problem(symlink) = %q", p)
	}
	if _, err := Problem(filepath.Join(base, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Problem(missing) err = %v, want not exist", err)
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(base, "other")
		if err := os.Mkdir(other, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if p, _ := Problem(other); !strings.Contains(p, "owned by uid 65534, not by you (uid 0)") {
			t.Errorf("Problem(nobody's dir) = %q", p)
		}
	}
}
