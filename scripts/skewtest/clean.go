package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/clusters/local"
	"sigs.k8s.io/skewtest/clusters/vm"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// clean undoes what runs left behind when the harness itself was killed
// (SIGKILL, a lost machine): it removes local and kind runs, puts back the
// own kubelet of each node an existing-cluster run changed, and removes the
// state of VM guests whose qemu is gone (running guests are left to
// skewtest vm down). It cleans every run directory under the run roots, or
// the ones given.
//
// It refuses, at once, while a run holds the host: that run's directory is
// live, and cleaning it would kill the run.
//
// Given only existing-cluster runs' directories it changes nothing on this
// host, so it goes ahead while a run holds the host.
func clean(ctx context.Context, logger *slog.Logger, dirs []string) error {
	cleansHost := len(dirs) == 0 || slices.ContainsFunc(dirs, clusters.CleansHost)
	if cleansHost {
		lock, err := hostlock.TryAcquire(hostlock.Path, hostlock.Holder{RunID: "skewtest clean"})
		if err != nil {
			return fmt.Errorf("%w: not cleaning: %w", skewrun.ErrInvalid, err)
		}
		defer lock.Release()
	}
	if len(dirs) == 0 {
		removed, err := vm.CleanStale("", logger)
		if err != nil {
			return err
		}
		if len(removed) > 0 {
			fmt.Printf("removed %d stale VM instances: %v\n", len(removed), removed)
		}
	}
	if len(dirs) == 0 {
		for _, root := range clusters.RunRoots() {
			entries, err := os.ReadDir(root)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			for _, e := range entries {
				if e.IsDir() {
					dirs = append(dirs, filepath.Join(root, e.Name()))
				}
			}
		}
	}
	var errs []error
	for _, d := range dirs {
		logger.Info("cleaning", "dir", d)
		if err := clusters.Clean(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	// Cache entries of runs whose directories are gone: left by runs made
	// before teardown removed all of its own.
	if !cleansHost {
		// Nothing of this host's.
	} else if n, err := local.RemoveOrphanedCNIEntries(local.DefaultRunRoot); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		logger.Info("removed CNI cache entries of runs that are gone", "entries", n)
	}
	if len(errs) == 0 {
		fmt.Printf("cleaned %d run directories\n", len(dirs))
	}
	return errors.Join(errs...)
}
