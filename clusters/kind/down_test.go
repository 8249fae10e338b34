package kind

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/kind/internal/dockerd"
)

// When stopping the private dockerd fails, Down keeps the run directory,
// which holds the dockerd's state (what the host was like before) that
// `skewtest clean` needs, and says where it is; a second Down that
// succeeds removes it.
func TestDownKeepsTheRunDirWhenTeardownFails(t *testing.T) {
	p, err := New(Config{RunID: "20000101-000000-tzqx", RunRoot: t.TempDir(), APIServerVersion: version.MustParseGeneric("1.36.0"),
		Kubelets: []binaries.Binary{{Component: "kubelet", Version: "v1.36.0", Path: "/nonexistent/kubelet"}}})
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(p.RunDir(), "docker", "state.json")
	if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A Daemon that is never used: stopDocker stands in for its Stop.
	p.docker = &dockerd.Daemon{}
	old := stopDocker
	t.Cleanup(func() { stopDocker = old })
	stopDocker = func(context.Context, *dockerd.Daemon) error { return errors.New("dockerd survived SIGKILL") }

	err = p.Down(t.Context())
	if err == nil || !strings.Contains(err.Error(), "survived") || !strings.Contains(err.Error(), "skewtest clean "+p.RunDir()) {
		t.Errorf("Down with a failing dockerd stop = %v, want the failure and where the run directory is kept", err)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("Down removed the dockerd state a clean needs: %v", err)
	}

	stopped := false
	stopDocker = func(context.Context, *dockerd.Daemon) error { stopped = true; return nil }
	if err := p.Down(t.Context()); err != nil {
		t.Fatalf("second Down: %v", err)
	}
	if !stopped {
		t.Errorf("the second Down did not try to stop the dockerd again")
	}
	if _, err := os.Stat(p.RunDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run directory still there after a Down that succeeded: %v", err)
	}
}
