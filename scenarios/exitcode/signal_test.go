package exitcode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec" // the test binary again, as a child whose output is closed
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pipeChildEnv makes the test binary the child of TestClosedOutputTearsDown;
// teardownEnv makes its teardown last that many milliseconds.
const (
	pipeChildEnv = "SKEWTEST_TEST_PIPE_CHILD"
	teardownEnv  = "SKEWTEST_TEST_TEARDOWN_MS"
)

// The child logs to stderr until its context is cancelled, then "tears
// down": it logs more (to the closed output), writes the marker file it
// is given and exits with ExitCode of the cause.
func TestMain(m *testing.M) {
	if marker := os.Getenv(pipeChildEnv); marker != "" {
		logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
		ctx, stop := SignalContext(context.Background(), logger)
		deadline := time.After(30 * time.Second)
		for ctx.Err() == nil {
			select {
			case <-deadline:
				os.Exit(99)
			case <-time.After(20 * time.Millisecond):
			}
			logger.Info("working")
			fmt.Println("progress")
		}
		for i := range 50 {
			logger.Info("tearing down", "step", i)
		}
		if ms, err := time.ParseDuration(os.Getenv(teardownEnv) + "ms"); err == nil {
			for end := time.Now().Add(ms); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				logger.Info("tearing down")
			}
		}
		err := context.Cause(ctx)
		_ = os.WriteFile(marker, []byte(err.Error()), 0o600)
		stop()
		os.Exit(Of(err))
	}
	os.Exit(m.Run())
}

// A closed output (tee gone, an SSH session dropped) no longer kills
// skewtest at its next log line: it is taken as SIGHUP, the run tears
// down, logging into the closed pipe, and exits 129.
func TestClosedOutputTearsDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		// then is a signal sent once the child runs its teardown (0:
		// none); it is the user's first, so the teardown goes on.
		then os.Signal
	}{
		{name: "closed output"},
		// Ctrl-C on "skewtest run 2>&1 | tee log": tee is gone, and the
		// SIGINT reaches skewtest after its output closed.
		{name: "closed output, then SIGINT", then: os.Interrupt},
	} {
		t.Run(tc.name, func(t *testing.T) { testClosedOutput(t, tc.then) })
	}
}

func testClosedOutput(t *testing.T, then os.Signal) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "torn-down")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), pipeChildEnv+"="+marker, teardownEnv+"=1500")
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
		t.Fatalf("the child wrote nothing: %v", err)
	}
	r.Close()
	if then != nil {
		// The child logs every 20 ms: by now it met the closed output.
		time.Sleep(300 * time.Millisecond)
		if err := cmd.Process.Signal(then); err != nil {
			t.Fatal(err)
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 129 {
		t.Fatalf("child ended with %v (%v); want exit 129, a teardown after SIGHUP, not death by SIGPIPE", err, cmd.ProcessState)
	}
	got, err := os.ReadFile(marker)
	if err != nil {
		t.Fatalf("the child never finished its teardown: %v", err)
	}
	if !strings.Contains(string(got), "its output (fd 1) was closed") && !strings.Contains(string(got), "its output (fd 2) was closed") {
		t.Errorf("cause %q, want one naming the closed output", got)
	}
}

// SignalContext is tested with a real signal to this test process; the
// handler it installs keeps the signal from killing the process.
func TestSignalContext(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		var logged strings.Builder
		ctx, stop := SignalContext(t.Context(), slog.New(slog.NewTextHandler(&logged, nil)))
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%v did not cancel the context", sig)
		}
		var in *Interrupted
		if cause := context.Cause(ctx); !errors.As(cause, &in) || in.Signal != sig {
			t.Fatalf("cause = %v, want *Interrupted{%v}", cause, sig)
		}
		if code := Of(fmt.Errorf("%w: run", in)); code != 128+int(sig) {
			t.Errorf("%v: exit %d, want %d", sig, code, 128+int(sig))
		}
		if !strings.Contains(logged.String(), `msg="`+ReceivedSignalMsg+`"`) || !strings.Contains(logged.String(), "signal="+sig.String()) {
			t.Errorf("%v: logged %q, want %q naming the signal", sig, logged.String(), ReceivedSignalMsg)
		}
		stop()
	}
}
