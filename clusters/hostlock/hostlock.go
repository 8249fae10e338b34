// Package hostlock keeps skewtest's runs on one host from running at once.
// Runs that make clusters on the host share host-wide objects (the pod
// subnets, iptables chains, /var/lib/kubelet/device-plugins, kernel
// settings that each run records and restores), so a second run is refused
// at once, with a message naming the first, rather than left to corrupt
// it. The lock is a flock: it dies with its holder, so a killed run never
// blocks the next one (its leftovers are `skewtest clean`'s).
//
// Root's lock file lives in /run/skewtest, a directory of root's alone
// (0700; refused if anyone else could write it), never in world-writable
// /run/lock, where anyone could write the holder's record that a refusal
// quotes ("kill <pid>"). Runs of another user cannot change what root's
// runs share (mounts, iptables, kernel settings), so they take a lock of
// their own, in their own ~/.local/state (Path). The file is still opened
// only as a plain file of one link, never through a symbolic or hard
// link, and a refusal names the process the kernel says holds the lock
// when the one recorded is not it.
package hostlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/internal/privdir"
	"sigs.k8s.io/skewtest/clusters/internal/procfs"
)

// RootDir holds root's lock files: the host lock's and the private
// dockerd's. Made 0700; refused if anyone else could write it.
const RootDir = "/run/skewtest"

// RootPath is root's lock file; it holds its holder's details as JSON.
const RootPath = RootDir + "/host.lock"

// userLockFile is another user's lock file, under their home.
var userLockFile = filepath.Join(".local", "state", "skewtest-host.lock")

// Path is the caller's lock file: RootPath for root, and
// ~/.local/state/skewtest-host.lock for anyone else (beside the run root
// ~/.local/state/skewtest, not in it: clean takes what is there for runs).
func Path() string {
	if os.Geteuid() != 0 {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, userLockFile)
		}
	}
	return RootPath
}

// ErrHostInUse marks a run refused because something it must not disturb
// uses the host: another skewtest run, or a kubelet the host runs. It is
// the user's to resolve (exit code 2).
var ErrHostInUse = errors.New("host in use")

