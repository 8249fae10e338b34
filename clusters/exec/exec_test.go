package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/procfs"
)

// namedLocal is a Local with a name, as a node would have.
type namedLocal struct {
	Local
	name string
}

func (n namedLocal) String() string { return n.name }

func TestOutput(t *testing.T) {
	tests := []struct {
		name       string
		cmder      Cmder
		argv       []string
		wantErr    bool
		wantRunErr bool
		wantCode   int
		wantStdout string
		wantStderr string
		wantNode   string
		// Substrings of err.Error().
		wantMsg []string
		// Substrings err.Error() must not contain.
		notMsg []string
	}{
		{
			name:       "success",
			cmder:      Local{},
			argv:       []string{"sh", "-c", "echo hello"},
			wantStdout: "hello\n",
		},
		{
			name:       "stdout stderr and exit code",
			cmder:      Local{},
			argv:       []string{"sh", "-c", "echo out; echo err >&2; exit 3"},
			wantErr:    true,
			wantRunErr: true,
			wantCode:   3,
			wantStdout: "out\n",
			wantStderr: "err\n",
			wantMsg:    []string{`command "sh -c 'echo out; echo err >&2; exit 3'"`, "exited 3", ": err"},
			notMsg:     []string{" on ", "did not run"},
		},
		{
			name:       "node name in result and error",
			cmder:      namedLocal{name: "node-1"},
			argv:       []string{"false"},
			wantErr:    true,
			wantRunErr: true,
			wantCode:   1,
			wantNode:   "node-1",
			wantMsg:    []string{`command "false" on node-1 exited 1`},
		},
		{
			name:       "stderr tail keeps the last five lines",
			cmder:      Local{},
			argv:       []string{"sh", "-c", "for i in 1 2 3 4 5 6 7 8; do echo line$i >&2; done; exit 1"},
			wantErr:    true,
			wantRunErr: true,
			wantCode:   1,
			wantStderr: "line1\nline2\nline3\nline4\nline5\nline6\nline7\nline8\n",
			wantMsg:    []string{"exited 1: line4\nline5\nline6\nline7\nline8"},
			notMsg:     []string{"line3"},
		},
		{
			name:       "missing binary",
			cmder:      Local{},
			argv:       []string{"/nonexistent/skewtest-no-such-binary", "arg"},
			wantErr:    true,
			wantRunErr: true,
			wantCode:   -1,
			wantMsg:    []string{`command "/nonexistent/skewtest-no-such-binary arg" did not run: `, "no such file or directory"},
			notMsg:     []string{"exited"},
		},
		{
			name:     "empty argv",
			cmder:    Local{},
			argv:     nil,
			wantErr:  true,
			wantCode: -1,
			wantMsg:  []string{"empty command"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Output(t.Context(), tc.cmder, tc.argv...)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Output error = %v, want error %v", err, tc.wantErr)
			}
			var re *RunError
			if got := errors.As(err, &re); got != tc.wantRunErr {
				t.Fatalf("error %v (%T) is a *RunError: %v, want %v", err, err, got, tc.wantRunErr)
			}
			if got := ExitCode(err); got != tc.wantCode {
				t.Errorf("ExitCode(err) = %d, want %d", got, tc.wantCode)
			}
			if res.Stdout != tc.wantStdout || res.Stderr != tc.wantStderr {
				t.Errorf("stdout, stderr = %q, %q, want %q, %q", res.Stdout, res.Stderr, tc.wantStdout, tc.wantStderr)
			}
			if res.Node != tc.wantNode {
				t.Errorf("Node = %q, want %q", res.Node, tc.wantNode)
			}
			if tc.argv != nil {
				if !slices.Equal(res.Argv, tc.argv) {
					t.Errorf("Argv = %q, want %q", res.Argv, tc.argv)
				}
				if res.ExitCode != tc.wantCode {
					t.Errorf("Result.ExitCode = %d, want %d", res.ExitCode, tc.wantCode)
				}
				if res.Started.IsZero() || res.Duration <= 0 {
					t.Errorf("Started, Duration = %v, %v; want both set", res.Started, res.Duration)
				}
			}
			if re != nil {
				if re.Result.ExitCode != tc.wantCode || re.Result.Stderr != tc.wantStderr || !slices.Equal(re.Result.Argv, tc.argv) {
					t.Errorf("RunError.Result = %+v, does not match the returned result %+v", re.Result, res)
				}
				if re.Unwrap() == nil {
					t.Errorf("RunError.Unwrap() = nil, want the underlying error")
				}
			}
			if err != nil {
				msg := err.Error()
				for _, want := range tc.wantMsg {
					if !strings.Contains(msg, want) {
						t.Errorf("error %q does not contain %q", msg, want)
					}
				}
				for _, not := range tc.notMsg {
					if strings.Contains(msg, not) {
						t.Errorf("error %q contains %q", msg, not)
					}
				}
			}
		})
	}
}

func TestOutputDoesNotAliasArgv(t *testing.T) {
	argv := []string{"echo", "a"}
	res, err := Output(t.Context(), Local{}, argv...)
	if err != nil {
		t.Fatal(err)
	}
	argv[1] = "changed"
	if res.Argv[1] != "a" {
		t.Errorf("Result.Argv shares the caller's slice: %q", res.Argv)
	}
}

