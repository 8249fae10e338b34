package kind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

	"sigs.k8s.io/skewtest/clusters/internal/images"
)

// This file holds the bring-up steps done on every worker, at once.

// eachWorker runs fn on every worker (i is its index in cfg.Kubelets) at
// once and returns their errors joined. The first error cancels the
// context the others run with, so a failed bring-up does not wait out
// their timeouts.
func (p *Provider) eachWorker(ctx context.Context, fn func(ctx context.Context, i int, w *Node) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p.mu.Lock()
	workers := append([]*Node(nil), p.workers...)
	p.mu.Unlock()
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() {
			if errs[i] = fn(ctx, i, w); errs[i] != nil {
				cancel(errs[i])
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// imageTarballs builds the images every worker needs: the workload's, and
// skewtest's CSI driver's when it is the driver.
func (p *Provider) imageTarballs(ctx context.Context) ([]string, error) {
	dir := filepath.Join(p.dir, "images")
	workload, err := images.Build(ctx, dir)
	if err != nil {
		return nil, err
	}
	tarballs := []string{workload}
	if p.csiDriver() == CSISkewtest {
		csi, err := images.BuildCSIDriver(ctx, dir)
		if err != nil {
			return nil, err
		}
		tarballs = append(tarballs, csi)
	}
	return tarballs, nil
}

// loadImages puts tarballs into every worker's containerd, as `kind load
// image-archive` does, into the workers at once.
func (p *Provider) loadImages(ctx context.Context, tarballs []string) error {
	return p.eachWorker(ctx, func(_ context.Context, _ int, w *Node) error {
		for _, tarball := range tarballs {
			f, err := os.Open(tarball)
			if err != nil {
				return err
			}
			err = nodeutils.LoadImageArchive(w.kind, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("kind provider: load %s into %s: %w", tarball, w, err)
			}
		}
		return nil
	})
}

// initialKubelets swaps each worker's kubelet to its first one
// (cfg.Kubelets, in the workers' order) where it differs from the node
// image's, on the workers at once.
func (p *Provider) initialKubelets(ctx context.Context) error {
	own := "v" + p.cfg.APIServerVersion.String()
	return p.eachWorker(ctx, func(ctx context.Context, i int, w *Node) error {
		k := p.cfg.Kubelets[i]
		if k.Version == own {
			return nil
		}
		if err := w.StopKubelet(ctx); err != nil {
			return err
		}
		if err := w.SwapKubelet(ctx, k); err != nil {
			return err
		}
		return w.StartKubelet(ctx)
	})
}