// Holder describes a run that holds the lock.
type Holder struct {
	RunID   string    `json:"runID"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// PIDStart is the holder's start time, field 22 of /proc/PID/stat:
	// it tells the holder from a later process given its pid.
	PIDStart uint64 `json:"pidStart,omitempty"`
	// Dir is the run's directory, which `skewtest clean DIR` removes.
	Dir     string `json:"dir"`
	Command string `json:"command"`
}

func (h Holder) String() string {
	s := fmt.Sprintf("run %s (pid %d, started %s", orUnknown(h.RunID), h.PID, h.Started.Format(time.RFC3339))
	if h.Dir != "" {
		s += ", directory " + h.Dir
	}
	return s + fmt.Sprintf(", command %q)", h.Command)
}

func orUnknown(s string) string {
	if s == "" {
		return "(ID not chosen yet)"
	}
	return s
}

// ErrUnsafeDir marks a lock refused because its directory is not the
// caller's alone: the user's to fix (exit code 2), as the error says.
var ErrUnsafeDir = errors.New("unsafe lock directory")

// BusyError is returned by TryAcquire while another process holds the lock.
type BusyError struct {
	// Path is the lock file.
	Path string
	// Holder is what the lock file records.
	Holder Holder
	// NotHolder, when set, says why Holder is not who holds the lock (its
	// process is gone, its pid is another process's, or it holds no
	// lock): the file was left by an earlier holder, or written by
	// someone else. Lockers then names who does.
	NotHolder string
	// Lockers are the processes that hold the lock, as the kernel tells
	// (see lockers); empty when none could be found.
	Lockers []Locker
}

// Locker is a process that holds the lock.
type Locker struct {
	PID     int
	Command string
	// Inherited: /proc/locks names no live process for the lock, and this
	// one has the lock file open: it inherited the locked descriptor from
	// the process that took the lock, as flock(1)'s command does unless
	// flock -o.
	Inherited bool
}

func (l Locker) String() string {
	s := fmt.Sprintf("pid %d (%s)", l.PID, l.Command)
	if l.Inherited {
		s += ", which inherited the locked descriptor from the process that took the lock"
	}
	return s
}

func (e *BusyError) Error() string {
	if e.NotHolder == "" {
		return fmt.Sprintf("another skewtest run is using this host: %s; wait for it to finish (a second run would share its pod subnet, "+
			"iptables chains and kernel settings), or stop it (kill %d: it tears down) and, if it was killed with SIGKILL, "+
			"remove what it left with `make clean` (go run ./cmd/skewtest clean)", e.Holder, e.Holder.PID)
	}
	s := fmt.Sprintf("the host lock %s is held, but not by the run it records, %s: %s; ", e.Path, e.Holder, e.NotHolder)
	if len(e.Lockers) == 0 {
		return s + "no process holding it was found in /proc/locks or with the file open (one in another PID namespace is not visible here); " +
			"find it with `fuser -v " + e.Path + "` and wait for it or stop it"
	}
	var who []string
	for _, l := range e.Lockers {
		who = append(who, l.String())
	}
	return s + fmt.Sprintf("it is held by %s; wait for that to end, or stop it (kill %d) if it should not hold the lock "+
		"(a skewtest run killed with SIGKILL leaves what it made to `make clean`)", strings.Join(who, " and "), e.Lockers[0].PID)
}

func (e *BusyError) Is(target error) bool { return target == ErrHostInUse }

// Lock is held until Release.
type Lock struct{ released sync.Once }

// The lock belongs to the process: runs of one process (a suite bringing
// up a cluster while cleaning a kept one) share it; the file closes when
// the last one releases it.
var (
	mu      sync.Mutex
	file    *os.File
	holders int
)

// TryAcquire takes the lock for h, or returns a *BusyError naming the
// process that holds it. path is Path outside tests.
func TryAcquire(path string, h Holder) (*Lock, error) {
	mu.Lock()
	defer mu.Unlock()
	if holders > 0 {
		holders++
		return &Lock{}, nil
	}
	f, err := openInPrivateDir(path)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, busy(path, f)
		}
		return nil, fmt.Errorf("host lock %s: %w", path, err)
	}
	// The lock is ours: whatever the file says is a dead holder's.
	if h.PID == 0 {
		h.PID = os.Getpid()
	}
	if h.Started.IsZero() {
		h.Started = time.Now()
	}
	if st, err := procfs.ReadStat(h.PID); err == nil && h.PIDStart == 0 {
		h.PIDStart = st.StartTime
	}
	if h.Command == "" {
		h.Command = strings.Join(os.Args, " ")
	}
	b, _ := json.Marshal(h)
	_ = f.Truncate(0)
	_, _ = f.WriteAt(append(b, '\n'), 0)
	file, holders = f, 1
	return &Lock{}, nil
}

// Acquire waits for the lock until ctx ends: for tests that change the
// host (plant leaks, start a dockerd) and must not overlap a run.
func Acquire(ctx context.Context, path string, h Holder) (*Lock, error) {
	for {
		l, err := TryAcquire(path, h)
		var busy *BusyError
		if !errors.As(err, &busy) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waited until %v)", err, ctx.Err())
		case <-time.After(retryInterval):
		}
	}
}

// retryInterval is how often a waiting lock is tried again.
const retryInterval = 250 * time.Millisecond

// openInPrivateDir opens (or creates) the lock file path in a directory
// of the caller's alone, made 0700 when missing (openLockFile).
func openInPrivateDir(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	problem, err := privdir.Ensure(dir, 0o700)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if problem != "" {
		return nil, fmt.Errorf("%w: the directory of lock %s is %s: whoever can write there can plant the record a refusal "+
			"quotes, or replace the lock; %s", ErrUnsafeDir, path, problem, privdir.Fix(dir))
	}
	return openLockFile(path)
}

// Exclusive takes an exclusive lock of its own on path, a lock file other
// than the host lock's, with the same care (openInPrivateDir), waiting
// while another open file holds it until ctx ends; onWait, when set, is
// called once before the first wait. Unlike the host lock it is not
// shared within the process: a second Exclusive of the same path waits
// for the first file to close. Closing the returned file releases it.
func Exclusive(ctx context.Context, path string, onWait func()) (*os.File, error) {
	f, err := openInPrivateDir(path)
	if err != nil {
		return nil, err
	}
	for waited := false; ; waited = true {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !waited && onWait != nil {
			onWait()
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s is held by another process: %w", path, context.Cause(ctx))
		case <-time.After(retryInterval):
		}
	}
}

// Release gives the lock back; it is repeatable.
func (l *Lock) Release() {
	if l == nil {
		return
	}
	l.released.Do(func() {
		mu.Lock()
		defer mu.Unlock()
		holders--
		if holders == 0 && file != nil {
			file.Close()
			file = nil
		}
	})
}

// ReadHolder reads the details the holder wrote (empty if unreadable).
func ReadHolder(path string) Holder {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return Holder{}
	}
	defer f.Close()
	return readHolder(f)
}

// holderFileMax bounds what is read of the lock file: anyone can write it.
const holderFileMax = 64 << 10

func readHolder(f *os.File) Holder {
	var h Holder
	b := make([]byte, holderFileMax)
	n, _ := f.ReadAt(b, 0)
	_ = json.Unmarshal(b[:n], &h)
	return h
}

// openLockFile opens (or creates) the lock file, refusing a symbolic
// link, a hard link (a file of more than one name) and anything but a
// regular file: a lock path a test gives may lie in a shared directory,
// and the holder truncates the file and writes its record into it, which
// through a link would overwrite a file of root's.
func openLockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("host lock %s is a symbolic link, which skewtest never makes: through it a run would overwrite "+
			"the file it points to; remove it (rm %s) and run again", path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("host lock: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("host lock %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		f.Close()
		return nil, fmt.Errorf("host lock %s is not a plain file of one name (mode %#o, %d links), which skewtest never makes: "+
			"through a hard link a run would overwrite another file; remove it (rm %s) and run again", path, st.Mode, st.Nlink, path)
	}
	return f, nil
}

// busy is the refusal of a lock f holds open and another process holds:
// what its file records, checked against who the kernel says holds it.
func busy(path string, f *os.File) *BusyError {
	e := &BusyError{Path: path, Holder: readHolder(f)}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err == nil {
		e.Lockers = lockers(uint64(st.Dev), st.Ino)
	}
	e.NotHolder = e.Holder.notHolding(e.Lockers)
	return e
}

// notHolding says why h is not who holds the lock, "" if it may be: its
// process is alive (with the start time recorded, if one is) and, when
// the lock's holders are known, among them.
func (h Holder) notHolding(lockers []Locker) string {
	if h.PID <= 0 {
		return "the file records no process"
	}
	st, err := procfs.ReadStat(h.PID)
	if err != nil || st.Dead() {
		return fmt.Sprintf("pid %d is gone", h.PID)
	}
	if h.PIDStart != 0 && st.StartTime != h.PIDStart {
		return fmt.Sprintf("pid %d is another process now (%s, started %d clock ticks after boot; the run's started at %d)",
			h.PID, command(h.PID), st.StartTime, h.PIDStart)
	}
	if len(lockers) == 0 {
		return ""
	}
	for _, l := range lockers {
		if l.PID == h.PID {
			return ""
		}
	}
	return fmt.Sprintf("pid %d (%s) is alive but holds no lock on the file", h.PID, command(h.PID))
}

// lockers are the processes holding a flock on the file of device dev,
// inode ino: those /proc/locks names for it that still have the file
// open. /proc/locks names the process that took the lock even after it
// died, while a child that inherited the descriptor holds it; when none
// it names is left, the lockers are every process with the file open.
// The calling process, which has the file open to ask, is left out.
func lockers(dev, ino uint64) []Locker {
	var out []Locker
	for _, pid := range procLocksPIDs(dev, ino) {
		if pid != os.Getpid() && hasOpen(pid, dev, ino) {
			out = append(out, Locker{PID: pid, Command: command(pid)})
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, pid := range procfs.OtherPIDs() {
		if !hasOpen(pid, dev, ino) {
			continue
		}
		out = append(out, Locker{PID: pid, Command: command(pid), Inherited: true})
	}
	return out
}

// procLocksPIDs are the pids /proc/locks gives for the granted locks on
// the file of device dev, inode ino. Its lines read
//
//	1: FLOCK  ADVISORY  WRITE 9709 fe:00:9979712 0 EOF
//
// (the device's major and minor in hex), and "1: -> FLOCK ..." for a
// process waiting for the lock, which holds nothing.
func procLocksPIDs(dev, ino uint64) []int {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil
	}
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	var pids []int
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] == "->" {
			continue
		}
		for i := 1; i < len(f); i++ {
			if f[i] != file {
				continue
			}
			if pid, err := strconv.Atoi(f[i-1]); err == nil && pid > 0 {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// hasOpen reports whether process pid has a descriptor on the file of
// device dev, inode ino.
func hasOpen(pid int, dev, ino uint64) bool {
	fdDir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		var st unix.Stat_t
		if unix.Stat(filepath.Join(fdDir, fd.Name()), &st) == nil && uint64(st.Dev) == dev && st.Ino == ino {
			return true
		}
	}
	return false
}

// commandMax bounds a command line quoted in a refusal.
const commandMax = 120

// command is process pid's command line, for a refusal to name it.
func command(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	s := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if s == "" {
		if st, err := procfs.ReadStat(pid); err == nil {
			s = st.Comm
		}
	}
	if len(s) > commandMax {
		s = s[:commandMax] + "..."
	}
	return s
}
