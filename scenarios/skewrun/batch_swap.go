package skewrun

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/skewtest/clusters/timeouts"
	"sigs.k8s.io/skewtest/scenarios/matrix"
)

// swapReadyTimeout bounds how long a clean node's kubelet, swapped
// between two runs of a batch, gets to be Ready at its version and
// answer: as long as a run's own hop gives it.
const swapReadyTimeout = 2 * time.Minute

// swapKubelet puts the first kubelet of j on slot s, whose node the run
// before left clean (nodeAfter): stop, swap, start, and wait until the
// node is Ready at that version and its kubelet answers. A node that runs
// no pod of a run is where a batch may change kubelets at no cost to any
// verdict, as the cluster's bring-up put the first one there.
func (b *batch) swapKubelet(ctx context.Context, c *runCluster, s *slot, j *batchJob) error {
	start := time.Now()
	bin := j.kubelets[0]
	if err := s.node.StopKubelet(ctx); err != nil {
		return err
	}
	if err := s.node.SwapKubelet(ctx, bin); err != nil {
		return err
	}
	if err := s.node.StartKubelet(ctx); err != nil {
		return err
	}
	rc, err := c.Provider.RESTConfig()
	if err != nil {
		return err
	}
	usable, err := matrix.NodeUsable(rc, timeouts.Scale(swapReadyTimeout, b.o.TimeoutFactor))
	if err != nil {
		return err
	}
	if err := usable(ctx, s.node, bin.Version); err != nil {
		return fmt.Errorf("after swapping in kubelet %s from %s: %w", bin.Version, bin.Source, err)
	}
	j.log().Info("batch node's kubelet swapped for the run's first", "node", s.node.String(), "kubelet", bin.Version, "source", bin.Source, "took", time.Since(start).Round(100*time.Millisecond))
	return nil
}
