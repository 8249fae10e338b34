package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCapWriter(t *testing.T) {
	var b bytes.Buffer
	c := NewCapWriter(&b, 10)
	for _, s := range []string{"0123", "4567", "89ab", "cdef"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v: a cut write must look whole to the copier", s, n, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	if !strings.HasPrefix(got, "0123456789\n") || !strings.Contains(got, "6 more bytes were not kept (limit 10 bytes)") || strings.Contains(got, "ab") {
		t.Errorf("capped output = %q", got)
	}
	if c.Cut() != 6 {
		t.Errorf("Cut = %d, want 6", c.Cut())
	}

	b.Reset()
	c = NewCapWriter(&b, 10)
	c.Write([]byte("short"))
	c.Close()
	if b.String() != "short" {
		t.Errorf("uncut output = %q, want it as written with no note", b.String())
	}
}

// A provider's own log collection is cut as skewtest's own logs are: the
// long files to their first bytes and the note, the short ones and the
// link left as they are.
func TestCapFiles(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "nodes", "worker", "journal.log")
	if err := os.MkdirAll(filepath.Dir(long), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(long, []byte("0123456789abcdef"), 0o644)
	os.WriteFile(filepath.Join(dir, "short.log"), []byte("short"), 0o644)
	outside := filepath.Join(t.TempDir(), "big")
	os.WriteFile(outside, []byte("0123456789abcdef"), 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	cut, err := CapFiles(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cut) != 1 || cut[0] != filepath.Join("nodes", "worker", "journal.log") {
		t.Errorf("CapFiles cut %v, want the journal alone", cut)
	}
	b, _ := os.ReadFile(long)
	if got := string(b); !strings.HasPrefix(got, "0123456789\n") || !strings.Contains(got, "6 more bytes were not kept (limit 10 bytes)") || strings.Contains(got, "ab") {
		t.Errorf("the long file now reads %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "short.log")); string(b) != "short" {
		t.Errorf("the short file now reads %q", b)
	}
	if b, _ := os.ReadFile(outside); string(b) != "0123456789abcdef" {
		t.Errorf("the file behind a link was cut: %q", b)
	}
}
