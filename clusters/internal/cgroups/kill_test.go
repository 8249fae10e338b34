package cgroups

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// sleeper starts a process that lives until killed, reaped by the test.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd
}

func TestKillByPIDs(t *testing.T) {
	// A v1 hierarchy has no cgroup.kill: Kill kills what cgroup.procs
	// lists, below the given cgroup too.
	root := filepath.Join(t.TempDir(), "skewtest-1a2b")
	a, b := sleeper(t), sleeper(t)
	fakeCgroup(t, root, map[string]string{"cgroup.procs": strconv.Itoa(a.Process.Pid) + "\n"})
	fakeCgroup(t, filepath.Join(root, "kubepods", "pod1"), map[string]string{"cgroup.procs": strconv.Itoa(b.Process.Pid) + "\n"})
	if err := Kill([]string{root}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*exec.Cmd{a, b} {
		if procfs.Alive(c.Process.Pid) {
			t.Errorf("pid %d still alive after Kill", c.Process.Pid)
		}
	}
}

func TestKillWritesCgroupKill(t *testing.T) {
	root := filepath.Join(t.TempDir(), "run")
	a := sleeper(t)
	fakeCgroup(t, root, map[string]string{"cgroup.procs": strconv.Itoa(a.Process.Pid) + "\n", "cgroup.kill": ""})
	// The fake's cgroup.kill kills nothing; Kill then falls back to the
	// PIDs, so it still returns with the process dead.
	if err := Kill([]string{root}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(root, "cgroup.kill")); got != "1" {
		t.Errorf("cgroup.kill = %q, want 1", got)
	}
	if procfs.Alive(a.Process.Pid) {
		t.Errorf("pid %d still alive after Kill", a.Process.Pid)
	}
}

func TestKillRefusesItsOwnCgroup(t *testing.T) {
	root := t.TempDir()
	other := sleeper(t)
	fakeCgroup(t, root, map[string]string{"cgroup.procs": fmt.Sprintf("%d\n%d\n", other.Process.Pid, os.Getpid())})
	err := Kill([]string{root}, time.Second)
	var ce *Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "holds this process") {
		t.Fatalf("Kill = %v, want a refusal", err)
	}
	if !procfs.Alive(other.Process.Pid) {
		t.Errorf("Kill killed pid %d although it refused", other.Process.Pid)
	}
}

func TestKillEmptyAndMissing(t *testing.T) {
	root := t.TempDir()
	fakeCgroup(t, root, map[string]string{"cgroup.procs": "", "cgroup.kill": ""})
	if err := Kill([]string{root, filepath.Join(root, "gone")}, time.Second); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(root, "cgroup.kill")); got != "" {
		t.Errorf("Kill wrote cgroup.kill of an empty cgroup: %q", got)
	}
}

func TestRemoveDeepestFirst(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "skewtest-1a2b")
	for _, d := range []string{"daemons", "skewtest-worker/kubepods/besteffort/pod1", "skewtest-worker/kubepods/burstable"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := Remove([]string{root, filepath.Join(base, "never-made")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there: %v", root, err)
	}
	// rmdir, never a recursive delete: a directory with a file in it
	// (no cgroup has one) stays, and the error names it.
	odd := filepath.Join(base, "odd")
	fakeCgroup(t, odd, map[string]string{"data": "x"})
	err := Remove([]string{odd})
	if err == nil || !strings.Contains(err.Error(), odd) {
		t.Fatalf("Remove of a directory with a file = %v, want an error naming it", err)
	}
	if _, err := os.Stat(filepath.Join(odd, "data")); err != nil {
		t.Errorf("Remove deleted a file: %v", err)
	}
}

func TestHierarchiesOf(t *testing.T) {
	mounts, err := mountinfo.Parse(strings.NewReader(`30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 30 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
41 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
90 22 0:37 / /var/lib/container/rootfs/sys/fs/cgroup rw - cgroup2 cgroup2 rw
`))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(hierarchiesOf(mounts, Mount), " ")
	if want := "/sys/fs/cgroup/cpu /sys/fs/cgroup/cpuset /sys/fs/cgroup/unified"; got != want {
		t.Errorf("hierarchiesOf = %q, want %q", got, want)
	}
}

// TestRealCgroup2 makes a cgroup in this host's cgroup2 hierarchy (the
// unified one, or a hybrid host's /sys/fs/cgroup/unified), starts
// processes in it, and kills and removes it with cgroup.kill.
func TestRealCgroup2(t *testing.T) {
	testgate.RequireRoot(t, "makes a cgroup2 cgroup and kills it with cgroup.kill")
	tree, ok := V2()
	if !ok {
		t.Fatalf("no cgroup2 hierarchy mounted at %s or %s/unified; every host skewtest supports has one", Mount, Mount)
	}
	// Not named skewtest-*: the host footprint another package's test may
	// compare meanwhile counts those cgroups as a run's.
	rel := fmt.Sprintf("/gotest-kill-%d", os.Getpid())
	if err := tree.Mkdir(rel + "/daemons"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = Kill([]string{tree.Path(rel)}, 5*time.Second)
		_ = Remove([]string{tree.Path(rel)})
	})
	// A shell moved in before it forks: its children are born inside.
	cmd := exec.Command("sh", "-c", "read x; sleep 300 & sleep 300 & wait")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := tree.Move(rel+"/daemons", cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if got, err := CgroupOf(cmd.Process.Pid); err != nil || got != rel+"/daemons" {
		t.Fatalf("CgroupOf(%d) = %q, %v; want %s/daemons", cmd.Process.Pid, got, err, rel)
	}
	stdin.Write([]byte("go\n"))
	deadline := time.Now().Add(10 * time.Second)
	for len(Procs(tree.Path(rel))) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(Procs(tree.Path(rel))); n != 3 {
		t.Fatalf("%d processes in %s, want the shell and its two sleeps", n, rel)
	}
	start := time.Now()
	if err := Kill([]string{tree.Path(rel)}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("Kill took %s (cgroup.kill: %v)", time.Since(start), fileExists(tree.Path(rel+"/cgroup.kill")))
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the shell ended with %v, want SIGKILL", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the shell still runs after Kill")
	}
	if err := Remove([]string{tree.Path(rel)}); err != nil {
		t.Fatal(err)
	}
	if fileExists(tree.Path(rel)) {
		t.Errorf("%s still there after Remove", tree.Path(rel))
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
