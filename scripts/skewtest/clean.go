package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"sigs.k8s.io/skewtest/clusters"
)

// clean undoes what runs left behind when the harness itself was killed
// (SIGKILL, a lost machine): it removes local and kind runs, and puts back
// the own kubelet of each node an existing-cluster run changed. It cleans
// every run directory under the run roots, or the ones given.
func clean(ctx context.Context, logger *slog.Logger, dirs []string) error {
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
		if len(dirs) == 0 {
			fmt.Println("nothing to clean")
			return nil
		}
	}
	var errs []error
	for _, d := range dirs {
		logger.Info("cleaning", "dir", d)
		if err := clusters.Clean(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		fmt.Printf("cleaned %d run directories\n", len(dirs))
	}
	return errors.Join(errs...)
}
