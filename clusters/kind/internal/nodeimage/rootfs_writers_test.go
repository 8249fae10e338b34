package nodeimage

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRootfsWriters(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(outside, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A symlink inside the rootfs pointing at a host path must be replaced,
	// never written through.
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "etc", "link")); err != nil {
		t.Fatal(err)
	}
	if err := writeFileIn(root, "/etc/link", []byte("inside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "host" {
		t.Fatalf("writeFileIn wrote through a symlink to the host: %q", b)
	}
	fi, err := os.Lstat(filepath.Join(root, "etc", "link"))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("etc/link = %v, %v; want a regular 0600 file", fi, err)
	}

	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, []byte("binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := copyFileIn(root, "/usr/local/bin/tool", src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyFileIn(root, "/usr/local/bin/tool", src, 0o755); err != nil {
		t.Fatalf("copying over an existing file: %v", err)
	}
	fi, err = os.Stat(filepath.Join(root, "usr", "local", "bin", "tool"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("tool = %v, %v; want 0755", fi, err)
	}

	if err := symlinkIn(root, "/usr/bin/tool", "/usr/local/bin/tool"); err != nil {
		t.Fatal(err)
	}
	if err := symlinkIn(root, "/usr/bin/tool", "/usr/local/bin/tool"); err != nil {
		t.Fatalf("replacing a symlink: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(root, "usr", "bin", "tool")); err != nil || target != "/usr/local/bin/tool" {
		t.Fatalf("usr/bin/tool -> %q, %v", target, err)
	}
}

// The containerd content store moves out of /var and is reached by its
// old path, through a symlink that stays inside the rootfs wherever the
// rootfs is unpacked.
func TestMoveContentOutOfVar(t *testing.T) {
	root := t.TempDir()
	blob := filepath.Join(contentInVar, "blobs", "sha256", "abc")
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(blob)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, blob), []byte("layer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := moveContentOutOfVar(root); err != nil {
		t.Fatal(err)
	}
	link, err := os.Readlink(filepath.Join(root, contentInVar))
	if err != nil || filepath.IsAbs(link) {
		t.Fatalf("%s: link %q (%v); want a relative symlink", contentInVar, link, err)
	}
	if b, err := os.ReadFile(filepath.Join(root, blob)); err != nil || string(b) != "layer" {
		t.Errorf("the blob by its old path: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(root, contentHome, "blobs", "sha256", "abc")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the blob is not under %s: %v", contentHome, err)
	}
}
