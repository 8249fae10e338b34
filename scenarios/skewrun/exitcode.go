package skewrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/scenarios"
)

// Exit codes of skewtest, for the jobs and dashboards that act on them
// (docs/design.md, "Exit codes").
const (
	// ExitPass: the run passed, possibly with expected deviations.
	ExitPass = 0
	// ExitKubelet: the kubelet misbehaved: a check failed, something
	// leaked, or a kubelet refused to start after a swap. Also any error
	// no phase classified, so that nothing unexplained passes as a flake.
	ExitKubelet = 1
	// ExitInvalid: bad input, refused before anything was made (or, for
	// an existing cluster, before any node was touched).
	ExitInvalid = 2
	// ExitInfrastructure: the harness could not do its job: the cluster
	// did not come up, a build or download failed, a registry or SSH was
	// unreachable, teardown failed.
	ExitInfrastructure = 3
	// ExitHarness: skewtest itself is at fault (scenarios.ErrHarness),
	// e.g. the PVs it made for a claim were all taken: no verdict on the
	// kubelet, and not a flake to retry; a bug to report against skewtest.
	ExitHarness = 4
	// An interrupted run exits 128 + the signal's number, as a shell
	// reports a process killed by it: 130 for SIGINT, 143 for SIGTERM, 129
	// for SIGHUP.
	exitSignalBase = 128
)

var (
	// ErrInvalid marks errors in the user's input.
	ErrInvalid = errors.New("invalid input")
	// ErrInfrastructure marks failures of the harness or its environment,
	// not of the kubelet under test.
	ErrInfrastructure = errors.New("infrastructure failure")
	// ErrKubelet marks a scenario that failed: the kubelet under test
	// misbehaved.
	ErrKubelet = errors.New("kubelet failure")
	// ErrHarness marks a run that failed through skewtest's own fault:
	// scenarios.ErrHarness itself, one value wherever it is raised.
	ErrHarness = scenarios.ErrHarness
)

// Interrupted is the cause of a context SignalContext cancelled.
type Interrupted struct {
	Signal os.Signal
	// Why, when set, says what the signal stands for ("its output was
	// closed").
	Why string
}

func (e *Interrupted) Error() string {
	if e.Why != "" {
		return fmt.Sprintf("interrupted: %s (taken as %v)", e.Why, e.Signal)
	}
	return fmt.Sprintf("interrupted by %v", e.Signal)
}

// ExitCode is skewtest's exit code for a run's error. An interrupt wins,
// then bad input, then a kubelet failure, then an infrastructure failure
// (so a failed scenario whose teardown also failed is still a failure of
// the kubelet).
func ExitCode(err error) int {
	if err == nil {
		return ExitPass
	}
	var in *Interrupted
	if errors.As(err, &in) {
		if s, ok := in.Signal.(syscall.Signal); ok {
			return exitSignalBase + int(s)
		}
		return exitSignalBase + int(syscall.SIGINT)
	}
	switch {
	case errors.Is(err, ErrInvalid), errors.Is(err, binaries.ErrBadSource), errors.Is(err, hostlock.ErrHostInUse), errors.Is(err, workloads.ErrOtherCluster):
		return ExitInvalid
	case errors.Is(err, ErrHarness):
		return ExitHarness
	case errors.Is(err, ErrKubelet):
		return ExitKubelet
	case errors.Is(err, ErrInfrastructure):
		return ExitInfrastructure
	}
	return ExitKubelet
}

// ReceivedSignalMsg is the message SignalContext logs for the first
// signal.
const ReceivedSignalMsg = "received a signal"

// SignalContext is ctx cancelled by the first SIGINT, SIGTERM or SIGHUP
// (the terminal or SSH session closed: the daemons run in process groups
// of their own and would outlive the harness untorn-down), with an
// *Interrupted as its cause; a run then tears down and its error carries
// the signal. After the first signal the default handling is restored, so
// a second one ends the process at once. The first is logged to logger
// (ReceivedSignalMsg), so that the user sees it taken and a harness
// driving skewtest can tell a signal that reached it from one sent after
// it ended. stop releases the handler.
//
// A closed standard output or error (`skewtest run 2>&1 | tee log` and
// tee killed by the same Ctrl-C, an SSH session that dropped) would kill
// skewtest at its next log line, as SIGKILL would, with nothing torn
// down: Go's default for SIGPIPE on fd 1 and 2. SignalContext takes
// SIGPIPE for as long as the process runs: a write to the closed output
// then fails (and is lost) instead, and the first SIGPIPE that finds fd 1
// or 2 closed cancels ctx as SIGHUP would (the other end hung up), though
// it does not count as the first signal: a SIGINT after it (the Ctrl-C
// that killed tee) is taken as the first, and a second ends the process. A
// SIGPIPE from anything else (a socket the run writes to) changes
// nothing: that write fails as it would have.
func SignalContext(ctx context.Context, logger *slog.Logger) (context.Context, context.CancelFunc) {
	parent := ctx
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	stopped := make(chan struct{})
	go func() {
		// SIGPIPE stays taken when this returns: the teardown that
		// follows writes to the same closed output.
		defer signal.Stop(ch)
		for {
			select {
			case s := <-ch:
				logger.Warn(ReceivedSignalMsg, "signal", s, "then", "the run stops and tears down, as far as it got; a second signal ends skewtest at once, leaving the rest to skewtest clean")
				cancel(&Interrupted{Signal: s})
				return
			case <-pipe:
				// A closed output cancels the run but is nobody's first
				// signal: a Ctrl-C that follows (the one that killed tee)
				// must not end the teardown at once.
				if fd := closedOutput(); fd >= 0 && ctx.Err() == nil {
					logger.Warn(ReceivedSignalMsg, "signal", syscall.SIGPIPE, "fd", fd, "then", "its output is closed, taken as SIGHUP: the run stops and tears down; what it logs is lost")
					cancel(&Interrupted{Signal: syscall.SIGHUP, Why: fmt.Sprintf("its output (fd %d) was closed", fd)})
				}
			case <-parent.Done():
				return
			case <-stopped:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() { close(stopped) })
		cancel(nil)
	}
}

// closedOutput is the first of stdout and stderr whose reader is gone
// (poll says POLLERR or POLLHUP), or -1.
func closedOutput() int {
	fds := []unix.PollFd{{Fd: 1, Events: unix.POLLOUT}, {Fd: 2, Events: unix.POLLOUT}}
	if _, err := unix.Poll(fds, 0); err != nil {
		return -1
	}
	for _, f := range fds {
		if f.Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			return int(f.Fd)
		}
	}
	return -1
}

// classified is an error marked with the class (ErrInvalid,
// ErrInfrastructure, ErrKubelet) a phase gave it; its message is the
// error's own.
type classified struct{ err, class error }

func (e *classified) Error() string        { return e.err.Error() }
func (e *classified) Unwrap() error        { return e.err }
func (e *classified) Is(target error) bool { return target == e.class }

// classify marks err with the phase's class, unless it is a binary source
// the user must change, which is bad input whatever the phase.
func classify(err, class error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, binaries.ErrBadSource) || errors.Is(err, hostlock.ErrHostInUse) {
		class = ErrInvalid
	}
	return &classified{err: err, class: class}
}

// interrupted adds to err the signal that cancelled ctx, if one did.
func interrupted(ctx context.Context, err error) error {
	var in *Interrupted
	if err == nil || errors.As(err, &in) {
		return err
	}
	if cause := context.Cause(ctx); errors.As(cause, &in) {
		return fmt.Errorf("%w: %w", in, err)
	}
	return err
}
