package kind

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	kindcluster "sigs.k8s.io/kind/pkg/cluster"

	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/clusters/internal/statefile"
	"sigs.k8s.io/skewtest/clusters/internal/sysctl"
)

// State is what a kind run records in its directory before it creates its
// cluster, so that `skewtest clean` after a killed run finds the cluster:
// on a private dockerd, stopping the daemon takes the nodes with it; on
// the host's Docker, only deleting the cluster by name does, and the
// host's kernel settings the nodes changed are the run's to put back.
type State struct {
	RunID   string `json:"runID"`
	Cluster string `json:"cluster"`
	// HostDocker says the cluster's nodes run on the host's own Docker.
	HostDocker bool `json:"hostDocker,omitempty"`
	// Sysctls are, on the host's Docker, the kernel settings
	// (sysctl.Keys) before the cluster existed: its nodes' kubelets run
	// privileged and set the host's kernel.panic, kernel.panic_on_oops
	// and vm.overcommit_memory. (On a private dockerd, the daemon's own
	// state records them.) BootID is the boot they were read in.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	BootID  string            `json:"bootID,omitempty"`
}

// runState is what a run records before it creates its cluster; on the
// host's Docker, with the host's kernel settings.
func runState(runID, cluster string, hostDocker bool) State {
	s := State{RunID: runID, Cluster: cluster, HostDocker: hostDocker}
	if hostDocker {
		s.Sysctls, s.BootID = sysctl.Read(sysctl.Keys), procfs.BootID()
	}
	return s
}

// StateFile is the state's file name in the run directory.
const StateFile = "kind.json"

func writeState(dir string, s State) error {
	if err := statefile.Write(dir, StateFile, s, 0o644); err != nil {
		return fmt.Errorf("kind provider: write the run's state: %w", err)
	}
	return nil
}

// readState is dir's State; a missing file's error satisfies
// errors.Is(err, os.ErrNotExist).
func readState(dir string) (State, error) {
	var s State
	err := statefile.Read(dir, StateFile, &s)
	return s, err
}

// deleteHostCluster deletes kind cluster name from the host's Docker (its
// node containers, by kind's cluster label), and its context from
// kubeconfig; a variable so that tests need no Docker.
var deleteHostCluster = func(_ context.Context, name, kubeconfig string) error {
	return kindcluster.NewProvider(kindcluster.ProviderWithDocker()).Delete(name, kubeconfig)
}

// cleanHostCluster deletes the cluster a run on the host's Docker
// recorded in dir, if it did, and then writes back the kernel settings
// its nodes changed (restoreHostSettings).
func cleanHostCluster(ctx context.Context, dir, kubeconfig string, log *slog.Logger) error {
	s, err := readState(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !s.HostDocker {
		return nil
	}
	if s.Cluster != "" {
		if err := deleteHostCluster(ctx, s.Cluster, kubeconfig); err != nil {
			return fmt.Errorf("delete kind cluster %s from the host's Docker: %w", s.Cluster, err)
		}
	}
	return restoreHostSettings(s, log)
}

// restoreHostSettings writes back the kernel settings a run on the host's
// Docker recorded before its cluster existed, under the rules a private
// dockerd's teardown follows (sysctl.Restore): only a setting that still
// holds the value the run's nodes set goes back, and nothing after a
// reboot, which took the run's values with it. The cluster must be gone:
// its kubelets would set them again.
func restoreHostSettings(s State, log *slog.Logger) error {
	if !s.HostDocker || len(s.Sysctls) == 0 {
		return nil
	}
	if s.BootID != "" && s.BootID != procfs.BootID() {
		log.Warn("the host rebooted since the run recorded its kernel settings: what they are now is left alone", "cluster", s.Cluster, "bootID", s.BootID)
		return nil
	}
	if err := sysctl.RestoreLogged(s.Sysctls, log, "cluster", s.Cluster); err != nil {
		return fmt.Errorf("kind provider: restore the host's kernel settings: %w", err)
	}
	return nil
}
