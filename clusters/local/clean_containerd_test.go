package local

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/internal/sysctl"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// fakeRunID ends in letters that are not hex, so that the host objects
// Clean looks for (the cgroup /skewtest-tzqx, the bridge skwtzqx, the CNI
// network skewtest-tzqx) can never be a real run's, whose IDs end in four
// hex digits (reports.NewRunID).
const fakeRunID = "20000101-000000-tzqx"

// fakeRun writes a local run directory whose state says the run made
// /run/containerd, and points Clean's /run/containerd at a directory of
// the test's own, which it returns.
func fakeRun(t *testing.T, mutate func(*state)) (runDir, crd string) {
	t.Helper()
	runDir = filepath.Join(t.TempDir(), fakeRunID)
	if err := os.Mkdir(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	st := state{Nodes: []nodeState{layoutOf(runDir, 0).state(fakeRunID)}, ContainerdRunDirExisted: false, BootID: bootID()}
	if mutate != nil {
		mutate(&st)
	}
	if err := writeState(runDir, st); err != nil {
		t.Fatal(err)
	}
	crd = filepath.Join(t.TempDir(), "containerd")
	if err := os.MkdirAll(filepath.Join(crd, "s"), 0o711); err != nil {
		t.Fatal(err)
	}
	old := containerdRunDir
	containerdRunDir = crd
	t.Cleanup(func() { containerdRunDir = old })
	return runDir, crd
}

func cleanCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// listen serves a unix socket at path until the test ends.
func listen(t *testing.T, path string) *net.UnixListener {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l
}

// A containerd that is not the run's answers on /run/containerd's socket
// (one started after a reboot, or by a Docker install): Clean leaves the
// directory, its socket and what else is in it alone, and still removes
// the run directory.
func TestCleanLeavesALiveContainerdRunDir(t *testing.T) {
	testgate.RequireRoot(t, "Clean reads every process's open files and cgroups as root does")
	runDir, crd := fakeRun(t, nil)
	sock := filepath.Join(crd, "containerd.sock")
	listen(t, sock)
	if err := os.WriteFile(filepath.Join(crd, "s", "theirs"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Clean(cleanCtx(t), runDir); err != nil {
		t.Fatalf("Clean: %v", err)
	}
	for _, p := range []string{sock, filepath.Join(crd, "s", "theirs")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("Clean removed %s of a live containerd: %v", p, err)
		}
	}
	if _, err := os.Stat(runDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run directory %s still there: %v", runDir, err)
	}
	if why := containerdRunDirInUse(crd, state{}); why == "" {
		t.Errorf("containerdRunDirInUse = \"\" with %s listening", sock)
	}
}

// The run's own leftovers, dead sockets of killed shims, go with the
// directory the run made.
func TestCleanRemovesTheRunsDeadContainerdRunDir(t *testing.T) {
	testgate.RequireRoot(t, "Clean reads every process's open files and cgroups as root does")
	runDir, crd := fakeRun(t, nil)
	l := listen(t, filepath.Join(crd, "s", "0123abcd"))
	l.SetUnlinkOnClose(false)
	l.Close() // the shim is gone; its socket file stays
	if err := Clean(cleanCtx(t), runDir); err != nil {
		t.Fatalf("Clean: %v", err)
	}
	if _, err := os.Lstat(crd); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s, which the run made and nothing uses, still there: %v", crd, err)
	}
}

// Nothing is removed across a mount point, whose files belong to what is
// mounted there.
func TestCleanLeavesAContainerdRunDirWithAMount(t *testing.T) {
	testgate.RequireRoot(t, "mounts a tmpfs in the containerd run directory, and Clean reads every process's open files as root does")
	runDir, crd := fakeRun(t, nil)
	mnt := filepath.Join(crd, "io.containerd.runtime.v2.task", "rootfs")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(mnt, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Clean(cleanCtx(t), runDir); err != nil {
		t.Fatalf("Clean: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "file")); err != nil {
		t.Errorf("Clean removed a file on a mount under %s: %v", crd, err)
	}
}

// A process outside the run working in the directory, or holding a socket
// there that does not accept connections, keeps it.
func TestCleanLeavesAContainerdRunDirAProcessUses(t *testing.T) {
	testgate.RequireRoot(t, "Clean reads every process's open files and cgroups as root does, to see the process using the directory")
	t.Run("working directory", func(t *testing.T) {
		runDir, crd := fakeRun(t, nil)
		cmd := exec.Command("sleep", "60")
		cmd.Dir = filepath.Join(crd, "s")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if err := Clean(cleanCtx(t), runDir); err != nil {
			t.Fatalf("Clean: %v", err)
		}
		if _, err := os.Stat(crd); err != nil {
			t.Errorf("Clean removed %s, the working directory of pid %d: %v", crd, cmd.Process.Pid, err)
		}
	})
	t.Run("bound socket", func(t *testing.T) {
		runDir, crd := fakeRun(t, nil)
		sock := filepath.Join(crd, "s", "bound")
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
			t.Fatal(err)
		}
		if err := Clean(cleanCtx(t), runDir); err != nil {
			t.Fatalf("Clean: %v", err)
		}
		if _, err := os.Lstat(sock); err != nil {
			t.Errorf("Clean removed %s, bound by a socket still open: %v", sock, err)
		}
	})
}

// After a reboot /run was emptied: whatever is in /run/containerd now was
// made since, not by the run.
func TestCleanLeavesAContainerdRunDirAfterAReboot(t *testing.T) {
	testgate.RequireRoot(t, "Clean reads every process's open files and cgroups as root does")
	runDir, crd := fakeRun(t, func(s *state) { s.BootID = "00000000-0000-0000-0000-000000000000" })
	if err := Clean(cleanCtx(t), runDir); err != nil {
		t.Fatalf("Clean: %v", err)
	}
	if _, err := os.Stat(crd); err != nil {
		t.Errorf("Clean removed %s, made after the reboot: %v", crd, err)
	}
}

// After a reboot the kernel settings the run recorded went with that boot;
// what the host has now was set since, by someone else, and clean must not
// write the run's old values over it. The run's files still go.
func TestCleanAfterARebootRestoresNoKernelState(t *testing.T) {
	testgate.RequireRoot(t, "Clean reads every process's open files and cgroups as root does")
	const key = "kernel.keys.root_maxkeys"
	now := sysctl.Read([]string{key})[key]
	if now == "" {
		t.Skipf("this kernel has no %s", key)
	}
	n, err := strconv.Atoi(now)
	if err != nil {
		t.Fatalf("%s = %q", key, now)
	}
	other := strconv.Itoa(n + 1)
	t.Cleanup(func() {
		if got := sysctl.Read([]string{key})[key]; got != now {
			if err := sysctl.Set(key, now); err != nil {
				t.Errorf("put %s back to %s: %v", key, now, err)
			}
		}
	})
	runDir, _ := fakeRun(t, func(st *state) {
		st.BootID = "00000000-0000-0000-0000-000000000000" // a boot before this one
		st.Sysctls = map[string]string{key: other}
	})
	if err := Clean(cleanCtx(t), runDir); err != nil {
		t.Fatalf("Clean: %v", err)
	}
	if got := sysctl.Read([]string{key})[key]; got != now {
		t.Errorf("Clean of a run from an earlier boot set %s to %s (the run's recorded value); it was %s", key, got, now)
	}
	if _, err := os.Stat(runDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run directory %s still there: %v", runDir, err)
	}
}
