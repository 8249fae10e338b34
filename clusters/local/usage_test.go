package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/clusters/local/internal/process"
)

// usageHelperEnv makes the test binary a stand-in kubelet that burns CPU
// and holds memory, then waits (TestKubeletUsageHelper).
const usageHelperEnv = "SKEWTEST_USAGE_HELPER"

// The stand-in's work: at least this much CPU, and this much memory
// touched.
const (
	helperBusy    = 300 * time.Millisecond
	helperTouched = 64 << 20
)

// cpuTime is the CPU time this process has used, user and system, as the
// capability under test reads it.
func cpuTime() time.Duration {
	st, err := procfs.ReadStat(os.Getpid())
	if err != nil {
		panic(err)
	}
	return st.CPUTime()
}

func TestKubeletUsageHelper(t *testing.T) {
	if os.Getenv(usageHelperEnv) != "1" {
		t.Skip("a helper process of TestKubeletUsageOfARealProcess")
	}
	buf := make([]byte, helperTouched)
	for i := range buf {
		buf[i] = byte(i)
	}
	// Burn CPU time, not wall time: on a loaded machine a loop bounded by
	// the clock gets a fraction of it, and the measure below it would fail.
	for cpuTime() < helperBusy {
		for range 1 << 16 {
			buf[0]++
		}
	}
	os.Stdout.WriteString("READY\n")
	time.Sleep(time.Minute)
	os.Stdout.WriteString(string(buf[:1]))
}

// The capability reads a real process: a stand-in kubelet (this test's
// binary) that burned CPU and touched memory before it said so.
func TestKubeletUsageOfARealProcess(t *testing.T) {
	dir := t.TempDir()
	p := &Provider{dir: dir}
	n, err := p.newNode(0, layoutOf(dir, 0).state(testRunID), nodePorts{}, binaries.Binary{Path: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.KubeletUsage(context.Background()); err == nil || !strings.Contains(err.Error(), "no kubelet runs") {
		t.Errorf("usage with no kubelet: %v, want an error saying none runs", err)
	}
	log := filepath.Join(dir, "helper.log")
	proc, err := process.Start("kubelet-stand-in", log, "", []string{os.Args[0], "-test.run=^TestKubeletUsageHelper$"}, []string{usageHelperEnv + "=1"})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Stop(5 * time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		if strings.Contains(string(b), "READY") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in never got ready; its log:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.proc, n.bin = proc, binaries.Binary{Path: os.Args[0]}
	u, err := n.KubeletUsage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if u.PID != proc.PID() {
		t.Errorf("usage of pid %d, want the kubelet's %d", u.PID, proc.PID())
	}
	// The stand-in used helperBusy of CPU time by its own count; /proc counts
	// in clock ticks and may round each of user and system time down.
	if u.CPU < helperBusy/2 {
		t.Errorf("CPU %s, want at least %s after %s of CPU time by the stand-in's own count", u.CPU, helperBusy/2, helperBusy)
	}
	if u.PeakRSS < helperTouched {
		t.Errorf("peak RSS %d bytes, want at least the %d touched", u.PeakRSS, helperTouched)
	}

	// A process that does not run the installed kubelet is not measured.
	n.bin = binaries.Binary{Path: "/bin/true"}
	if _, err := n.KubeletUsage(context.Background()); err == nil || !strings.Contains(err.Error(), "not the kubelet") {
		t.Errorf("usage of a process running another binary: %v, want an error", err)
	}
}
