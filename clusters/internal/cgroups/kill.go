package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/internal/procfs"
)

// KillTimeout bounds Kill: SIGKILL cannot be caught, so only a process in
// uninterruptible sleep (a hung mount) takes longer.
const KillTimeout = 15 * time.Second

// killRound is how often Kill looks again at what is left.
const killRound = 25 * time.Millisecond

// Kill SIGKILLs every process in each of dirs and in the cgroups below them
// and returns once none is left. Where the kernel has cgroup.kill (cgroup
// v2, Linux 5.14+) one write kills a whole subtree at once, processes
// forked meanwhile included; elsewhere, and for whatever is still there a
// round later, it kills the PIDs cgroup.procs lists. It refuses to kill a
// subtree that holds the calling process.
func Kill(dirs []string, timeout time.Duration) error {
	self := os.Getpid()
	deadline := time.Now().Add(timeout)
	for round := 0; ; round++ {
		left := map[string][]int{}
		n := 0
		for _, d := range dirs {
			pids := Procs(d)
			if slices.Contains(pids, self) {
				return &Error{Op: "kill the processes in", Path: d, Err: fmt.Errorf("it holds this process (pid %d)", self)}
			}
			if len(pids) > 0 {
				left[d] = pids
				n += len(pids)
			}
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var names []string
			for d, pids := range left {
				names = append(names, fmt.Sprintf("%s: %v", d, pids))
			}
			return fmt.Errorf("cgroup: %d processes still alive %s after SIGKILL (%s)", n, timeout, strings.Join(names, "; "))
		}
		for d, pids := range left {
			if round == 0 && os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0o644) == nil {
				continue
			}
			for _, pid := range pids {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		time.Sleep(killRound)
	}
}

// Procs are the live processes in dir and in the cgroups below it, from
// their cgroup.procs files. Zombies are left out: they are dead already,
// and gone once their parent reaps them.
func Procs(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && procfs.Alive(pid) && !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeTries bounds the rmdir of one cgroup: one whose last process just
// died stays busy for a moment.
const (
	removeTries = 40
	removeWait  = 50 * time.Millisecond
)

// Remove removes each of dirs and every cgroup below it, deepest first. A
// cgroup already gone is no error; a cgroup still holding processes is
// (Kill them first).
func Remove(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		var all []string
		_ = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, path)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- {
			var err error
			for range removeTries {
				if err = unix.Rmdir(all[i]); err == nil || errors.Is(err, unix.ENOENT) {
					err = nil
					break
				}
				if !errors.Is(err, unix.EBUSY) {
					break
				}
				time.Sleep(removeWait)
			}
			if err != nil {
				errs = append(errs, &Error{Op: "remove", Path: all[i], Err: err})
			}
		}
	}
	return errors.Join(errs...)
}
