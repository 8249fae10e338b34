package kind

import (
	"context"
	"errors"
	"fmt"
	"os"

	kindcluster "sigs.k8s.io/kind/pkg/cluster"

	"sigs.k8s.io/skewtest/clusters/internal/statefile"
)

// State is what a kind run records in its directory before it creates its
// cluster, so that `skewtest clean` after a killed run finds the cluster:
// on a private dockerd, stopping the daemon takes the nodes with it; on
// the host's Docker, only deleting the cluster by name does.
type State struct {
	RunID   string `json:"runID"`
	Cluster string `json:"cluster"`
	// HostDocker says the cluster's nodes run on the host's own Docker.
	HostDocker bool `json:"hostDocker,omitempty"`
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
// recorded in dir, if it did.
func cleanHostCluster(ctx context.Context, dir, kubeconfig string) error {
	s, err := readState(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !s.HostDocker || s.Cluster == "" {
		return nil
	}
	if err := deleteHostCluster(ctx, s.Cluster, kubeconfig); err != nil {
		return fmt.Errorf("delete kind cluster %s from the host's Docker: %w", s.Cluster, err)
	}
	return nil
}
