// Package procfs is skewtest's one reader of /proc/<pid>/stat and
// /proc/<pid>/status: whether a process is alive, its parent, its start
// time, which tells a reused PID apart from the process a run recorded,
// and what it has used (CPU time, peak memory).
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Stat is what skewtest reads of /proc/<pid>/stat (proc(5)).
type Stat struct {
	PID  int
	Comm string
	// State is field 3: R, S, D, Z (zombie), X (dead), ...
	State byte
	PPID  int
	PGID  int
	// UTime and STime are fields 14 and 15: the clock ticks the process
	// has spent in user and in kernel mode (CPUTime converts them).
	UTime, STime uint64
	// StartTime is field 22: clock ticks after boot when the process
	// started.
	StartTime uint64
}

// ErrNotExist is returned by ReadStat for a PID with no process.
var ErrNotExist = errors.New("no such process")

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		return Stat{}, fmt.Errorf("pid %d: %w", pid, ErrNotExist)
	}
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// ParseStat parses the content of a stat file: "pid (comm) state ppid pgrp
// ...", where comm may itself hold spaces and parentheses, so it ends at
// the last ')'.
func ParseStat(b []byte) (Stat, error) {
	lp, rp := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if lp < 1 || rp < lp {
		return Stat{}, fmt.Errorf("stat %.60q: no (command name)", b)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:lp])))
	if err != nil {
		return Stat{}, fmt.Errorf("stat %.60q: pid: %w", b, err)
	}
	// f[0] is field 3 (state), so field n is f[n-3].
	f := strings.Fields(string(b[rp+1:]))
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("stat of pid %d: %d fields, want at least 22", pid, len(f)+2)
	}
	s := Stat{PID: pid, Comm: string(b[lp+1 : rp]), State: f[0][0]}
	if s.PPID, err = strconv.Atoi(f[1]); err != nil {
		return Stat{}, fmt.Errorf("stat of pid %d: ppid: %w", pid, err)
	}
	if s.PGID, err = strconv.Atoi(f[2]); err != nil {
		return Stat{}, fmt.Errorf("stat of pid %d: pgrp: %w", pid, err)
	}
	if s.UTime, err = strconv.ParseUint(f[11], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("stat of pid %d: utime: %w", pid, err)
	}
	if s.STime, err = strconv.ParseUint(f[12], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("stat of pid %d: stime: %w", pid, err)
	}
	if s.StartTime, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("stat of pid %d: starttime: %w", pid, err)
	}
	return s, nil
}

// userHZ is the unit of the stat file's times: the kernel's USER_HZ, which
// it exports as 100 on every architecture Go builds for Linux (sysconf's
// _SC_CLK_TCK, which needs cgo to ask).
const userHZ = 100

// CPUTime is the CPU time the process has used, in user and kernel mode
// together (utime + stime); its children's is not counted.
func (s Stat) CPUTime() time.Duration {
	return time.Duration(s.UTime+s.STime) * time.Second / userHZ
}

// Dead reports a zombie (exited, waiting to be reaped: it runs nothing)
// or a dead task.
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' }

// Alive reports whether pid exists and is neither a zombie nor dead.
func Alive(pid int) bool {
	s, err := ReadStat(pid)
	return err == nil && !s.Dead()
}

// OtherPIDs are the pids of every process on the host but this one, read
// from /proc: for the scans that look for a process holding or running
// something, which must never find the scanner itself.
func OtherPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != self {
			out = append(out, pid)
		}
	}
	return out
}

// BootID identifies this boot of the kernel
// (/proc/sys/kernel/random/boot_id); "" if unknown. A pid or a state
// recorded with another boot's ID names nothing of this one.
func BootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}
