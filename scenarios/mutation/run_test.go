package mutation

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"

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
	if !errors.Is(err, skewrun.ErrInvalid) {
		t.Fatalf("BATCH_NODES=1000: got %v, want bad input", err)
	}
	if skewrun.ExitCode(err) != 2 {
		t.Errorf("exit code %d, want 2: %v", skewrun.ExitCode(err), err)
	}
	left, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("the cache has %s after a refused run", e.Name())
	}
}
