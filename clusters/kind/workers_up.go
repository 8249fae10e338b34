package kind

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apimachinerywait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"

	"sigs.k8s.io/skewtest/clusters/conditions"
	"sigs.k8s.io/skewtest/clusters/internal/images"
)

// This file holds the bring-up steps done on every worker, at once.

// findWorkers finds the workers of the cluster kp created, in the order of
// cfg.Kubelets, for TestNodes.
func (p *Provider) findWorkers(kp *kindcluster.Provider) error {
	all, err := kp.ListNodes(p.name)
	if err != nil {
		return err
	}
	kindWorkers, err := workersOf(p.name, all)
	if err != nil {
		return err
	}
	if len(kindWorkers) != len(p.cfg.Kubelets) {
		return fmt.Errorf("kind provider: cluster %s has %d workers, want %d", p.name, len(kindWorkers), len(p.cfg.Kubelets))
	}
	workers := make([]*Node, len(kindWorkers))
	for i, n := range kindWorkers {
		workers[i] = &Node{kind: n}
	}
	p.mu.Lock()
	p.workers = workers
	p.mu.Unlock()
	return nil
}

// eachWorker runs fn on every worker (i is its index in cfg.Kubelets) at
// once, as eachNode does.
func (p *Provider) eachWorker(ctx context.Context, fn func(ctx context.Context, i int, w *Node) error) error {
	p.mu.Lock()
	workers := append([]*Node(nil), p.workers...)
	p.mu.Unlock()
	return eachNode(ctx, workers, fn)
}

// eachNode runs fn on every node of workers at once and returns their
// errors joined. The first error cancels the context the others run with,
// so a failed bring-up does not wait out their timeouts.
func eachNode(ctx context.Context, workers []*Node, fn func(ctx context.Context, i int, w *Node) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
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

// workerReadyTimeout bounds the wait for a worker Ready at its first
// kubelet after the swap (scaled by SKEWTEST_TIMEOUT_FACTOR).
const workerReadyTimeout = 2 * time.Minute

// initialKubelets swaps each worker's kubelet to its first one
// (cfg.Kubelets, in the workers' order) where it differs from the node
// image's, on the workers at once, and waits until each is Ready at it
// through the API server, as Up promises.
func (p *Provider) initialKubelets(ctx context.Context) error {
	own := "v" + p.cfg.APIServerVersion.String()
	cfg, err := p.RESTConfig()
	if err != nil {
		return err
	}
	res, err := resources.New(cfg)
	if err != nil {
		return err
	}
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
		if err := w.StartKubelet(ctx); err != nil {
			return err
		}
		if err := conditions.WaitNodeReady(ctx, res, w.String(), k.Version, p.scaled(workerReadyTimeout)); err != nil {
			return fmt.Errorf("kind provider: %w", err)
		}
		return nil
	})
}

// nodesReadyTimeout bounds the wait for every node Ready after the
// bring-up's steps (scaled by SKEWTEST_TIMEOUT_FACTOR); the workers
// usually are by then, the CSI driver's pods run on them.
const nodesReadyTimeout = 3 * time.Minute

// nodesReady waits until every node of the cluster, the control plane's
// too, is Ready, as Up promises, polling the API server.
func (p *Provider) nodesReady(ctx context.Context) error {
	cfg, err := p.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var notReady []string
	err = apimachinerywait.PollUntilContextTimeout(ctx, nodesReadyPoll, p.scaled(nodesReadyTimeout), true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			notReady = []string{err.Error()}
			return false, nil
		}
		notReady = notReady[:0]
		for _, n := range list.Items {
			if !ready(&n) {
				notReady = append(notReady, conditions.NodeStatus(&n))
			}
		}
		return len(list.Items) == len(p.cfg.Kubelets)+1 && len(notReady) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("kind provider: the nodes of %s are not Ready: %w (not Ready: %s)", p.name, err, strings.Join(notReady, ", "))
	}
	return nil
}

// nodesReadyPoll is how often nodesReady lists the nodes.
const nodesReadyPoll = 250 * time.Millisecond

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
