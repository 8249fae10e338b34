package process

import (
	"context"
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

	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// Scripts print "ready" once their trap is set, so a test signals them only
// after that. Each leaves a long sleep in its process group, which only a
// signal to the group ends (in ignoresTerm, only SIGKILL: the sleep
// inherits the ignored SIGTERM). exitsOnTerm forks its sleep before setting
// the trap: a child forked after it could catch the SIGTERM between fork
// and exec, then exec sleep and outlive the test.
const (
	exitsOnTerm   = `sleep 30 & trap "echo got TERM; exit 0" TERM; echo ready; while :; do sleep 0.1; done`
	ignoresTerm   = `trap "" TERM; sleep 30 & echo ready; while :; do sleep 0.1; done`
	waitTimeout   = 10 * time.Second
	pollInterval  = 20 * time.Millisecond
	startupMarker = "\nready\n" // a line of its own, not the log header
)

// start starts sh -c script under dir and stops it when the test ends.
func start(t *testing.T, dir, name, script string, env ...string) *Process {
	t.Helper()
	p, err := Start(name, filepath.Join(dir, "logs", name+".log"), filepath.Join(dir, "pids", name+".pid"), []string{"sh", "-c", script}, env)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stopAll(t, p) })
	return p
}

// stopAll stops p and kills whatever is left in its process group.
func stopAll(t *testing.T, p *Process) {
	t.Helper()
	if err := p.Stop(time.Second); err != nil {
		t.Errorf("cleanup Stop: %v", err)
	}
	if groupMembers(p.PID()) != nil {
		_ = KillAndWait(p.PID(), 5*time.Second)
	}
}

// waitLog waits until the process's log contains s.
func waitLog(t *testing.T, p *Process, s string) string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		b, _ := os.ReadFile(p.LogFile)
		if strings.Contains(string(b), s) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("log %s never contained %q; it holds:\n%s", p.LogFile, s, b)
		}
		time.Sleep(pollInterval)
	}
}

// groupMembers lists the live (non-zombie) processes in process group pgid.
func groupMembers(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// After the name: state ppid pgrp ...
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestStartWritesLogAndPIDFile(t *testing.T) {
	dir := t.TempDir()
	p := start(t, dir, "daemon", `echo "hello $SKEWTEST_GREETING"; echo to-stderr >&2; `+exitsOnTerm, "SKEWTEST_GREETING=world")

	if p.Name != "daemon" {
		t.Errorf("Name = %q", p.Name)
	}
	b, err := os.ReadFile(p.PIDFile)
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	st, err := procfs.ReadStat(p.PID())
	if err != nil {
		t.Fatal(err)
	}
	start := st.StartTime
	if got, want := strings.TrimSpace(string(b)), fmt.Sprintf("%d %d %s", p.PID(), start, bootID()); got != want {
		t.Errorf("pid file holds %q, want %q (pid, start time, boot ID)", got, want)
	}
	if filepath.Dir(p.PIDFile) != filepath.Join(dir, "pids") || filepath.Dir(p.LogFile) != filepath.Join(dir, "logs") {
		t.Errorf("files %s, %s not where asked", p.PIDFile, p.LogFile)
	}
	if !procfs.Alive(p.PID()) {
		t.Errorf("procfs.Alive(%d) = false for a running process", p.PID())
	}
	if exited, err := p.Exited(); exited {
		t.Errorf("Exited() = true, %v for a running process", err)
	}
	// Its own process group, so that Stop reaches its children.
	if pgid, err := syscall.Getpgid(p.PID()); err != nil || pgid != p.PID() {
		t.Errorf("process group %d (%v), want %d", pgid, err, p.PID())
	}

	log := waitLog(t, p, startupMarker)
	for _, want := range []string{"==== skewtest: daemon starting at ", "hello world\n", "to-stderr\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("log does not contain %q:\n%s", want, log)
		}
	}
	if !strings.HasPrefix(log, "==== skewtest: daemon starting") {
		t.Errorf("log does not start with the header:\n%s", log)
	}
}

