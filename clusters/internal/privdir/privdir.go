// Package privdir keeps the directories whose files tell a root process
// what to signal, remove, trust or run (the host lock's holder, a vm's
// state, the binary cache) out of other users' reach: such a directory,
// and every directory above it, must be the caller's and writable by
// nobody else, or whoever can write there can plant a file that a root
// run believes.
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
	if !fi.IsDir() {
		return "not a directory (a symbolic link or a file)", nil
	}
	return problemOf(fi, false), nil
}

// PathProblem says where and how users other than the caller could change
// what path names: every existing element from path up to / must be the
// caller's, and a directory writable by the caller alone, but for sticky
// ones (/tmp), where nobody else may rename what is the caller's. A
// symbolic link is followed and its target checked the same way. Missing
// elements are skipped (the caller makes them, as its own). at is ""
// when nothing is wrong.
func PathProblem(path string) (at, problem string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", err
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return "", "", err
		case fi.Mode()&os.ModeSymlink != 0:
			if problem := problemOf(fi, true); problem != "" {
				return p, problem, nil
			}
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				return p, "a symbolic link that does not resolve", nil
			}
			if at, _, err := PathProblem(target); err != nil || at != "" {
				return p, "a symbolic link to " + target + ", which others could change", nil
			}
		case fi.IsDir():
			if problem := problemOf(fi, true); problem != "" {
				return p, problem, nil
			}
		}
		if p == filepath.Dir(p) {
			return "", "", nil
		}
	}
}

// problemOf says why users other than the caller could change what fi
// names: its owner, or, for a directory, group or world write (allowed on
// a sticky one with stickyOK). Links are always 0777: only their owner
// counts.
func problemOf(fi os.FileInfo, stickyOK bool) string {
	uid := os.Geteuid()
	st, _ := fi.Sys().(*syscall.Stat_t)
	mode := fi.Mode()
	switch {
	case st == nil || int(st.Uid) != uid:
		owner := "unknown"
		if st != nil {
			owner = fmt.Sprint(st.Uid)
		}
		return fmt.Sprintf("owned by uid %s, not by you (uid %d)", owner, uid)
	case mode.IsDir() && mode.Perm()&0o022 != 0 && !(stickyOK && mode&os.ModeSticky != 0):
		return fmt.Sprintf("writable by others (mode %#o)", mode.Perm())
	}
	return ""
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