func TestExitCode(t *testing.T) {
	runErr := &RunError{Result: Result{ExitCode: 7}, Err: errors.New("exit status 7")}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"plain error", errors.New("connection lost"), -1},
		{"run error", runErr, 7},
		{"wrapped run error", fmt.Errorf("step: %w", runErr), 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExitCode(tc.err); got != tc.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

func TestOutputStdin(t *testing.T) {
	tests := []struct {
		name  string
		stdin string
		argv  []string
		want  string
	}{
		{"cat", "hello\nworld\n", []string{"cat"}, "hello\nworld\n"},
		{"byte count", strings.Repeat("x", 100000), []string{"wc", "-c"}, "100000"},
		{"empty stdin", "", []string{"wc", "-c"}, "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := OutputStdin(t.Context(), Local{}, strings.NewReader(tc.stdin), tc.argv...)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(res.Stdout); got != strings.TrimSpace(tc.want) {
				t.Errorf("stdout = %.80q, want %.80q", got, strings.TrimSpace(tc.want))
			}
		})
	}
}

func TestLocalSetEnv(t *testing.T) {
	var out bytes.Buffer
	cmd := Local{}.Command(t.Context(), "sh", "-c", `echo "$SKEWTEST_A-$SKEWTEST_B-${PATH:+path}"`).SetEnv("SKEWTEST_A=1", "SKEWTEST_B=two words").SetStdout(&out)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	// The environment is added to, not replaced: PATH is still set.
	if got, want := out.String(), "1-two words-path\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// TestLocalCancelKillsProcessGroup cancels a shell whose child sleeps: both
// must be gone quickly, not after the sleep or the WaitDelay.
func TestLocalCancelKillsProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := Output(ctx, Local{}, "sh", "-c", `sleep 30 & echo $! > "$1.tmp" && mv "$1.tmp" "$1"; wait`, "sh", pidFile)
		done <- outcome{res, err}
	}()

	var sleepPID int
	deadline := time.Now().Add(10 * time.Second)
	for sleepPID == 0 {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file %q: %v", b, err)
			}
			sleepPID = pid
			break
		}
		select {
		case o := <-done:
			t.Fatalf("command ended before writing its pid file: %+v %v", o.res, o.err)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("sleep pid file never written")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Whatever happens, do not leave the sleep behind.
	t.Cleanup(func() {
		if procfs.Alive(sleepPID) {
			_ = syscall.Kill(sleepPID, syscall.SIGKILL)
		}
	})
	if !procfs.Alive(sleepPID) {
		t.Fatalf("sleep (pid %d) is not running before cancel", sleepPID)
	}

	start := time.Now()
	cancel()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("command still running 15s after cancel")
	}
	// WaitDelay is 5s: returning well under it means the group kill closed
	// the pipes, not the delay.
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("command returned %v after cancel, want < 3s", took)
	}
	if o.err == nil {
		t.Fatalf("cancelled command returned no error: %+v", o.res)
	}
	if code := ExitCode(o.err); code == 0 {
		t.Errorf("cancelled command has exit code 0")
	}
	waitGone(t, sleepPID, 5*time.Second)
}

func TestLocalCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := Output(ctx, Local{}, "sh", "-c", "echo should-not-run")
	if err == nil {
		t.Fatal("command with a cancelled context ran")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v does not wrap context.Canceled", err)
	}
	if ExitCode(err) != -1 || res.Stdout != "" {
		t.Errorf("exit code %d, stdout %q; want -1 and nothing", ExitCode(err), res.Stdout)
	}
}

func waitGone(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for procfs.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive %v after cancel", pid, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestShellQuote(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "''"},
		{"abc", "abc"},
		{"safe-chars_./=:,+@%~09AZ", "safe-chars_./=:,+@%~09AZ"},
		{"/var/lib/kubelet/pods", "/var/lib/kubelet/pods"},
		{"two words", "'two words'"},
		{"it's", `'it'\''s'`},
		{"'", `''\'''`},
		{"$HOME", "'$HOME'"},
		{"a;b", "'a;b'"},
		{"tab\there", "'tab\there'"},
		{"line\nbreak", "'line\nbreak'"},
		{"*", "'*'"},
		{`back\slash`, `'back\slash'`},
		{"ünïcode", "'ünïcode'"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got := ShellQuote(tc.in)
			if got != tc.want {
				t.Errorf("ShellQuote(%q) = %q, want %q", tc.in, got, tc.want)
			}
			// A POSIX shell must read the quoted word back as the input.
			res, err := Output(t.Context(), Local{}, "sh", "-c", "printf %s "+got)
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != tc.in {
				t.Errorf("sh read %q back as %q", got, res.Stdout)
			}
		})
	}
}

func TestJoinArgv(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{"nil", nil, ""},
		{"one", []string{"ls"}, "ls"},
		{"safe", []string{"ls", "-la", "/tmp"}, "ls -la /tmp"},
		{"empty arg", []string{"echo", ""}, "echo ''"},
		{"shell script", []string{"sh", "-c", "echo out; exit 3"}, "sh -c 'echo out; exit 3'"},
		{"single quotes", []string{"echo", "don't"}, `echo 'don'\''t'`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := JoinArgv(tc.argv); got != tc.want {
				t.Errorf("JoinArgv(%q) = %q, want %q", tc.argv, got, tc.want)
			}
			if got := (Result{Argv: tc.argv}).CommandLine(); got != tc.want {
				t.Errorf("CommandLine() = %q, want %q", got, tc.want)
			}
		})
	}
}
