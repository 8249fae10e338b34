package mutation

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// Bad settings are refused before the first kubelet is built: nothing is
// written to the cache, and the error is bad input (exit 2).
func TestRunValidatesBeforeBuilding(t *testing.T) {
	cache := t.TempDir()
	o := Options{Mutants: "block-never-scanned", Run: skewrun.Options{
		CacheDir:     cache,
		ArtifactsDir: t.TempDir(),
		BatchNodes:   1000,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}}
	_, err := Run(t.Context(), o)
	if !errors.Is(err, exitcode.ErrInvalid) {
		t.Fatalf("BATCH_NODES=1000: got %v, want bad input", err)
	}
	if exitcode.Of(err) != 2 {
		t.Errorf("exit code %d, want 2: %v", exitcode.Of(err), err)
	}
	left, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("the cache has %s after a refused run", e.Name())
	}
}

// A mutant that leaks fails its run when the cleanup bound ends: the
// measurement's is shorter than a run's default, scaled as every wait
// is, and CLEANUP_TIMEOUT still wins.
func TestRunOptionsCleanupTimeout(t *testing.T) {
	if got := runOptions(skewrun.Options{}).CleanupTimeout; got != CleanupTimeout || got >= 3*time.Minute {
		t.Errorf("the measurement's cleanup bound = %s, want %s, below a run's 3m", got, CleanupTimeout)
	}
	if got := runOptions(skewrun.Options{TimeoutFactor: 10}).CleanupTimeout; got != 10*CleanupTimeout {
		t.Errorf("under SKEWTEST_TIMEOUT_FACTOR=10 the bound = %s, want %s", got, 10*CleanupTimeout)
	}
	if got := runOptions(skewrun.Options{CleanupTimeout: 5 * time.Minute}).CleanupTimeout; got != 5*time.Minute {
		t.Errorf("CLEANUP_TIMEOUT=5m gave %s", got)
	}
}
