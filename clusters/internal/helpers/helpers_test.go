package helpers

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// go build names a program after its package's last element, and the
// programs are found by that name in the build's output and in embedDir.
func TestProgramNames(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range All() {
		if path.Base(p.Package) != p.Name {
			t.Errorf("%s: go build names it %s", p.Name, path.Base(p.Package))
		}
		if !strings.HasPrefix(p.Package, Module+"/") {
			t.Errorf("%s: package %s is not in %s", p.Name, p.Package, Module)
		}
		if seen[p.Name] {
			t.Errorf("%s listed twice", p.Name)
		}
		seen[p.Name] = true
	}
	if len(seen) != 4 {
		t.Errorf("%d helper programs, want podbin, the CSI driver, kindcni and the runc shim", len(seen))
	}
}

func writeGoMod(t *testing.T, dir, text string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The source tree is the first directory inside skewtest's module; any
// other module, or none, is refused with the programs and the fix named.
func TestFindRoot(t *testing.T) {
	base := t.TempDir()
	ours := filepath.Join(base, "skewtest")
	writeGoMod(t, ours, "// a comment\nmodule \"sigs.k8s.io/skewtest\" // quoted\n\ngo 1.26\n")
	deep := filepath.Join(ours, "clusters", "internal")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(base, "kubernetes")
	writeGoMod(t, theirs, "module k8s.io/kubernetes\n\ngo 1.26\n")
	none := filepath.Join(base, "none")
	if err := os.MkdirAll(none, 0o755); err != nil {
		t.Fatal(err)
	}

	if root, err := findRoot(theirs, deep); err != nil || root != ours {
		t.Errorf("findRoot(kubernetes, skewtest/clusters/internal) = %q, %v; want %s", root, err, ours)
	}
	_, err := findRoot(none, theirs)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("findRoot outside skewtest's module: %v; want ErrUnavailable", err)
	}
	for _, w := range []string{"make skewtest", "bin/skewtest", none + " is not inside a Go module", theirs + " is inside module k8s.io/kubernetes", "podbin", "skewtest-csi-driver", "kindcni", "skewtest-runc-shim"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q: %v", w, err)
		}
	}
	if _, err := findRoot(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("findRoot() = %v; want ErrUnavailable", err)
	}
}

// Carried programs are copied out whole and executable; one the binary does not carry is an error naming it and the fix.
func TestWriteCarried(t *testing.T) {
	fsys := fstest.MapFS{
		"podbin":              {Data: []byte("\x7fELF podbin"), Mode: 0o755},
		"skewtest-csi-driver": {Data: bytes.Repeat([]byte("csi"), 1<<16), Mode: 0o755},
	}
	dir := t.TempDir() // Write makes it
	paths, err := writeCarried(fsys, dir, []Program{Podbin, CSIDriver})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range fsys {
		p := paths[name]
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, f.Data) || p != filepath.Join(dir, name) {
			t.Errorf("%s: %s holds %d bytes (%v); want %d bytes in %s", name, p, len(b), err, len(f.Data), dir)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, %v; want 0755", name, fi.Mode(), err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%s holds %d entries, want the 2 programs and no temporary file", dir, len(entries))
	}
	_, err = writeCarried(fsys, dir, []Program{Podbin, KindCNI})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "kindcni") || !strings.Contains(err.Error(), "make skewtest") {
		t.Errorf("writeCarried of a program not carried: %v; want ErrUnavailable naming kindcni and make skewtest", err)
	}
}

// A test binary carries nothing: Write builds from this source tree, into
// a directory it makes private, leaving no build directory behind, and a
// second Write gives the same bytes (no commit or path stamped in).
func TestWriteBuildsFromSource(t *testing.T) {
	if carried() != nil {
		t.Fatal("a test binary carries helper programs: it was built with the embedhelpers tag")
	}
	if err := Check(All()...); err != nil {
		t.Fatalf("Check inside the source tree: %v", err)
	}
	if origin, err := Origin(); err != nil || !strings.Contains(origin, "source tree") {
		t.Errorf("Origin() = %q, %v; want a build from the source tree", origin, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var sums [][]byte
	for range 2 {
		dir := filepath.Join(t.TempDir(), "own")
		paths, err := Write(ctx, dir, KindCNI, Podbin)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("Write made %s with mode %v (%v), want 0700", dir, fi.Mode(), err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 2 {
			t.Errorf("%s holds %d entries, want kindcni and podbin only", dir, len(entries))
		}
		b, err := os.ReadFile(paths[Podbin.Name])
		if err != nil || !bytes.HasPrefix(b, []byte("\x7fELF")) {
			t.Fatalf("podbin: %d bytes, %v; want an ELF program", len(b), err)
		}
		sums = append(sums, b)
	}
	if !bytes.Equal(sums[0], sums[1]) {
		t.Error("two builds of podbin from the same source differ")
	}
}
