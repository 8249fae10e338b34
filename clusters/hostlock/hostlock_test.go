package hostlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
