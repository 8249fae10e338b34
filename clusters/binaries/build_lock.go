package binaries

import (
	"context"
	"os"
	"path/filepath"

	"sigs.k8s.io/skewtest/clusters/hostlock"
)

// buildLockFile is the lock of one module or tool dir of the cache.
const buildLockFile = "lock"

// buildTmpPrefix names a build's temporary output dir inside a module or
// tool dir; it is renamed into bin only when the build succeeded.
const buildTmpPrefix = "build-"

// lockBuildDir takes dir's build lock, waiting for another process's build
// of the same dir (two runs at once share the cache: its go.mod, go.sum and
// bin). Under the lock the temporary build dirs a killed build left are
// nobody's, so they go. The returned func releases the lock.
func (b *ModuleBuilder) lockBuildDir(ctx context.Context, dir, what string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, buildLockFile)
	f, err := hostlock.Exclusive(ctx, path, func() {
		b.logger().Info("waiting for another skewtest's build of the same module to finish", "module", what, "lock", path)
	})
	if err != nil {
		return nil, err
	}
	stale, _ := filepath.Glob(filepath.Join(dir, buildTmpPrefix+"*"))
	for _, s := range stale {
		if err := os.RemoveAll(s); err != nil {
			f.Close()
			return nil, err
		}
	}
	return func() { f.Close() }, nil
}
