// Package exec is how skewtest runs a command on a node, whatever the node
// is. It follows sigs.k8s.io/kind/pkg/exec: a Cmder makes Cmds, and a Node
// is a Cmder plus a few methods, so the same scenario code runs against a
// local process, an SSH session or a container. The few programs that need
// what a Cmd does not give (a daemon in its own process group that
// outlives the call, a host tool run before any node exists) use os/exec
// and say why on the import's line; ci/osexec_test.go keeps that so.
package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/internal/lines"
)

// Cmd is one command, configured then run once.
type Cmd interface {
	// Run runs the command to completion. A command that ran and exited
	// non-zero returns an error carrying the exit code (see ExitCode).
	Run() error
	SetEnv(env ...string) Cmd
	SetStdin(r io.Reader) Cmd
	SetStdout(w io.Writer) Cmd
	SetStderr(w io.Writer) Cmd
}

// Cmder makes commands. ctx bounds the command's run: cancelling it kills
// the command.
type Cmder interface {
	Command(ctx context.Context, name string, args ...string) Cmd
}

// ExitCoder is implemented by errors from commands that ran and exited
// non-zero.
type ExitCoder interface {
	ExitCode() int
}

// ExitCode returns the exit code carried by err: 0 for nil, the command's
// code when it ran, and -1 when it did not run (not found, connection lost).
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ec ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return -1
}

// Result is what a finished command left: the record that steps keep as
// evidence.
type Result struct {
	Node     string        `json:"node,omitempty"`
	Argv     []string      `json:"argv"`
	Stdout   string        `json:"stdout"`
	Stderr   string        `json:"stderr"`
	ExitCode int           `json:"exitCode"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
}

// CommandLine is argv as one shell-like line, for reports and errors.
func (r Result) CommandLine() string { return JoinArgv(r.Argv) }

// RunError is returned by Output for a command that failed; it keeps the
// whole result so callers can report it.
type RunError struct {
	Result Result
	Err    error
}

func (e *RunError) Error() string {
	msg := fmt.Sprintf("command %q", e.Result.CommandLine())
	if e.Result.Node != "" {
		msg += " on " + e.Result.Node
	}
	if e.Result.ExitCode >= 0 {
		msg += fmt.Sprintf(" exited %d", e.Result.ExitCode)
	} else {
		msg += fmt.Sprintf(" did not run: %v", e.Err)
	}
	if tail := strings.TrimSpace(lines.Last(e.Result.Stderr, 5)); tail != "" {
		msg += ": " + tail
	}
	return msg
}

func (e *RunError) Unwrap() error { return e.Err }

// ExitCode makes a RunError an ExitCoder.
func (e *RunError) ExitCode() int { return e.Result.ExitCode }

// Output runs argv through c, capturing stdout and stderr. The error, if any,
// is a *RunError holding the Result.
func Output(ctx context.Context, c Cmder, argv ...string) (Result, error) {
	return OutputStdin(ctx, c, nil, argv...)
}

// OutputStdin is Output with stdin.
func OutputStdin(ctx context.Context, c Cmder, stdin io.Reader, argv ...string) (Result, error) {
	if len(argv) == 0 {
		return Result{}, errors.New("exec: empty command")
	}
	var stdout, stderr bytes.Buffer
	cmd := c.Command(ctx, argv[0], argv[1:]...).SetStdout(&stdout).SetStderr(&stderr)
	if stdin != nil {
		cmd.SetStdin(stdin)
	}
	res := Result{Argv: append([]string(nil), argv...), Started: time.Now()}
	if s, ok := c.(fmt.Stringer); ok {
		res.Node = s.String()
	}
	err := cmd.Run()
	res.Duration = time.Since(res.Started)
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	res.ExitCode = ExitCode(err)
	if err != nil {
		return res, &RunError{Result: res, Err: err}
	}
	return res, nil
}

// JoinArgv quotes argv for display the way a POSIX shell would read it.
func JoinArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		parts[i] = ShellQuote(a)
	}
	return strings.Join(parts, " ")
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%~", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
