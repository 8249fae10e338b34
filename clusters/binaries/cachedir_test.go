package binaries

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/internal/testgate"
)

// As root, a cache another user owns or could write, at any depth, is
// refused as the user's to fix, naming the directory; a cache of root's
// alone (in sticky /tmp, or not made yet) is not.
func TestCheckCacheDirRefusesCachesOthersCanWrite(t *testing.T) {
	testgate.RequireRoot(t, "checks what root may run from; other users' caches are theirs")
	base := t.TempDir()
	own := filepath.Join(base, "own")
	if err := os.MkdirAll(filepath.Join(own, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{own, filepath.Join(own, "bin"), filepath.Join(own, "not", "made", "yet")} {
		if err := CheckCacheDir(dir); err != nil {
			t.Errorf("CheckCacheDir(%s) of root's alone: %v", dir, err)
		}
	}
	users := filepath.Join(base, "users")
	if err := os.MkdirAll(filepath.Join(users, "skewtest"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(users, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(base, "shared")
	if err := os.MkdirAll(filepath.Join(shared, "skewtest"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o775); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(filepath.Join(users, "skewtest"), link); err != nil {
		t.Fatal(err)
	}
	// The cache itself someone else's: chowning it is a fix.
	if err := os.Chown(filepath.Join(users, "skewtest"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(users, "skewtest")
	if err := CheckCacheDir(theirs); err == nil || !strings.Contains(err.Error(), "chown -R root:root "+theirs) {
		t.Errorf("CheckCacheDir(%s), owned by another user, does not offer to chown it: %v", theirs, err)
	}
	// A directory above the cache someone else's (their home): only a
	// cache of root's own is offered, never to take their directory.
	for dir, want := range map[string]string{
		filepath.Join(users, "new"):       users + " is owned by uid 65534",
		filepath.Join(shared, "skewtest"): shared + " is writable by others (mode 0775)",
		link:                              link + " is a symbolic link to " + filepath.Join(users, "skewtest"),
	} {
		err := CheckCacheDir(dir)
		if !errors.Is(err, ErrBadSource) {
			t.Errorf("CheckCacheDir(%s) = %v, want ErrBadSource", dir, err)
			continue
		}
		for _, w := range []string{want, "SKEWTEST_CACHE=/var/cache/skewtest"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("CheckCacheDir(%s) does not say %q: %v", dir, w, err)
			}
		}
		if strings.Contains(err.Error(), "chown") {
			t.Errorf("CheckCacheDir(%s) offers to chown a directory above the cache: %v", dir, err)
		}
	}
}
