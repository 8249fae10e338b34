package kind

import (
	"context"
	"fmt"

	"sigs.k8s.io/skewtest/clusters/kind/internal/capshim"
	"sigs.k8s.io/skewtest/clusters/kind/internal/nodeimage"
)

// Prefetch implements capabilities.WithPrefetch: the offline node image
// (Kubernetes, containerd and etcd from Go modules) when Up would
// use it, as Up chooses it (a private dockerd, or KIND_NODE_IMAGE=offline),
// and the runtime shim a private dockerd on this host needs.
func (p *Provider) Prefetch(ctx context.Context) error {
	private, need, err := dockerChoice(ctx)
	if err != nil {
		return err
	}
	if need {
		if _, err := capshim.Build(ctx, p.cfg.CacheDir); err != nil {
			return fmt.Errorf("kind provider: build the runtime shim: %w", err)
		}
	}
	if _, offline := chooseNodeImage(p.cfg.NodeImage, private, p.cfg.APIServerVersion); !offline {
		return nil
	}
	if _, err := nodeimage.Build(ctx, nodeimage.Config{Version: p.cfg.APIServerVersion, CacheDir: p.cfg.CacheDir, Logger: p.logger}); err != nil {
		return fmt.Errorf("kind provider: build the node image: %w", err)
	}
	return nil
}
