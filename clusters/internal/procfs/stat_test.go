package procfs

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with a space and a ')' of its own, as a process can
	// name itself (prctl PR_SET_NAME).
	st, err := ParseStat([]byte("4242 (a) b) S 17 4242 4242 0 -1 4194560 10 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 4242, Comm: "a) b", State: 'S', PPID: 17, PGID: 4242, UTime: 1, STime: 2, StartTime: 987654}
	if st != want {
		t.Errorf("got %+v, want %+v", st, want)
	}
	if got := st.CPUTime(); got != 30*time.Millisecond {
		t.Errorf("CPUTime of 1+2 ticks = %s, want 30ms", got)
	}
	for _, bad := range []string{"", "4242 no-parens S 1", "x (c) S 1 1 1", "1 (c) S 1 1"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) accepted it", bad)
		}
	}
}

func TestReadStatSelfAndChild(t *testing.T) {
	self, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.PID != os.Getpid() || self.PPID != os.Getppid() || self.StartTime == 0 || self.Dead() {
		t.Errorf("self: %+v", self)
	}

	// A child that exits becomes a zombie until it is reaped: not alive,
	// though its /proc entry exists.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d still alive after it exited", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st, err := ReadStat(pid); err != nil || st.State != 'Z' {
		t.Errorf("unreaped child: %+v, %v; want a zombie", st, err)
	}
	cmd.Wait()
	if _, err := ReadStat(pid); !errors.Is(err, ErrNotExist) {
		t.Errorf("reaped child: %v, want ErrNotExist", err)
	}
	if Alive(pid) {
		t.Error("a reaped child is alive")
	}
}
