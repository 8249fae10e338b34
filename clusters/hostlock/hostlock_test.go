package hostlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// The lock is a flock, so a second holder must be another process: the
// test runs itself as the holder.
func TestMain(m *testing.M) {
	if path := os.Getenv("HOSTLOCK_TEST_HOLD"); path != "" {
		if _, err := TryAcquire(path, Holder{RunID: "20260101-000000-abcd", Dir: "/var/lib/skewtest/20260101-000000-abcd"}); err != nil {
			fmt.Println("acquire:", err)
			os.Exit(1)
		}
		fmt.Println("held")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestSecondRunRefusedNamingTheFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.lock")
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), "HOSTLOCK_TEST_HOLD="+path)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("holder: %q, %v", buf, err)
	}

	start := time.Now()
	_, err = TryAcquire(path, Holder{RunID: "second"})
	if time.Since(start) > time.Second {
		t.Errorf("TryAcquire took %s; a second run must be refused at once", time.Since(start))
	}
	var busy *BusyError
	if !errors.As(err, &busy) || !errors.Is(err, ErrHostInUse) {
		t.Fatalf("TryAcquire while held = %v; want a BusyError that is ErrHostInUse", err)
	}
	for _, want := range []string{"run 20260101-000000-abcd", fmt.Sprintf("pid %d", holder.Process.Pid), "started 20", "make clean"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %q", err, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Acquire(ctx, path, Holder{}); !errors.Is(err, ErrHostInUse) {
		t.Errorf("Acquire while held until ctx ends = %v", err)
	}

	// The holder dies without releasing (SIGKILL): its lock is stale and
	// must not block.
	_ = holder.Process.Kill()
	_ = holder.Wait()
	l, err := TryAcquire(path, Holder{RunID: "third", Dir: "/d"})
	if err != nil {
		t.Fatalf("TryAcquire after the holder died: %v", err)
	}
	if h := ReadHolder(path); h.RunID != "third" || h.PID != os.Getpid() || h.Started.IsZero() {
		t.Errorf("holder recorded: %+v", h)
	}
	// The same process shares its lock; it is released with the last.
	l2, err := TryAcquire(path, Holder{RunID: "fourth"})
	if err != nil {
		t.Fatalf("a second run of the same process: %v", err)
	}
	l.Release()
	l.Release()
	if file == nil {
		t.Errorf("lock released while a second holder of this process still holds it")
	}
	l2.Release()
	if file != nil || holders != 0 {
		t.Errorf("lock still held after the last Release")
	}
}

// startHolder runs the test binary as a process holding the lock at path
// (see TestMain) and returns it once it holds the lock.
func startHolder(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), "HOSTLOCK_TEST_HOLD="+path)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("holder: %q, %v", buf, err)
	}
	return holder
}

// gonePID is the pid of a process that has exited and been reaped.
func gonePID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

