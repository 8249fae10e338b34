package debian

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDebianMirror(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "sources.list.d", "other.sources"), []byte(`Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main
`), 0o644))
	must(os.WriteFile(filepath.Join(dir, "sources.list.d", "debian.sources"), []byte(`Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
`), 0o644))
	got, err := Mirror(dir, "bookworm")
	if err != nil || got != "http://deb.debian.org/debian" {
		t.Errorf("deb822: %q %v", got, err)
	}
	// A one-line sources.list wins (read first).
	must(os.WriteFile(filepath.Join(dir, "sources.list"), []byte("# comment\ndeb-src http://src/ bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main contrib\n"), 0o644))
	got, err = Mirror(dir, "bookworm")
	if err != nil || got != "http://mirror.example/debian" {
		t.Errorf("list: %q %v", got, err)
	}
	if _, err := Mirror(dir, "trixie"); err == nil {
		t.Error("no error for a suite without a mirror")
	}
	if m := mirrorFromDeb822("Types: deb\nEnabled: no\nURIs: http://x\nSuites: bookworm\nComponents: main\n", "bookworm"); m != "" {
		t.Errorf("disabled stanza used: %q", m)
	}
}

func TestSpecKey(t *testing.T) {
	a := Spec{Packages: []string{"systemd", "runc"}}
	b := Spec{Suite: Suite, Packages: []string{"runc", "systemd"}}
	if a.Key() != b.Key() {
		t.Errorf("order or the default suite changed the key: %s != %s", a.Key(), b.Key())
	}
	if c := (Spec{Packages: []string{"systemd", "runc", "kmod"}}); c.Key() == a.Key() {
		t.Errorf("a package more did not change the key %s", a.Key())
	}
	if d := (Spec{Suite: "trixie", Packages: a.Packages}); d.Key() == a.Key() {
		t.Errorf("another suite did not change the key %s", a.Key())
	}
	// The kind node image's cached base was made with this formula: keep
	// it, or every cache rebuilds its base.
	if got, want := (Spec{Packages: []string{"b", "a"}}).Key(), "bookworm-"; got[:len(want)] != want || len(got) != len(want)+12 {
		t.Errorf("key %q is not bookworm-<12 hex>", got)
	}
}
