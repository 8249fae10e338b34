// Package privdir keeps the directories whose files tell a root process
// what to signal, remove or trust (the host lock's holder, a vm's state)
// out of other users' reach: such a directory must be a real directory,
// owned by the caller, and writable by nobody else, or whoever can write
// there can plant a file that a root run believes.
package privdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Problem says why users other than the caller could write into dir (a
// symbolic link, another owner, group or world write), or "" when only
// the caller can. A missing dir is os.ErrNotExist.
func Problem(dir string) (string, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	uid := os.Geteuid()
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return "not a directory (a symbolic link or a file)", nil
	case st == nil || int(st.Uid) != uid:
		owner := "unknown"
		if st != nil {
			owner = fmt.Sprint(st.Uid)
		}
		return fmt.Sprintf("owned by uid %s, not by you (uid %d)", owner, uid), nil
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Sprintf("writable by others (mode %#o)", fi.Mode().Perm()), nil
	}
	return "", nil
}

// Ensure makes dir with mode when it is missing (its parents 0755) and
// returns Problem of what is there.
func Ensure(dir string, mode os.FileMode) (string, error) {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", err
		}
		if err := os.Mkdir(dir, mode); err != nil && !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return Problem(dir)
}

// Fix is the shell commands that make dir the caller's alone, for an
// error that names a Problem.
func Fix(dir string) string {
	return fmt.Sprintf("remove it if it is not yours (rm -r %s) or make it yours alone (chown %d %s && chmod 0700 %s)",
		dir, os.Geteuid(), dir, dir)
}