func TestStartAppendsLog(t *testing.T) {
	dir := t.TempDir()
	for i := range 2 {
		p, err := Start("twice", filepath.Join(dir, "twice.log"), "", []string{"sh", "-c", fmt.Sprintf("echo run%d", i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
		case <-time.After(waitTimeout):
			_ = p.Stop(time.Second)
			t.Fatal("echo did not exit")
		}
		if exited, err := p.Exited(); !exited || err != nil {
			t.Errorf("Exited() = %v, %v; want true, nil", exited, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "twice.log"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b), "==== skewtest: twice starting"); got != 2 {
		t.Errorf("%d headers, want 2:\n%s", got, b)
	}
	if !strings.Contains(string(b), "run0\n") || !strings.Contains(string(b), "run1\n") {
		t.Errorf("log lost a run's output:\n%s", b)
	}
}

func TestStartMissingBinary(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "x.pid")
	_, err := Start("missing", filepath.Join(dir, "x.log"), pidFile, []string{"/nonexistent/skewtest-daemon"}, nil)
	if err == nil || !strings.Contains(err.Error(), "start missing (/nonexistent/skewtest-daemon)") {
		t.Fatalf("Start() = %v, want a start error naming the process and binary", err)
	}
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file written for a process that did not start: %v", err)
	}
}

func TestStop(t *testing.T) {
	tests := []struct {
		name   string
		script string
		grace  time.Duration
		// Stop must take at least minTook (the grace, when it has to
		// escalate) and at most maxTook.
		minTook, maxTook time.Duration
		wantSignal       syscall.Signal // 0: exit status 0
		wantLog          string
	}{
		{
			name:    "exits on SIGTERM",
			script:  exitsOnTerm,
			grace:   30 * time.Second,
			maxTook: 5 * time.Second,
			wantLog: "got TERM",
		},
		{
			name:       "ignores SIGTERM and is killed after the grace",
			script:     ignoresTerm,
			grace:      300 * time.Millisecond,
			minTook:    300 * time.Millisecond,
			maxTook:    5 * time.Second,
			wantSignal: syscall.SIGKILL,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, t.TempDir(), "daemon", tc.script)
			waitLog(t, p, startupMarker)
			pid := p.PID()
			if len(groupMembers(pid)) < 1 {
				t.Fatalf("no live process in group %d", pid)
			}

			began := time.Now()
			if err := p.Stop(tc.grace); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			took := time.Since(began)
			if took < tc.minTook || took > tc.maxTook {
				t.Errorf("Stop took %v, want between %v and %v", took, tc.minTook, tc.maxTook)
			}

			exited, err := p.Exited()
			if !exited {
				t.Fatal("Exited() = false after Stop returned")
			}
			if tc.wantSignal == 0 {
				if err != nil {
					t.Errorf("exit error %v, want a clean exit", err)
				}
			} else {
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("exit error %v (%T), want *exec.ExitError", err, err)
				}
				ws := ee.Sys().(syscall.WaitStatus)
				if !ws.Signaled() || ws.Signal() != tc.wantSignal {
					t.Errorf("exit status %v, want killed by %v", ws, tc.wantSignal)
				}
			}
			if procfs.Alive(pid) {
				t.Errorf("pid %d alive after Stop", pid)
			}
			// The sleeps the shell started are in its group and must be gone
			// too (after the SIGKILL of the group, or their own SIGTERM).
			deadline := time.Now().Add(waitTimeout)
			for m := groupMembers(pid); m != nil; m = groupMembers(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("processes %v of group %d still alive after Stop", m, pid)
				}
				time.Sleep(pollInterval)
			}
			if _, err := os.Stat(p.PIDFile); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("pid file still there after Stop: %v", err)
			}
			if tc.wantLog != "" {
				b, _ := os.ReadFile(p.LogFile)
				if !strings.Contains(string(b), tc.wantLog) {
					t.Errorf("log does not contain %q:\n%s", tc.wantLog, b)
				}
			}
			// Stopping again is a no-op.
			if err := p.Stop(tc.grace); err != nil {
				t.Errorf("second Stop: %v", err)
			}
		})
	}
}