// The lock file's record is anyone's to write (and a holder that is not a
// skewtest run leaves the last run's): a refusal checks it against the
// kernel and names the process that really holds the lock, never telling
// the user to kill the one recorded when that is not it.
func TestRefusalNamesTheRealHolderWhenTheRecordIsNotIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.lock")
	holder := startHolder(t, path)

	// The record as the holder wrote it: confirmed by /proc/locks.
	var busy *BusyError
	if _, err := TryAcquire(path, Holder{}); !errors.As(err, &busy) {
		t.Fatalf("TryAcquire while held = %v; want a BusyError", err)
	}
	if busy.NotHolder != "" || len(busy.Lockers) != 1 || busy.Lockers[0].PID != holder.Process.Pid || busy.Holder.PIDStart == 0 {
		t.Errorf("a holder that recorded itself: NotHolder %q, lockers %v, record %+v; want it confirmed as the one locker pid %d with its start time",
			busy.NotHolder, busy.Lockers, busy.Holder, holder.Process.Pid)
	}

	for name, tc := range map[string]struct {
		record Holder
		want   string
	}{
		"a process that is gone":            {Holder{RunID: "old", PID: gonePID(t)}, "is gone"},
		"a live process not holding it":     {Holder{RunID: "forged", PID: os.Getpid()}, "holds no lock on the file"},
		"a pid now another process's":       {Holder{RunID: "reused", PID: os.Getpid(), PIDStart: 1}, "is another process now"},
		"no process at all (a torn record)": {Holder{}, "records no process"},
	} {
		t.Run(name, func(t *testing.T) {
			b, _ := json.Marshal(tc.record)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := TryAcquire(path, Holder{RunID: "second"})
			var busy *BusyError
			if !errors.As(err, &busy) || !errors.Is(err, ErrHostInUse) {
				t.Fatalf("TryAcquire while held = %v; want a BusyError that is ErrHostInUse", err)
			}
			msg := err.Error()
			for _, w := range []string{path, "not by the run it records", tc.want,
				fmt.Sprintf("held by pid %d (%s", holder.Process.Pid, os.Args[0]), fmt.Sprintf("kill %d)", holder.Process.Pid)} {
				if !strings.Contains(msg, w) {
					t.Errorf("refusal does not say %q:\n%s", w, msg)
				}
			}
			if tc.record.PID != 0 && strings.Contains(msg, fmt.Sprintf("kill %d", tc.record.PID)) {
				t.Errorf("refusal tells the user to kill the recorded pid %d, which does not hold the lock:\n%s", tc.record.PID, msg)
			}
		})
	}
}

// flock(1) without -o leaves the locked descriptor to its command: once
// flock itself is gone /proc/locks still names it, and the refusal names
// the command that holds the lock now.
func TestRefusalNamesAnInheritedHolder(t *testing.T) {
	testgate.RequireTools(t, "flock") // util-linux
	path := filepath.Join(t.TempDir(), "host.lock")
	b, _ := json.Marshal(Holder{RunID: "old", PID: gonePID(t)})
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	flock := exec.Command("flock", path, "sleep", "30")
	flock.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := flock.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := flock.Process.Pid
	t.Cleanup(func() { killGroupAndWaitForTheLock(t, pgid, path) })
	waitHeld(t, path)
	// flock forks, and its child holds the lock as flock before it execs
	// sleep: the refusal would quote flock's command line.
	waitExeced(t, pgid, "sleep")
	_ = flock.Process.Kill()
	_ = flock.Wait()

	_, err := TryAcquire(path, Holder{RunID: "second"})
	var busy *BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("TryAcquire while sleep holds the lock = %v; want a BusyError", err)
	}
	if len(busy.Lockers) != 1 || !busy.Lockers[0].Inherited || busy.Lockers[0].Command != "sleep 30" {
		t.Fatalf("lockers %v; want sleep 30, which inherited the descriptor", busy.Lockers)
	}
	for _, w := range []string{"is gone", fmt.Sprintf("held by pid %d (sleep 30), which inherited", busy.Lockers[0].PID)} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal does not say %q:\n%v", w, err)
		}
	}
}

// waitHeld waits until another process holds the lock at path.
func waitHeld(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !lockFree(t, path) {
			return
		}
	}
	t.Fatalf("nothing holds %s after 5 s", path)
}

// lockFree tries the lock at path without blocking, and lets it go.
func lockFree(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
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

// killGroupAndWaitForTheLock kills process group pgid and fails the test
// unless the lock at path is free within 5 s.
func killGroupAndWaitForTheLock(t *testing.T, pgid int, path string) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); !lockFree(t, path); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			locks, _ := os.ReadFile("/proc/locks")
			t.Errorf("%s is still locked 5 s after its holder's group was killed:\n%s", path, locks)
			return
		}
	}
}

