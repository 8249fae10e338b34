package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/clusters/vm"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// cleanCmd is clean, a failure of which is infrastructure (exit 3).
func cleanCmd(ctx context.Context, s streams, args []string) error {
	return infrastructure(clean(ctx, s.logger, args))
}

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
//
// It cleans only directories that hold a recognisable state of their
// provider (clusters.Inspect), and never an existing-cluster run whose
// process still runs (such runs take no host lock); the others are named
// and left alone. An existing-cluster run whose liveness cannot be told
// (a state file from before skewtest recorded the process) is cleaned
// only when its directory is given.
func clean(ctx context.Context, logger *slog.Logger, dirs []string) error {
	cleansHost := len(dirs) == 0 || slices.ContainsFunc(dirs, clusters.CleansHost)
	if cleansHost {
		lock, err := hostlock.TryAcquire(hostlock.Path(), hostlock.Holder{RunID: "skewtest clean"})
		if err != nil {
			return fmt.Errorf("%w: not cleaning: %w", exitcode.ErrInvalid, err)
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
	var n int
	var err error
	if len(dirs) == 0 {
		n, err = cleanRunRoots(ctx, logger, os.Stdout, clusters.RunRoots())
	} else {
		n, err = cleanRunDirs(ctx, logger, os.Stdout, dirs, true)
	}
	errs := []error{err}
	// What runs left outside their directories once those are gone (local:
	// CNI cache entries of runs made before teardown removed all of its
	// own).
	if !cleansHost {
		// Nothing of this host's.
	} else if err := clusters.RemoveOrphans(logger); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("cleaned %d run directories\n", n)
	return nil
}

// cleanRunRoots cleans the run directories under roots (cleanRunDirs) and
// returns how many it cleaned.
func cleanRunRoots(ctx context.Context, logger *slog.Logger, w io.Writer, roots []string) (int, error) {
	dirs, err := clusters.DirsUnder(roots)
	if err != nil {
		return 0, err
	}
	return cleanRunDirs(ctx, logger, w, dirs, false)
}

// cleanRunDirs cleans each of dirs that clusters.Inspect takes for a run
// that is not live, and names the others on w, leaving them alone; given
// says the user named dirs, which makes leaving one alone an error and
// cleans an existing-cluster run whose liveness cannot be told. It returns
// how many it cleaned.
func cleanRunDirs(ctx context.Context, logger *slog.Logger, w io.Writer, dirs []string, given bool) (int, error) {
	var errs []error
	n := 0
	for _, d := range dirs {
		r := clusters.Inspect(d)
		var left error
		switch {
		case r.NotARun != nil:
			left = fmt.Errorf("not a skewtest run, left alone: %s (%v)", d, r.NotARun)
		case r.Live != "":
			left = fmt.Errorf("live run, left alone: %s (%s)", d, r.Live)
		case r.Undecided != "" && !given:
			fmt.Fprintf(w, "cannot tell whether the run is live, left alone: %s (%s); if it is not, run `skewtest clean %s`\n", d, r.Undecided, d)
			continue
		}
		if left != nil {
			fmt.Fprintln(w, left)
			if given {
				errs = append(errs, left)
			}
			continue
		}
		logger.Info("cleaning", "dir", d)
		if err := clusters.Clean(ctx, d); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
