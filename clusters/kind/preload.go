package kind

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
)

// The images the workers need are built, and loaded into each worker's
// containerd, while kind creates the cluster: a worker's containerd runs
// a second or two after kind starts its node container, and then waits
// for kubeadm init on the control plane and its own join, most of a
// bring-up. Loaded after the cluster is up, they took a second per
// worker, all workers at once on 2 cores.

const (
	// preloadPoll is how often the preload looks for the worker
	// containers and for their containerd.
	preloadPoll = 250 * time.Millisecond
	// workerContainersTimeout bounds the wait for kind to start the
	// workers' node containers, and containerdTimeout the wait for each
	// one's containerd (scaled by SKEWTEST_TIMEOUT_FACTOR).
	workerContainersTimeout = 3 * time.Minute
	containerdTimeout       = time.Minute
)

// preloadImages loads the images every worker needs into each worker of
// the cluster kp is creating, as soon as it can; the channel gets the
// result once. Up cancels ctx, and waits, when the bring-up fails first.
func (p *Provider) preloadImages(ctx context.Context, kp *kindcluster.Provider) <-chan error {
	ch := make(chan error, 1)
	go func() {
		tarballs, err := p.imageTarballs(ctx)
		if err == nil {
			err = p.preload(ctx, kp, tarballs)
		}
		ch <- err
	}()
	return ch
}

func (p *Provider) preload(ctx context.Context, kp *kindcluster.Provider, tarballs []string) error {
	workers, err := p.workerContainers(ctx, kp)
	if err != nil {
		return err
	}
	return eachNode(ctx, workers, func(ctx context.Context, _ int, w *Node) error {
		if err := waitContainerd(ctx, w, p.scaled(containerdTimeout)); err != nil {
			return err
		}
		return loadImages(w, tarballs)
	})
}

// workerContainers waits until kind has started the node container of
// every worker and returns them, named as kind names them (workersOf
// orders them the same way once the cluster is up).
func (p *Provider) workerContainers(ctx context.Context, kp *kindcluster.Provider) ([]*Node, error) {
	want := len(p.cfg.Kubelets)
	ctx, cancel := context.WithTimeout(ctx, p.scaled(workerContainersTimeout))
	defer cancel()
	for {
		all, err := kp.ListNodes(p.name)
		if err != nil {
			return nil, fmt.Errorf("kind provider: list the nodes of %s: %w", p.name, err)
		}
		var workers []*Node
		for _, n := range all {
			if _, ok := workerNumber(p.name, n.String()); ok {
				workers = append(workers, &Node{kind: n})
			}
		}
		if len(workers) == want {
			slices.SortFunc(workers, func(a, b *Node) int {
				na, _ := workerNumber(p.name, a.String())
				nb, _ := workerNumber(p.name, b.String())
				return na - nb
			})
			return workers, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kind provider: %d of %d worker containers of %s started: %w", len(workers), want, p.name, ctx.Err())
		case <-time.After(preloadPoll):
		}
	}
}

// waitContainerd waits until the containerd in w's node container answers,
// for at most timeout.
func waitContainerd(ctx context.Context, w *Node, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := w.kind.CommandContext(ctx, "ctr", "--namespace=k8s.io", "version").Run()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kind provider: containerd in %s does not answer: %w (last ctr version: %v)", w, ctx.Err(), err)
		case <-time.After(preloadPoll):
		}
	}
}

// loadImages puts tarballs into w's containerd, as `kind load
// image-archive` does.
func loadImages(w *Node, tarballs []string) error {
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
}
