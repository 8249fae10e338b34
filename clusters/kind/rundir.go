package kind

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"sigs.k8s.io/skewtest/clusters/kind/internal/dockerd"
)

// RunDirPrefix names a kind run's directory, kind-<run-id>.
const RunDirPrefix = "kind-"

// clusterName is the kind cluster of run runID, as New names it.
func clusterName(runID string) string {
	short := runID
	if len(short) > 4 {
		short = short[len(short)-4:]
	}
	return "skewtest-" + short
}

// CheckRunDir tells whether dir is a kind run's directory, the only kind
// `skewtest clean` may remove when it looks through the run roots: named
// kind-<run ID>, with the run's own state naming that run (StateFile), or
// the state of its private dockerd in dir/docker
// naming that directory (or there but damaged, which Clean handles
// without removing anything), or, for a run on the host's Docker, a
// kubeconfig naming the run's cluster. nil when it is one; an error
// saying why not otherwise.
func CheckRunDir(dir string) error {
	dir = filepath.Clean(dir)
	runID, ok := strings.CutPrefix(filepath.Base(dir), RunDirPrefix)
	if !ok || runID == "" {
		return fmt.Errorf("%s is not named %s<run ID>", dir, RunDirPrefix)
	}
	if st, err := readState(dir); err == nil && st.RunID == runID {
		return nil
	}
	err := dockerd.CheckState(filepath.Join(dir, "docker"))
	if err == nil || errors.Is(err, dockerd.ErrDamagedState) {
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg, kerr := clientcmd.LoadFromFile(kubeconfig)
	if kerr != nil {
		return fmt.Errorf("no kind run state: no private dockerd's state (%v), and no kubeconfig (%v)", err, kerr)
	}
	if want := "kind-" + clusterName(runID); cfg.Contexts[want] == nil {
		return fmt.Errorf("no kind run state: no private dockerd's state, and %s has no context %s", kubeconfig, want)
	}
	return nil
}
