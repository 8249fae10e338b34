// Package hostlock keeps skewtest's runs on one host from running at once.
// Runs that make clusters on the host share host-wide objects (the pod
// subnets, iptables chains, /var/lib/kubelet/device-plugins, kernel
// settings that each run records and restores), so a second run is refused
// at once, with a message naming the first, rather than left to corrupt
// it. The lock is a flock: it dies with its holder, so a killed run never
// blocks the next one (its leftovers are `skewtest clean`'s).
package hostlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Path is the lock file; it holds its holder's details as JSON.
const Path = "/run/lock/skewtest-host.lock"

// ErrHostInUse marks a run refused because something it must not disturb
// uses the host: another skewtest run, or a kubelet the host runs. It is
// the user's to resolve (exit code 2).
var ErrHostInUse = errors.New("host in use")

// Holder describes a run that holds the lock.
type Holder struct {
	RunID   string    `json:"runID"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
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

// BusyError is returned by TryAcquire while another process holds the lock.
type BusyError struct {
	Holder Holder
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("another skewtest run is using this host: %s; wait for it to finish (a second run would share its pod subnet, "+
		"iptables chains and kernel settings), or stop it (kill %d: it tears down) and, if it was killed with SIGKILL, "+
		"remove what it left with `make clean` (go run ./scripts/skewtest clean)", e.Holder, e.Holder.PID)
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
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("host lock: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("host lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &BusyError{Holder: ReadHolder(path)}
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
		case <-time.After(250 * time.Millisecond):
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
	var h Holder
	b, _ := os.ReadFile(path)
	_ = json.Unmarshal(b, &h)
	return h
}
