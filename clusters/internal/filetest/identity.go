package filetest

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/internal/testgate"
)

// Identity is what makes a file the same file beyond its content: its
// inode, its link count and its user.* extended attributes (where an IMA
// signature or a package manager's mark would be). A copy has the same
// content and a different Identity.
type Identity struct {
	Dev, Ino, Nlink uint64
	Xattrs          string // name=value pairs, sorted by the kernel's listing
}

func (i Identity) String() string {
	return fmt.Sprintf("inode %d:%d, %d links, xattrs %q", i.Dev, i.Ino, i.Nlink, i.Xattrs)
}

// IdentityOf is path's Identity (not following a final symlink).
func IdentityOf(t testing.TB, path string) Identity {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	id := Identity{Dev: st.Dev, Ino: st.Ino, Nlink: uint64(st.Nlink)}
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(path, buf)
	if err != nil {
		t.Fatalf("list the extended attributes of %s: %v", path, err)
	}
	var pairs []string
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		val := make([]byte, 4096)
		m, err := unix.Lgetxattr(path, name, val)
		if err != nil {
			t.Fatalf("read %s of %s: %v", name, path, err)
		}
		pairs = append(pairs, name+"="+string(val[:m]))
	}
	id.Xattrs = strings.Join(pairs, ",")
	return id
}

// SetXattr sets the extended attribute name (user.*) of path, as setfattr
// does, skipping the test (testgate) where the file system has none.
func SetXattr(t testing.TB, path, name, value string) {
	t.Helper()
	if err := unix.Setxattr(path, name, []byte(value), 0); err != nil {
		if err == unix.ENOTSUP || err == unix.EOPNOTSUPP {
			testgate.SkipOrFail(t, fmt.Sprintf("the file system of %s has no user extended attributes (%v)", path, err), "run it where TMPDIR is on ext4, xfs or btrfs")
			return
		}
		t.Fatalf("set %s on %s: %v", name, path, err)
	}
}
