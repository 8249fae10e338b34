package skewrun

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// prefetchRunID stands in for a run ID while Prefetch makes providers:
// they need one, and create nothing with it.
const prefetchRunID = "prefetch"

// Prefetch builds, or finds in the cache, every binary a run of o would
// use: its kubelets and what its provider's Up would build
// (capabilities.WithPrefetch: control plane, containerd, node image), so
// that a suite can pay for cold builds once, before the first spec's
// deadline starts. It makes nothing else: no cluster, no run directory, no
// host lock. Its errors are classified as Run's are (bad settings exit 2).
func (o Options) Prefetch(ctx context.Context) error {
	v, err := validate(o)
	if err != nil {
		return err
	}
	start := time.Now()
	kubelets, err := resolveKubelets(ctx, v)
	if err != nil {
		return err
	}
	c, err := newRunCluster(v, prefetchRunID, kubelets[:1])
	if err != nil {
		return err
	}
	if pf, ok := c.Provider.(capabilities.WithPrefetch); ok {
		if err := pf.Prefetch(ctx); err != nil {
			return classify(fmt.Errorf("prefetch the %s cluster's binaries for API server v%s: %w", c.Provider.Name(), v.APIServer, err), exitcode.ErrInfrastructure)
		}
	}
	v.Options.Logger.Info("binaries ready", "plan", v.Plan.String(), "provider", v.Options.Provider, "took", time.Since(start).Round(time.Second))
	return nil
}