func TestStopAfterExit(t *testing.T) {
	p := start(t, t.TempDir(), "short", "exit 3")
	select {
	case <-p.Done():
	case <-time.After(waitTimeout):
		t.Fatal("exit 3 did not exit")
	}
	if _, err := os.Stat(p.PIDFile); err != nil {
		t.Fatalf("pid file gone before Stop: %v", err)
	}
	if err := p.Stop(time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(p.PIDFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stop of an exited process left its pid file: %v", err)
	}
	if _, err := p.Exited(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("exit error %v, want exit status 3", err)
	}
}

func TestWaitReady(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		ready   func(calls int) error
		timeout time.Duration
		// wantErr are substrings of the error; nil means ready.
		wantErr []string
		notErr  []string
		wantIs  error
	}{
		{
			name:   "ready after a few checks",
			script: exitsOnTerm,
			ready: func(calls int) error {
				if calls < 3 {
					return errors.New("not yet")
				}
				return nil
			},
			timeout: waitTimeout,
		},
		{
			name:    "exits before ready",
			script:  `for i in $(seq 1 30); do echo "noise $i"; done; echo "fatal: bad flag --frobnicate"; exit 1`,
			ready:   func(int) error { return errors.New("connection refused") },
			timeout: waitTimeout,
			wantErr: []string{"crashy exited before it was ready (exit status 1)", "last log lines from ", "noise 30\nfatal: bad flag --frobnicate"},
			// Only the tail: 15 lines.
			notErr: []string{"noise 15\n"},
		},
		{
			name:   "never ready",
			script: `echo "E1204 Failed to start healthz server: listen tcp 127.0.0.1:37069: bind: address already in use"; ` + exitsOnTerm,
			// The last check runs out of time with ctx: the one before
			// it is quoted.
			ready: func(calls int) error {
				if calls < 5 {
					return errors.New("connection refused")
				}
				time.Sleep(time.Second)
				return context.DeadlineExceeded
			},
			timeout: 300 * time.Millisecond,
			wantErr: []string{"not ready: context deadline exceeded", "last check: connection refused", "last log lines from ", "Failed to start healthz server"},
			wantIs:  context.DeadlineExceeded,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, t.TempDir(), "crashy", tc.script)
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			calls := 0
			err := p.WaitReady(ctx, 10*time.Millisecond, func(context.Context) error {
				calls++
				return tc.ready(calls)
			})
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("WaitReady() = %v, want nil", err)
				}
				if calls != 3 {
					t.Errorf("ready called %d times, want 3", calls)
				}
				return
			}
			if err == nil {
				t.Fatalf("WaitReady() = nil, want an error")
			}
			for _, sub := range tc.wantErr {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("WaitReady() error does not contain %q:\n%v", sub, err)
				}
			}
			for _, sub := range tc.notErr {
				if strings.Contains(err.Error(), sub) {
					t.Errorf("WaitReady() error contains %q:\n%v", sub, err)
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("WaitReady() = %v, does not wrap %v", err, tc.wantIs)
			}
		})
	}
}

func TestKillPIDFile(t *testing.T) {
	t.Run("kills the recorded process group", func(t *testing.T) {
		p := start(t, t.TempDir(), "orphan", ignoresTerm)
		waitLog(t, p, startupMarker)
		pid := p.PID()
		if err := KillPIDFile(p.PIDFile); err != nil {
			t.Fatalf("KillPIDFile: %v", err)
		}
		if procfs.Alive(pid) {
			t.Errorf("pid %d alive after KillPIDFile", pid)
		}
		if _, err := os.Stat(p.PIDFile); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pid file still there: %v", err)
		}
		select {
		case <-p.Done():
		case <-time.After(waitTimeout):
			t.Fatal("process not reaped after KillPIDFile")
		}
		deadline := time.Now().Add(waitTimeout)
		for m := groupMembers(pid); m != nil; m = groupMembers(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("processes %v of group %d still alive", m, pid)
			}
			time.Sleep(pollInterval)
		}
	})

	// A pid above any pid_max: no such process. (A reaped child's pid could
	// be reused by someone else's process by the time it is killed.)
	const deadPID = 1 << 30

	tests := []struct {
		name    string
		content *string // nil: no file
	}{
		{"missing file", nil},
		{"dead pid", ptr(strconv.Itoa(deadPID) + "\n")},
		{"garbage", ptr("not a pid\n")},
		{"empty", ptr("")},
		{"pid 1 is never killed", ptr("1\n")},
		{"negative", ptr("-5\n")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "x.pid")
			if tc.content != nil {
				if err := os.WriteFile(f, []byte(*tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := KillPIDFile(f); err != nil {
				t.Errorf("KillPIDFile() = %v, want nil", err)
			}
			if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("pid file left behind: %v", err)
			}
			if !procfs.Alive(1) {
				t.Errorf("pid 1 is gone")
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestAlive(t *testing.T) {
	// A zombie: a child that exited and is not yet waited for.
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zombie.Wait() })
	deadline := time.Now().Add(waitTimeout)
	for state(zombie.Process.Pid) != "Z" {
		if time.Now().After(deadline) {
			t.Fatalf("child %d never became a zombie (state %q)", zombie.Process.Pid, state(zombie.Process.Pid))
		}
		time.Sleep(pollInterval)
	}

	// A process whose command name has spaces and a ')' in it, to check
	// that the state is read after the last ')'.
	dir := t.TempDir()
	odd := filepath.Join(dir, "a b) c")
	if err := os.Symlink("/bin/sh", odd); err != nil {
		t.Fatal(err)
	}
	oddProc, err := Start("odd", filepath.Join(dir, "odd.log"), "", []string{odd, "-c", exitsOnTerm}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopAll(t, oddProc) })
	waitLog(t, oddProc, startupMarker)

	tests := []struct {
		name string
		pid  int
		want bool
	}{
		{"self", os.Getpid(), true},
		{"init", 1, true},
		{"odd command name", oddProc.PID(), true},
		{"zombie", zombie.Process.Pid, false},
		{"no such pid", 1 << 30, false},
		{"zero", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := procfs.Alive(tc.pid); got != tc.want {
				t.Errorf("procfs.Alive(%d) = %v, want %v", tc.pid, got, tc.want)
			}
		})
	}
}

