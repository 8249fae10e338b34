package dockerd

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/sysctl"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// fakeDaemon starts a process that looks like a dockerd of dir to
// ownedBy: argv[0] "dockerd" and an argument under dir. It stops on
// SIGTERM. The returned channel is closed when it has exited.
func fakeDaemon(t *testing.T, dir string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := &exec.Cmd{
		Path: "/bin/sh",
		Args: []string{"dockerd", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done", filepath.Join(dir, "data")},
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	// Until its command line is readable, ownedBy cannot tell it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if p, ok := readProc(cmd.Process.Pid); ok && ownedBy(p, dir) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fake dockerd %d never showed its command line", cmd.Process.Pid)
		}
	}
	return cmd, done
}

// A state file that does not parse (half written before the writes were
// fsynced, or damaged by hand) does not stop Clean before anything is
// killed: the daemon's processes, told apart by their command lines,
// are stopped, nothing is restored host-wide, the directory and its state
// are kept for a look, and the error says so. Another daemon's process is
// left alone.
func TestCleanWithADamagedState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "skd")
	if err := os.Mkdir(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateName), []byte(`{"dir": "`+dir), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ours := fakeDaemon(t, dir)
	_, theirs := fakeDaemon(t, dir+"0")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := Clean(ctx, dir)
	if err == nil || !strings.Contains(err.Error(), "without its state") || !strings.Contains(err.Error(), dir) {
		t.Errorf("Clean with a damaged state = %v, want an error saying it cleaned %s without its state", err, dir)
	}
	select {
	case <-ours:
	case <-time.After(5 * time.Second):
		t.Errorf("the daemon of %s still runs after Clean", dir)
	}
	select {
	case <-theirs:
		t.Errorf("Clean of %s stopped the daemon of %s0", dir, dir)
	default:
	}
	if _, err := os.Stat(filepath.Join(dir, stateName)); err != nil {
		t.Errorf("the damaged state is gone: %v", err)
	}
	if err := CheckState(dir); !errors.Is(err, ErrDamagedState) {
		t.Errorf("CheckState of a damaged state = %v, want ErrDamagedState", err)
	}
}

// The state is written whole through statefile: it reads back, names its
// directory, and no temporary file is left.
func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	st := &state{Dir: dir, CgroupParent: cgroupParentFor(dir), Recorded: true, DockerdPID: 42, DockerdStart: 7}
	if err := writeState(dir, st); err != nil {
		t.Fatal(err)
	}
	got, err := readState(dir)
	if err != nil || got.Dir != dir || got.DockerdPID != 42 || got.DockerdStart != 7 || !got.Recorded {
		t.Errorf("readState = %+v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, stateName+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary state file left: %v", err)
	}
	if err := CheckState(dir); err != nil {
		t.Errorf("CheckState = %v", err)
	}
	other := t.TempDir()
	if err := writeState(other, st); err != nil {
		t.Fatal(err)
	}
	if err := CheckState(other); err == nil {
		t.Errorf("CheckState of a state naming %s, in %s = nil", dir, other)
	}
	if err := CheckState(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CheckState of no state = %v, want ErrNotExist", err)
	}
}

// After a reboot the kernel state the daemon's run changed went with that
// boot: Clean writes no recorded kernel setting back over what the host
// has now, and still removes the daemon's directory. (The recorded links
// are the host's own now, so that Clean, even wrong, would delete none.)
func TestCleanAfterARebootRestoresNoKernelState(t *testing.T) {
	testgate.RequireRoot(t, "Clean reads the host's links and every process's cgroups as root does")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const key = "kernel.keys.root_maxkeys"
	now := sysctl.Read([]string{key})[key]
	n, err := strconv.Atoi(now)
	if err != nil {
		t.Skipf("%s = %q on this kernel", key, now)
	}
	t.Cleanup(func() {
		if got := sysctl.Read([]string{key})[key]; got != now {
			if err := sysctl.Set(key, now); err != nil {
				t.Errorf("put %s back to %s: %v", key, now, err)
			}
		}
	})
	links, err := linkNames(ctx)
	if err != nil {
		t.Skipf("cannot list links: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "skd")
	if err := os.Mkdir(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	st := &state{Dir: dir, CgroupParent: cgroupParentFor(dir), Recorded: true, Links: links,
		Sysctls: map[string]string{key: strconv.Itoa(n + 1)}, BootID: "00000000-0000-0000-0000-000000000000"}
	if err := writeState(dir, st); err != nil {
		t.Fatal(err)
	}
	if err := Clean(ctx, dir); err != nil {
		t.Fatalf("Clean: %v", err)
	}
	if got := sysctl.Read([]string{key})[key]; got != now {
		t.Errorf("Clean of a daemon from an earlier boot set %s to %s (its recorded value); it was %s", key, got, now)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the daemon's directory after Clean: %v", err)
	}
}
