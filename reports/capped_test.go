package reports

import (
	"bytes"
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
