package kops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/procfs"
)

// Down deletes what the run made, after a pass, a failure or an interrupt
// (kubetest2 runs Down from its signal handler too), as kubetest2-kops's
// Down does: it returns at once when kops finds no cluster; otherwise it
// dumps the logs (unless DumpClusterLogs already did), puts kops's own
// kubelet back on the worker, and runs kops delete cluster --yes. Then it
// deletes the state store bucket the run made, sweeps whatever still
// carries the run's tags, writes what the sweep found, and removes the run
// directory. It is safe after a failed or partial Up and more than once.
func (p *provider) Down(ctx context.Context) error {
	st := p.snapshot()
	if st.Tags == nil && !st.Created {
		// Up never got as far as tagging anything.
		return os.RemoveAll(p.cfg.RunDir)
	}
	if err := p.connect(ctx); err != nil {
		return err
	}
	var errs []error
	if st.Created && st.Kops != "" {
		if p.cli == nil {
			p.cli = p.newCLI(st.Kops, st.SSHKey, "")
		}
		exists, err := p.clusterExists(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		if exists {
			p.mu.Lock()
			dumped, n := p.dumped, p.node
			p.mu.Unlock()
			if !dumped && p.cfg.ArtifactsDir != "" {
				if err := p.DumpClusterLogs(ctx, filepath.Join(p.cfg.ArtifactsDir, "logs")); err != nil {
					p.log.Warn("kops: log dump before delete", "err", err)
				}
			}
			if n != nil {
				// A final EBS record after the last hop, then kops's own
				// kubelet back, as the issue asks, before the cluster goes.
				if _, err := p.ebsSnapshot(ctx, n.instance.ID, "at teardown"); err != nil {
					p.log.Warn("kops: EBS evidence at teardown", "err", err)
				}
				if err := n.restore(ctx); err != nil {
					p.log.Warn("kops: put kops's own kubelet back on the worker (the cluster is deleted anyway)", "node", n.String(), "err", err)
				}
			}
			if err := p.deleteCluster(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if st.Bucket != "" {
		if err := deleteBucket(ctx, p.clients.S3, st.Bucket); err != nil {
			errs = append(errs, fmt.Errorf("kops: delete the state store: %w", err))
		} else {
			p.log.Info("state store bucket deleted", "bucket", st.Bucket)
		}
	}
	found, err := p.Sweep(ctx)
	p.mu.Lock()
	p.sweep = found
	p.mu.Unlock()
	if err != nil {
		errs = append(errs, err)
	}
	p.writeArtifacts()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w\nthe run's state is kept in %s: once fixed, `skewtest clean %s` deletes what is left; `make janitor-aws` lists anything tagged %s=%s", err, p.cfg.RunDir, p.cfg.RunDir, tagRunID, p.cfg.RunID)
	}
	return os.RemoveAll(p.cfg.RunDir)
}

// deleteCluster is kops delete cluster --yes, waiting as kubetest2-kops
// does.
func (p *provider) deleteCluster(ctx context.Context) error {
	start := time.Now()
	_, err := p.cli.run(ctx, "delete", "cluster", "--name", p.cfg.ClusterName(), "--yes",
		"--interval", "60s", "--wait", p.cfg.DeleteTimeout.String())
	if err != nil {
		return fmt.Errorf("kops: delete cluster: %w", err)
	}
	p.log.Info("kops delete cluster: done", "cluster", p.cfg.ClusterName(), "took", time.Since(start).Round(time.Second))
	return nil
}

// clean deletes what a killed run, or a cluster kept after a failure, left
// on AWS, from the state in its run directory: `skewtest clean
// <run-dir>`. It needs the same AWS credentials and kops.
func clean(ctx context.Context, dir string) error {
	st, err := readState(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.RemoveAll(dir)
	}
	if err != nil {
		return fmt.Errorf("kops: clean %s: %w", dir, err)
	}
	p, err := newProvider(Config{RunID: st.RunID, Region: st.Region, StateStore: st.StateStore, RunDir: dir, Logger: slog.Default()})
	if err != nil {
		return err
	}
	p.state = *st
	// The clean acts on the run now: a second clean leaves it alone.
	if err := p.updateState(func(s *State) { s.Owner = procfs.Self() }); err != nil {
		return err
	}
	p.log.Info("deleting what a kops run left", "cluster", st.Cluster, "stateStore", st.StateStore)
	ctx, cancel := context.WithTimeout(ctx, p.TeardownTimeout())
	defer cancel()
	return p.Down(ctx)
}
