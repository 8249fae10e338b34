package kind

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/sysctl"
)

// fakeKernel points the sysctl package at a directory holding settings,
// as /proc/sys would, until the test ends.
func fakeKernel(t *testing.T, settings map[string]string) {
	t.Helper()
	sysctl.ProcSys = t.TempDir()
	t.Cleanup(func() { sysctl.ProcSys = "/proc/sys" })
	for k, v := range settings {
		if err := os.MkdirAll(filepath.Dir(settingPath(k)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := sysctl.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
}

func settingPath(key string) string {
	return filepath.Join(sysctl.ProcSys, strings.ReplaceAll(key, ".", "/"))
}

// The host's settings before the run, and what a kind node's privileged
// kubelet sets them to (sysctl.RunValues).
var (
	hostBefore = map[string]string{"kernel.panic": "0", "kernel.panic_on_oops": "0", "vm.overcommit_memory": "0"}
	byKubelet  = map[string]string{"kernel.panic": "10", "kernel.panic_on_oops": "1", "vm.overcommit_memory": "1"}
)

// A cluster on the host's Docker leaves the host's kernel settings as it
// found them, by Down and by clean after a kill alike: each setting its
// nodes' kubelets changed goes back, while one someone else set since to
// another value is left theirs. A private dockerd's run records nothing
// here (the daemon's own state does).
func TestHostDockerRestoresKernelSettings(t *testing.T) {
	old := deleteHostCluster
	deleteHostCluster = func(context.Context, string, string) error { return nil }
	t.Cleanup(func() { deleteHostCluster = old })
	for _, how := range []string{"Down", "clean"} {
		t.Run(how, func(t *testing.T) {
			fakeKernel(t, hostBefore)
			p, err := New(Config{RunID: "20261206-010000-ef56", RunRoot: t.TempDir(), APIServerVersion: version.MustParseGeneric("1.36.0"),
				Kubelets: []binaries.Binary{{Component: "kubelet", Version: "v1.36.0", Path: "/nonexistent/kubelet"}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(p.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := writeState(p.dir, runState(p.cfg.RunID, p.name, true)); err != nil {
				t.Fatal(err)
			}
			for k, v := range byKubelet {
				if err := sysctl.Set(k, v); err != nil {
					t.Fatal(err)
				}
			}
			// Someone else's, since the run's kubelet set it.
			if err := sysctl.Set("kernel.panic", "30"); err != nil {
				t.Fatal(err)
			}
			if how == "Down" {
				err = p.Down(context.Background())
			} else {
				err = Clean(context.Background(), p.dir)
			}
			if err != nil {
				t.Fatal(err)
			}
			want := maps.Clone(hostBefore)
			want["kernel.panic"] = "30"
			if got := sysctl.Read(sysctl.Keys); !maps.Equal(got, want) {
				t.Errorf("after %s the host's settings are %v, want %v", how, got, want)
			}
			if _, err := os.Stat(p.dir); !os.IsNotExist(err) {
				t.Errorf("the run directory after %s: %v", how, err)
			}
		})
	}
	t.Run("private dockerd", func(t *testing.T) {
		fakeKernel(t, hostBefore)
		if s := runState("r", "c", false); s.Sysctls != nil {
			t.Errorf("a private dockerd's run recorded %v in its kind state", s.Sysctls)
		}
	})
}
