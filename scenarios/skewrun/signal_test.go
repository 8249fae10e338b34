package skewrun

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
	"testing"
	"time"
)

// pipeChildEnv makes the test binary the child of TestClosedOutputTearsDown.
const pipeChildEnv = "SKEWTEST_TEST_PIPE_CHILD"

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
		err := context.Cause(ctx)
		_ = os.WriteFile(marker, []byte(err.Error()), 0o600)
		stop()
		os.Exit(ExitCode(err))
	}
	os.Exit(m.Run())
}

// A closed output (tee gone, an SSH session dropped) no longer kills
// skewtest at its next log line: it is taken as SIGHUP, the run tears
// down, logging into the closed pipe, and exits 129.
func TestClosedOutputTearsDown(t *testing.T) {
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
	cmd.Env = append(os.Environ(), pipeChildEnv+"="+marker)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
		t.Fatalf("the child wrote nothing: %v", err)
	}
	r.Close()
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
