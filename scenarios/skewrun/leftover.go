package skewrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/timeouts"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
)

// madeInCluster is a scenario that makes things in the cluster and may
// leave some (the namespace it made; after a failure or an interrupt, its
// workload too): reconstruction.Scenario.
type madeInCluster interface {
	// LeftInCluster reports whether something is left to remove.
	LeftInCluster() bool
	// Workload names what is left, for messages.
	Workload() string
	// Remove removes it within timeout.
	Remove(ctx context.Context, timeout time.Duration) error
}

// leave tracks a scenario, for finishRun to remove from a shared cluster
// whatever it left there. Scenarios of one run may start at once (a
// matrix's trails).
func (c *runCluster) leave(sc madeInCluster) {
	c.leftMu.Lock()
	defer c.leftMu.Unlock()
	c.left = append(c.left, sc)
}

// newScenario makes the reconstruction scenario of cfg on node, as every
// scenario of a run is made (a sign-off run's, a batch job's, a matrix
// trail's): the provider keeps what it makes in the cluster where
// `skewtest clean` finds it, when it keeps such records
// (capabilities.WithWorkloadRecord), and finishRun removes what it left in a
// shared cluster.
func (c *runCluster) newScenario(cfg reconstruction.Config, cluster reconstruction.Cluster, node nodes.Node, run *reports.Run) (*reconstruction.Scenario, error) {
	if wr, ok := c.Provider.(capabilities.WithWorkloadRecord); ok {
		cfg.OnMade = wr.RecordWorkload
	}
	sc, err := reconstruction.New(cfg, cluster, node, run)
	if err != nil {
		return nil, err
	}
	c.noteNamespace(sc.Namespace())
	c.leave(sc)
	return sc, nil
}

// noteNamespace records ns as one the run's scenarios put a workload in,
// before they make anything there.
func (c *runCluster) noteNamespace(ns string) {
	c.leftMu.Lock()
	defer c.leftMu.Unlock()
	if !slices.Contains(c.namespaces, ns) {
		c.namespaces = append(c.namespaces, ns)
	}
}

// removeLeftWorkloads removes, from a cluster the run shares with its
// owner, what the scenarios left there; a cluster of the run's own goes
// with its Down. It runs after Down, which put the node's
// own kubelet back to finish the pods. Each removal is bounded by
// timeouts.Teardown, scaled; the error is exitcode.ErrInfrastructure and names
// what is left.
func (c *runCluster) removeLeftWorkloads(ctx context.Context) error {
	sp, ok := c.Provider.(capabilities.WithSharedCluster)
	if !ok {
		return nil
	}
	c.leftMu.Lock()
	left := c.left
	c.left = nil
	c.leftMu.Unlock()
	timeout := timeouts.Scale(timeouts.Teardown, c.v.Options.TimeoutFactor)
	var errs []error
	for _, w := range left {
		if !w.LeftInCluster() {
			continue
		}
		name := w.Workload()
		start := time.Now()
		c.v.Options.Logger.Info("removing what the run made in the shared cluster", "workload", name, "cluster", sp.SharedCluster(), "timeout", timeout)
		if err := w.Remove(ctx, timeout); err != nil {
			errs = append(errs, fmt.Errorf("remove %s from %s: %w", name, sp.SharedCluster(), err))
			continue
		}
		c.v.Options.Logger.Info("removed", "workload", name, "took", time.Since(start).Round(10*time.Millisecond))
	}
	if len(errs) > 0 {
		return classify(errors.Join(errs...), exitcode.ErrInfrastructure)
	}
	return nil
}