// A symbolic or hard link planted where the lock file goes is refused,
// and the file it names is left as it was: through it, a root run would
// truncate it and write its record there.
func TestLinksPlantedAsTheLockFileAreRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "precious")
	if err := os.WriteFile(target, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	symlink, hardlink := filepath.Join(dir, "sym.lock"), filepath.Join(dir, "hard.lock")
	if err := os.Symlink(target, symlink); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(target, hardlink); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{symlink: "is a symbolic link", hardlink: "not a plain file of one name"} {
		l, err := TryAcquire(path, Holder{RunID: "planted"})
		if err == nil {
			l.Release()
			t.Errorf("TryAcquire(%s) took a lock through a link", path)
			continue
		}
		for _, w := range []string{path, want, "rm " + path} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("refusal does not say %q: %v", w, err)
			}
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "root's\n" {
		t.Errorf("the link's target was changed: %q", b)
	}
	if h := ReadHolder(symlink); h != (Holder{}) {
		t.Errorf("ReadHolder followed a symbolic link: %+v", h)
	}
}

// A lock whose directory someone else could write is refused, naming the
// directory and the fix, and nothing is written there: whoever writes
// there could plant the record a refusal quotes, or swap the lock file.
func TestLockInASharedDirectoryIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "host.lock")
	l, err := TryAcquire(path, Holder{RunID: "shared"})
	if err == nil {
		l.Release()
		t.Fatalf("TryAcquire(%s) took a lock in a world-writable directory", path)
	}
	if !errors.Is(err, ErrUnsafeDir) {
		t.Errorf("refusal is not ErrUnsafeDir: %v", err)
	}
	for _, w := range []string{dir, "writable by others", "chmod 0700 " + dir} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal does not say %q: %v", w, err)
		}
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused lock made %s: %v", path, err)
	}
	// A missing directory is made the caller's alone.
	own := filepath.Join(t.TempDir(), "own", "host.lock")
	l, err = TryAcquire(own, Holder{RunID: "own"})
	if err != nil {
		t.Fatalf("TryAcquire(%s): %v", own, err)
	}
	l.Release()
	if fi, err := os.Stat(filepath.Dir(own)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the lock's directory was made %v (%v), want 0700", fi.Mode().Perm(), err)
	}
}

// Root's lock is in root's own directory, never in world-writable
// /run/lock; anyone else's is under their home.
func TestPathIsTheCallersOwn(t *testing.T) {
	p := Path()
	if os.Geteuid() == 0 {
		if p != RootPath || filepath.Dir(p) != RootDir {
			t.Errorf("root's Path() = %s, want %s", p, RootPath)
		}
		return
	}
	home, _ := os.UserHomeDir()
	if !strings.HasPrefix(p, home+"/") {
		t.Errorf("Path() = %s, not under the caller's home %s", p, home)
	}
}

// An Exclusive lock is one holder's, even within one process (the
// private dockerd's: two daemons of one test binary must not overlap): a
// second waits, says so once, and gets the lock when the first file
// closes; it gives up when its context ends. A shared directory is
// refused as for the host lock.
func TestExclusiveIsNotSharedWithinTheProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "own", "dockerd.lock")
	ctx := context.Background()
	first, err := Exclusive(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	waits := 0
	short, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	defer cancel()
	if f, err := Exclusive(short, path, func() { waits++ }); err == nil {
		f.Close()
		t.Fatal("a second Exclusive took the lock while the first held it")
	}
	if waits != 1 {
		t.Errorf("onWait was called %d times, want once", waits)
	}
	got := make(chan error, 1)
	go func() {
		f, err := Exclusive(ctx, path, nil)
		if err == nil {
			f.Close()
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	first.Close()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Exclusive after the first closed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Exclusive did not get the lock after the first file closed")
	}

	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	if f, err := Exclusive(ctx, filepath.Join(shared, "dockerd.lock"), nil); !errors.Is(err, ErrUnsafeDir) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("Exclusive in a world-writable directory: %v, want ErrUnsafeDir", err)
	}
}

// waitExeced waits until a process of group pgid runs comm.
func waitExeced(t *testing.T, pgid int, comm string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, pid := range procfs.OtherPIDs() {
			if st, err := procfs.ReadStat(pid); err == nil && st.PGID == pgid && st.Comm == comm {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no process of group %d runs %s after 10 s", pgid, comm)
}
