package filetest

import (
	"os"
	"path/filepath"
	"testing"
)

// recorder counts the errors a helper reports, so the test can see that
// each assertion fails when it should.
type recorder struct {
	testing.TB
	errors int
}

func (r *recorder) Helper()               {}
func (r *recorder) Error(...any)          { r.errors++ }
func (r *recorder) Errorf(string, ...any) { r.errors++ }

func TestWriteAndAssert(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a", "b", "kubelet")
	Write(t, p, "v1", 0o751)
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o751 {
		t.Fatalf("Write: %v, %v", fi, err)
	}

	for _, c := range []struct {
		name   string
		assert func(r *recorder)
		want   int
	}{
		{"right content and mode", func(r *recorder) { AssertContent(r, p, "v1", 0o751) }, 0},
		{"wrong content", func(r *recorder) { AssertContent(r, p, "v2", 0o751) }, 1},
		{"wrong mode", func(r *recorder) { AssertContent(r, p, "v1", 0o755) }, 1},
		{"no file", func(r *recorder) { AssertContent(r, filepath.Join(dir, "none"), "v1", 0o755) }, 1},
		{"missing is missing", func(r *recorder) { AssertMissing(r, filepath.Join(dir, "none")) }, 0},
		{"present is not missing", func(r *recorder) { AssertMissing(r, p) }, 1},
	} {
		r := &recorder{TB: t}
		c.assert(r)
		if r.errors != c.want {
			t.Errorf("%s: %d errors, want %d", c.name, r.errors, c.want)
		}
	}

	// A dangling link is not missing: the drivers' renames must not leave one.
	l := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "gone"), l); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	AssertMissing(r, l)
	if r.errors != 1 {
		t.Errorf("dangling link: %d errors, want 1", r.errors)
	}
}
