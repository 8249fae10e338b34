package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// podbin is the path of the podbin built for the tests.
var podbin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "podbin-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	podbin = filepath.Join(dir, "podbin")
	out, err := exec.Command("go", "build", "-o", podbin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build podbin: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// running is a started podbin and its stdout lines.
type running struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *bytes.Buffer
}

// start runs podbin with args; it is killed at the latest when the test
// ends or after 30s.
func start(t *testing.T, env []string, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	cmd := exec.CommandContext(ctx, podbin, args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &running{cmd: cmd, lines: make(chan string, 10), stderr: &bytes.Buffer{}}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			r.lines <- s.Text()
		}
		close(r.lines)
	}()
	t.Cleanup(func() {
		cancel()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return r
}

// line returns podbin's next stdout line.
func (r *running) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-r.lines:
		if !ok {
			t.Fatalf("podbin closed stdout without a line; stderr: %s", r.stderr)
		}
		return l
	case <-time.After(15 * time.Second):
		t.Fatalf("no line from podbin in 15s; stderr: %s", r.stderr)
		return ""
	}
}

// terminate sends SIGTERM and returns the exit code.
func (r *running) terminate(t *testing.T) int {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return exitCode(t, r.cmd.Wait())
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
			t.Errorf("podbin killed by %v, want an exit", ws.Signal())
		}
		return ee.ExitCode()
	default:
		t.Fatalf("wait: %v", err)
		return -1
	}
}

func TestWorkloadMarker(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")

	first := start(t, []string{"POD_NAME=writer", "POD_UID=uid-1"}, "workload", dir)
	l := first.line(t)
	content, ok := strings.CutPrefix(l, "marker written: ")
	if !ok {
		t.Fatalf("first run printed %q, want \"marker written: ...\"", l)
	}
	if !strings.HasPrefix(content, "written by pod writer uid uid-1 at ") {
		t.Errorf("marker content %q does not name the pod", content)
	}
	b, err := os.ReadFile(marker)
	if err != nil {
		t.Fatalf("marker: %v", err)
	}
	if string(b) != content {
		t.Errorf("marker file holds %q, printed %q", b, content)
	}
	if _, err := os.Stat(marker + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("marker.tmp left behind: %v", err)
	}
	if code := first.terminate(t); code != 0 {
		t.Errorf("first run exited %d on SIGTERM, want 0; stderr: %s", code, first.stderr)
	}

	// The re-created pod finds its predecessor's marker and keeps it.
	second := start(t, []string{"POD_NAME=reader", "POD_UID=uid-2"}, "workload", dir)
	if l := second.line(t); l != "marker found: "+content {
		t.Errorf("second run printed %q, want %q", l, "marker found: "+content)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != content {
		t.Errorf("marker changed to %q (%v), want %q", b, err, content)
	}
	if code := second.terminate(t); code != 0 {
		t.Errorf("second run exited %d on SIGTERM, want 0; stderr: %s", code, second.stderr)
	}
}

// A raw device (here a zeroed file standing in for one) gets the marker in
// its first sector once; a second path in the same call gets its own.
func TestWorkloadRawMarker(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "device")
	if err := os.WriteFile(dev, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	first := start(t, []string{"POD_NAME=writer", "POD_UID=uid-1"}, "workload", dev, dir)
	l := first.line(t)
	content, ok := strings.CutPrefix(l, "marker written to "+dev+": ")
	if !ok || !strings.HasPrefix(content, "written by pod writer uid uid-1 at ") {
		t.Fatalf("first run printed %q, want the raw marker written to %s", l, dev)
	}
	if l := first.line(t); !strings.HasPrefix(l, "marker written: written by pod writer") {
		t.Errorf("the directory's marker: printed %q", l)
	}
	b, err := os.ReadFile(dev)
	if err != nil {
		t.Fatal(err)
	}
	if want := RawMagic + content + "\x00"; !strings.HasPrefix(string(b), want) {
		t.Errorf("device starts with %q, want %q", b[:len(want)], want)
	}
	if len(b) != 4096 {
		t.Errorf("device is %d bytes now, want 4096 (written in place)", len(b))
	}
	first.terminate(t)
	second := start(t, []string{"POD_NAME=reader", "POD_UID=uid-2"}, "workload", dev)
	if l := second.line(t); l != "marker found in "+dev+": "+content {
		t.Errorf("second run printed %q, want the first marker found", l)
	}
	second.terminate(t)
}

func TestPauseExitsOnSIGTERM(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			r := start(t, nil, "pause")
			// pause prints nothing: wait until all its threads sleep, i.e.
			// main is blocked waiting for a signal.
			waitIdle(t, r.cmd.Process.Pid)
			if err := r.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := exitCode(t, r.cmd.Wait()); code != 0 {
				t.Errorf("pause exited %d on %v, want 0", code, sig)
			}
			if _, ok := <-r.lines; ok {
				t.Error("pause wrote to stdout")
			}
		})
	}
}

// waitIdle waits until every thread of pid has been asleep for two polls
// in a row.
func waitIdle(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	idle := 0
	for idle < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never idle", pid)
		}
		time.Sleep(50 * time.Millisecond)
		if allSleeping(pid) {
			idle++
		} else {
			idle = 0
		}
	}
}

func allSleeping(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) || s[i+2] != 'S' {
			return false
		}
	}
	return true
}

func TestBadUsage(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"no args", nil, 2, "usage: podbin pause | podbin workload PATH..."},
		{"unknown mode", []string{"frobnicate"}, 2, `podbin: unknown mode "frobnicate"`},
		{"workload without dir", []string{"workload"}, 2, "usage: podbin workload PATH..."},
		{"workload with a path missing", []string{"workload", "/nonexistent/skewtest-podbin", "/nonexistent/b"}, 1, "podbin: "},
		{"workload dir missing", []string{"workload", "/nonexistent/skewtest-podbin"}, 1, "podbin: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, podbin, tc.args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			code := exitCode(t, cmd.Run())
			if ctx.Err() != nil {
				t.Fatalf("podbin %q did not exit by itself", tc.args)
			}
			if code != tc.wantCode {
				t.Errorf("podbin %q exited %d, want %d", tc.args, code, tc.wantCode)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.wantStderr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}
