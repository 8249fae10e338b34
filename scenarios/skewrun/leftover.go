package skewrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/timeouts"
)

// leftWorkload is what a scenario left in the cluster (the namespace it
// made; after a failure or an interrupt, its workload too), and how to
// remove it.
type leftWorkload struct {
	name   string
	remove func(ctx context.Context, timeout time.Duration) error
}

// leave records a workload a scenario left, for Finish to remove from a
// shared cluster. Scenarios of one run may end at once (a matrix's trails).
func (c *Cluster) leave(name string, remove func(context.Context, time.Duration) error) {
	c.leftMu.Lock()
	defer c.leftMu.Unlock()
	c.left = append(c.left, leftWorkload{name: name, remove: remove})
}

// noteNamespace records ns as one the run's scenarios put a workload in,
// before they make anything there.
func (c *Cluster) noteNamespace(ns string) {
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
// timeouts.Teardown, scaled; the error is ErrInfrastructure and names
// what is left.
func (c *Cluster) removeLeftWorkloads(ctx context.Context) error {
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
		start := time.Now()
		c.v.Options.Logger.Info("removing what the run made in the shared cluster", "workload", w.name, "cluster", sp.SharedCluster(), "timeout", timeout)
		if err := w.remove(ctx, timeout); err != nil {
			errs = append(errs, fmt.Errorf("remove %s from %s: %w", w.name, sp.SharedCluster(), err))
			continue
		}
		c.v.Options.Logger.Info("removed", "workload", w.name, "took", time.Since(start).Round(10*time.Millisecond))
	}
	if len(errs) > 0 {
		return classify(errors.Join(errs...), ErrInfrastructure)
	}
	return nil
}