// state is the one-letter state of pid, "" if it does not exist.
func state(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

func TestTailFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content *string
		n       int
		want    string
	}{
		{"missing", nil, 3, ""},
		{"empty", ptr(""), 3, ""},
		{"fewer lines", ptr("a\nb\n"), 3, "a\nb"},
		{"more lines", ptr("1\n2\n3\n4\n5\n"), 2, "4\n5"},
		{"no trailing newline", ptr("1\n2\n3"), 2, "2\n3"},
		{"blank lines at the end are dropped", ptr("1\n2\n\n\n"), 1, "2"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, strconv.Itoa(i))
			if tc.content != nil {
				if err := os.WriteFile(f, []byte(*tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := TailFile(f, tc.n); got != tc.want {
				t.Errorf("TailFile(%q, %d) = %q, want %q", *ptrOr(tc.content), tc.n, got, tc.want)
			}
		})
	}
}

func ptrOr(p *string) *string {
	if p == nil {
		return ptr("<missing>")
	}
	return p
}

// After a reboot (or a pid wrap-around) the pid in a pid file belongs to
// another process: KillPIDFile must leave it alone and only drop the file.
func TestKillPIDFileChecksStartTime(t *testing.T) {
	dir := t.TempDir()
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.Process.Kill(); _ = victim.Wait() })
	pid := victim.Process.Pid
	st, err := procfs.ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	start := st.StartTime
	write := func(content string, mtime time.Time) string {
		t.Helper()
		f := filepath.Join(dir, "p.pid")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return f
	}
	boot, err := bootTime()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, content string }{
		{"another start time", fmt.Sprintf("%d %d %s\n", pid, start+1, bootID())},
		{"another boot", fmt.Sprintf("%d %d %s\n", pid, start, "00000000-0000-0000-0000-000000000000")},
	} {
		f := write(tc.content, time.Now())
		if err := KillPIDFile(f); err != nil {
			t.Errorf("%s: KillPIDFile: %v", tc.name, err)
		}
		if !procfs.Alive(pid) {
			t.Fatalf("%s: KillPIDFile killed pid %d, which is not the process the file describes", tc.name, pid)
		}
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: stale pid file kept", tc.name)
		}
	}
	// A pid file from before start times were recorded, written before this
	// boot: not ours either.
	f := write(fmt.Sprintf("%d\n", pid), boot.Add(-time.Hour))
	if err := KillPIDFile(f); err != nil || !procfs.Alive(pid) {
		t.Fatalf("a pid file from before the boot: KillPIDFile = %v, alive %v", err, procfs.Alive(pid))
	}
	// The right start time and boot: killed.
	f = write(fmt.Sprintf("%d %d %s\n", pid, start, bootID()), time.Now())
	if err := KillPIDFile(f); err != nil {
		t.Fatalf("KillPIDFile: %v", err)
	}
	_ = victim.Wait()
	if procfs.Alive(pid) {
		t.Errorf("pid %d survived KillPIDFile with its own start time", pid)
	}
}

