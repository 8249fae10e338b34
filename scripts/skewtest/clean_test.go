package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// While a run holds the host its directory is live: clean must refuse, and
// touch nothing, rather than kill the run.
func TestCleanRefusesWhileARunHoldsTheHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: the host lock lives in /run/lock; CI runs as root")
	}
	// flock(1) takes the same flock(2) lock a run takes.
	holder := exec.Command("flock", hostlock.Path, "sleep", "30")
	if err := holder.Start(); err != nil {
		t.Fatalf("flock: %v", err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	time.Sleep(300 * time.Millisecond)
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := clean(context.Background(), slog.New(slog.DiscardHandler), []string{dir})
	if !errors.Is(err, hostlock.ErrHostInUse) || skewrun.ExitCode(infrastructure(err)) != skewrun.ExitInvalid {
		t.Fatalf("clean while the host is held = %v (exit %d); want a refusal, exit 2", err, skewrun.ExitCode(infrastructure(err)))
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("a refused clean touched %s: %v", dir, err)
	}
}
