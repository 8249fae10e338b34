// Package binariestest has helpers for tests that resolve kubelet
// binaries without building or downloading one.
package binariestest

import (
	"os"
	"path/filepath"
	"testing"
)

// FakeKubelet writes an executable that answers --version like a kubelet
// of version v (such as "v1.36.3") and fails any other call, in a
// directory of its own, and returns its path.
func FakeKubelet(t testing.TB, v string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'Kubernetes " + v + "'; exit 0; fi\necho unexpected call: \"$@\" >&2\nexit 1\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}