// TestStartIn starts a daemon in a cgroup v2 directory and checks that it,
// and what it forks, live there from the start.
func TestStartIn(t *testing.T) {
	testgate.RequireRoot(t, "starts a daemon in a cgroup it makes")
	tree, ok := cgroups.V2()
	if !ok {
		t.Fatal("no cgroup2 hierarchy on this host; every host skewtest supports has one")
	}
	// Not named skewtest-*: the host footprint another package's test may
	// compare meanwhile counts those cgroups as a run's.
	rel := fmt.Sprintf("/gotest-start-%d", os.Getpid())
	if err := tree.Mkdir(rel); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cgroups.Kill([]string{tree.Path(rel)}, 5*time.Second)
		if err := cgroups.Remove([]string{tree.Path(rel)}); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	p, err := StartIn(tree.Path(rel), "daemon", filepath.Join(dir, "daemon.log"), filepath.Join(dir, "daemon.pid"), []string{"sh", "-c", exitsOnTerm}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopAll(t, p) })
	if got, err := cgroups.CgroupOf(p.PID()); err != nil || got != rel {
		t.Errorf("the daemon is in %q (%v), want %s", got, err, rel)
	}
	deadline := time.Now().Add(waitTimeout)
	for len(cgroups.Procs(tree.Path(rel))) < 2 && time.Now().Before(deadline) {
		time.Sleep(pollInterval)
	}
	if got := cgroups.Procs(tree.Path(rel)); len(got) < 2 {
		t.Errorf("the cgroup holds %v, want the daemon and its sleep", got)
	}
	if err := p.Stop(waitTimeout); err != nil {
		t.Fatal(err)
	}
	if _, err := StartIn(filepath.Join(dir, "not-a-cgroup"), "x", filepath.Join(dir, "x.log"), "", []string{"true"}, nil); err == nil {
		t.Errorf("StartIn into a directory that does not exist succeeded")
	}
}

// The daemon's pid is in its pid file before the daemon's first
// instruction: a harness killed mid-start leaves nothing that clean
// cannot find.
func TestStartRecordsThePIDBeforeTheDaemonRuns(t *testing.T) {
	dir := t.TempDir()
	pidFile, seen := filepath.Join(dir, "d.pid"), filepath.Join(dir, "seen")
	p, err := Start("d", filepath.Join(dir, "d.log"), pidFile,
		[]string{"/bin/sh", "-c", `{ cat "$1"; echo $$; } > "$2.tmp" && mv "$2.tmp" "$2"; exec sleep 60`, "sh", pidFile, seen}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(time.Second) })
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		// seen appears whole (renamed into place), once the daemon wrote
		// what its pid file held and its own pid.
		if b, err := os.ReadFile(seen); err == nil {
			got = strings.Fields(string(b))
			break
		}
	}
	// What the daemon read at its start: its own pid (the bare record,
	// or already the full one), then its pid.
	if len(got) < 2 || got[0] != strconv.Itoa(p.PID()) || got[len(got)-1] != strconv.Itoa(p.PID()) {
		t.Errorf("the daemon (pid %d) saw %q in its pid file at its start, want its pid", p.PID(), got)
	}
}

// The shell that becomes a daemon does not start it when its pid file
// cannot be written (clean removed the run directory meanwhile).
func TestRecordThenExecRefusesWithoutItsPIDFile(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	cmd := exec.Command("/bin/sh", "-c", recordThenExec, filepath.Join(dir, "gone", "d.pid"), "touch", marker)
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 {
		t.Errorf("the shell without its pid file: %v, want exit 125", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the daemon ran without its pid file: %v", err)
	}
	cmd = exec.Command("/bin/sh", "-c", recordThenExec, filepath.Join(dir, "d.pid"), "touch", marker)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "d.pid")); strings.TrimSpace(string(b)) != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("pid file %q, want the daemon's pid %d", b, cmd.Process.Pid)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the daemon did not run with its pid file written: %v", err)
	}
}
