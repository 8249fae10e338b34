package procfs

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestParsePeakRSS(t *testing.T) {
	got, err := ParsePeakRSS("Name:\tkubelet\nVmPeak:\t 2000000 kB\nVmHWM:\t   81234 kB\nVmRSS:\t   80000 kB\n")
	if err != nil || got != 81234*1024 {
		t.Errorf("ParsePeakRSS = %d, %v; want %d", got, err, 81234*1024)
	}
	for _, bad := range []string{"", "Name:\tkthreadd\n", "VmHWM:\t12 MB\n", "VmHWM:\tlots kB\n"} {
		if _, err := ParsePeakRSS(bad); err == nil {
			t.Errorf("ParsePeakRSS(%q) accepted it", bad)
		}
	}
}

// A real process's CPU time and peak memory: this test's own, which has
// run the test binary's start-up, and grows by what it burns and touches.
func TestReadUsageOfARealProcess(t *testing.T) {
	before, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	rssBefore, err := ReadPeakRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	const touched = 64 << 20
	buf := make([]byte, touched)
	for i := range buf {
		buf[i] = byte(i)
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		buf[0]++
	}
	after, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	rssAfter, err := ReadPeakRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after.CPUTime() - before.CPUTime(); d < 100*time.Millisecond {
		t.Errorf("CPU time grew by %s over a 300 ms busy loop, want at least 100ms (before %+v, after %+v)", d, before, after)
	}
	if rssAfter < rssBefore+touched/2 {
		t.Errorf("peak RSS %d bytes after touching %d more, was %d", rssAfter, touched, rssBefore)
	}
	if buf[1] != 1 {
		t.Fatal("buffer lost")
	}

	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPeakRSS(cmd.Process.Pid); !errors.Is(err, ErrNotExist) {
		t.Errorf("ReadPeakRSS of a reaped process: %v, want ErrNotExist", err)
	}
}
