package exitcode

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

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
