package dockerd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/procfs"
)

// proc is one process as /proc shows it.
type proc struct {
	pid, ppid int
	start     uint64 // starttime, field 22 of stat: tells a reused pid apart
	state     byte
	comm      string
	argv      []string
}

func (p proc) String() string {
	return fmt.Sprintf("%d (%s)", p.pid, strings.Join(p.argv, " "))
}

// readProc reads /proc/<pid>; ok is false when the process is gone.
func readProc(pid int) (proc, bool) {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return proc{}, false
	}
	p := proc{pid: pid, ppid: st.PPID, start: st.StartTime, state: st.State, comm: st.Comm}
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		cmdline = bytes.TrimRight(cmdline, "\x00")
		if len(cmdline) > 0 {
			p.argv = strings.Split(string(cmdline), "\x00")
		}
	}
	return p, true
}

// allProcs lists every process.
func allProcs() []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var procs []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			procs = append(procs, p)
		}
	}
	return procs
}

// alive reports whether p still runs: same pid and start time, and not a
// zombie (a zombie has done all it will do; its parent reaps it).
func alive(p proc) bool {
	q, ok := readProc(p.pid)
	return ok && q.start == p.start && q.state != 'Z' && q.state != 'X'
}

// daemonPrograms are the programs a private dockerd runs whose command
// lines name its directory: dockerd, its containerd, the containerd shims,
// runc and the capability shim (their --root, --address, --bundle).
var daemonPrograms = map[string]bool{
	"dockerd": true, "containerd": true, "containerd-shim": true, "containerd-shim-runc-v1": true,
	"containerd-shim-runc-v2": true, "runc": true, "skewtest-runc-shim": true, "docker-proxy": true,
}

// ownedBy reports whether p is one of daemonPrograms started for dir:
// its program is one of them and an argument names dir or a path in it.
func ownedBy(p proc, dir string) bool {
	if len(p.argv) == 0 {
		return false
	}
	if !daemonPrograms[filepath.Base(p.argv[0])] && !daemonPrograms[p.comm] {
		return false
	}
	for _, a := range p.argv[1:] {
		// --data-root /d, --root=/d/x, unix:///d/docker.sock, skewtest=/d/...
		for _, s := range []string{a, afterByte(a, '='), strings.TrimPrefix(a, "unix://")} {
			if s == dir || strings.HasPrefix(s, dir+"/") {
				return true
			}
		}
	}
	return false
}

// dockerdOf returns the one running dockerd whose command line names dir.
func dockerdOf(dir string) (proc, bool) {
	var found []proc
	for _, p := range allProcs() {
		if (p.comm == "dockerd" || (len(p.argv) > 0 && filepath.Base(p.argv[0]) == "dockerd")) && ownedBy(p, dir) && alive(p) {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		return proc{}, false
	}
	return found[0], true
}

func afterByte(s string, c byte) string {
	if i := strings.IndexByte(s, c); i >= 0 {
		return s[i+1:]
	}
	return ""
}

// protected returns this process and its ancestors, which are never
// killed whatever their command lines say.
func protected() map[int]bool {
	prot := map[int]bool{0: true, 1: true}
	for pid := os.Getpid(); pid > 1 && !prot[pid]; {
		prot[pid] = true
		p, ok := readProc(pid)
		if !ok {
			break
		}
		pid = p.ppid
	}
	return prot
}

// withDescendants returns roots and all their descendants in procs,
// leaving out the protected ones.
func withDescendants(procs []proc, roots map[int]bool) []proc {
	children := map[int][]proc{}
	byPID := map[int]proc{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
		byPID[p.pid] = p
	}
	prot := protected()
	seen := map[int]bool{}
	var out []proc
	var walk func(p proc)
	walk = func(p proc) {
		if seen[p.pid] || prot[p.pid] {
			return
		}
		seen[p.pid] = true
		out = append(out, p)
		for _, c := range children[p.pid] {
			walk(c)
		}
	}
	for pid := range roots {
		if p, ok := byPID[pid]; ok {
			walk(p)
		}
	}
	return out
}

// signalAndWait sends sig to each process still alive and waits up to
// timeout for all of them to be gone; it returns those still alive.
func signalAndWait(procs []proc, sig syscall.Signal, timeout time.Duration) []proc {
	for _, p := range procs {
		if alive(p) {
			_ = syscall.Kill(p.pid, sig)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		var left []proc
		for _, p := range procs {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopProcs stops procs: SIGTERM, then SIGKILL for those that did not
// exit within grace. It returns the ones that survived even SIGKILL.
func stopProcs(procs []proc, grace time.Duration) []proc {
	if len(procs) == 0 {
		return nil
	}
	left := signalAndWait(procs, syscall.SIGTERM, grace)
	if len(left) == 0 {
		return nil
	}
	return signalAndWait(left, syscall.SIGKILL, 10*time.Second)
}

// socketInodes returns the inodes of the unix sockets p holds open.
func socketInodes(pid int) []uint64 {
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(fdDir)
	if err != nil {
		return nil
	}
	var inodes []uint64
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil {
			continue
		}
		if s, ok := strings.CutPrefix(link, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				inodes = append(inodes, n)
			}
		}
	}
	return inodes
}

// socketPaths returns the paths of the bound unix sockets among inodes
// (from /proc/net/unix of the host's network namespace).
func socketPaths(inodes []uint64) []string {
	if len(inodes) == 0 {
		return nil
	}
	want := map[uint64]bool{}
	for _, n := range inodes {
		want[n] = true
	}
	data, err := os.ReadFile("/proc/self/net/unix")
	if err != nil {
		return nil
	}
	var paths []string
	for _, line := range strings.Split(string(data), "\n")[1:] {
		// Num RefCount Protocol Flags Type St Inode Path
		f := strings.Fields(line)
		if len(f) < 8 || !strings.HasPrefix(f[7], "/") {
			continue
		}
		if n, err := strconv.ParseUint(f[6], 10, 64); err == nil && want[n] {
			paths = append(paths, f[7])
		}
	}
	return paths
}
