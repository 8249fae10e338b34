package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/internal/testgate"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// While a run holds the host its directory is live: clean must refuse, and
// touch nothing, rather than kill the run.
func TestCleanRefusesWhileARunHoldsTheHost(t *testing.T) {
	testgate.RequireRoot(t, "takes root's host lock in /run/skewtest")
	// flock(1) takes the same flock(2) lock a run takes. -o closes the
	// locked descriptor before it runs sleep: without it sleep inherits the
	// lock and holds it for its 30 s after flock is killed, and a run just
	// after the tests is refused. flock and sleep get a process group of
	// their own, which the cleanup kills whole.
	// The lock's directory, as a run makes it (flock makes only the file).
	if err := os.MkdirAll(filepath.Dir(hostlock.Path()), 0o700); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("flock", "-o", hostlock.Path(), "sleep", "30")
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := holder.Start(); err != nil {
		t.Fatalf("flock: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-holder.Process.Pid, syscall.SIGKILL)
		_ = holder.Wait()
		// Nothing of the test may hold the host after it: its process
		// group is gone. (Whether the lock is free says nothing of this
		// test: make test runs packages side by side, and another
		// package's test may hold the host lock by right.)
		for deadline := time.Now().Add(5 * time.Second); syscall.Kill(-holder.Process.Pid, 0) != syscall.ESRCH; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				locks, _ := os.ReadFile("/proc/locks")
				t.Errorf("the holder's process group %d is still there 5 s after it was killed; /proc/locks:\n%s", holder.Process.Pid, locks)
				break
			}
		}
	})
	for deadline := time.Now().Add(5 * time.Second); hostLockFree(t); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("flock does not hold %s after 5 s", hostlock.Path())
		}
	}
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := clean(context.Background(), slog.New(slog.DiscardHandler), []string{dir})
	if !errors.Is(err, hostlock.ErrHostInUse) || exitcode.Of(infrastructure(err)) != exitcode.Invalid {
		t.Fatalf("clean while the host is held = %v (exit %d); want a refusal, exit 2", err, exitcode.Of(infrastructure(err)))
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("a refused clean touched %s: %v", dir, err)
	}
}

// hostLockFree tries the host lock without blocking, and lets it go.
func hostLockFree(t *testing.T) bool {
	t.Helper()
	f, err := os.Open(hostlock.Path())
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return true
}
