// Command skewtest runs skew runs outside Ginkgo and the chores around
// them:
//
//	skewtest run                 one run, configured by the same environment
//	                             variables as make test-skew (PLAN, PROVIDER, ...)
//	skewtest matrix              the matrix tour (MATRIX, MATRIX_NODES, ...),
//	                             as make test-matrix runs it
//	skewtest catalogue           every catalogue entry that runs on PROVIDER,
//	                             as one batch on BATCH_NODES nodes at once
//	skewtest mutants             the mutation score: the catalogue run on
//	                             the project's mutants of the kubelet and
//	                             an unmutated control, as one batch
//	skewtest bench [-rounds N]   N runs, phase timings min/median/max, JSON
//	skewtest bench-scale         what reconstruction costs on a busy node: runs
//	                             of N pods and of one pod with N volumes per
//	                             CSI driver mode, each hop's times, kubelet CPU
//	                             and memory against N, fits, JSON, Markdown, SVG
//	skewtest build VERSION C,..  build Kubernetes components from the Go module
//	skewtest build-containerd    build containerd v2 from its Go module
//	skewtest kind-node-image V   build the offline kind node image of version V
//	skewtest clean [RUNDIR...]   undo what killed runs left behind (local and
//	                             kind runs; an existing cluster's nodes get their
//	                             own kubelet back)
//	skewtest footprint save|compare FILE
//	                             record the host's footprint; compare the
//	                             host with it, naming every difference
//	skewtest settings            list the environment variables
//	skewtest helpers DIR         write the helper programs (podbin, the CSI
//	                             driver, kindcni, the runc shim) into DIR:
//	                             carried by bin/skewtest, built from source
//	                             by any other build
//	skewtest signoff DIR         the sign-off page of the runs under DIR
//	skewtest scenarios           the reconstruction catalogue: every shape and
//	                             fault, expected outcome per kubelet version
//	skewtest vm image|up|exec|down  a Debian 12 guest (systemd, cgroup v2) under qemu
//	skewtest janitor-aws [-dry-run=false]
//	                             list (delete) AWS resources of kops runs whose
//	                             expiry tag has passed
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/kind"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

func main() {
	// The first SIGINT/SIGTERM cancels the run, which then tears down and
	// exits 130/143; a second one exits at once.
	ctx, stop := skewrun.SignalContext(context.Background(), slog.New(slog.NewTextHandler(os.Stderr, nil)))
	err := run(ctx, os.Args[1:])
	stop()
	var guest *exitStatus
	if errors.As(err, &guest) {
		// skewtest vm exec: the guest command's own exit code.
		os.Exit(guest.code)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "skewtest:", err)
	}
	os.Exit(skewrun.ExitCode(err))
}

const usage = "usage: skewtest run | matrix | catalogue | mutants | bench [-rounds N] [-out FILE] | bench-scale [-pods N,...] [-volumes N,...] [-modes M,...] [-out DIR] | build VERSION COMPONENT[,...] | build-containerd | kind-node-image VERSION | clean [RUNDIR...] | footprint save|compare FILE | settings | helpers DIR | signoff DIR [-baseline DIR] [-out DIR] | scenarios | vm image|up|exec|down | janitor-aws [-dry-run=false]"

// settingsOnly are the commands whose settings are all environment
// variables: an argument to one of them is a mistake, and a help flag
// must never start what it would run.
var settingsOnly = map[string]bool{"run": true, "matrix": true, "catalogue": true, "mutants": true, "build-containerd": true, "scenarios": true, "settings": true}

// isHelp reports whether a is a request for help.
func isHelp(a string) bool {
	switch a {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

func run(ctx context.Context, args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("%w: %s", skewrun.ErrInvalid, usage)
	}
	if isHelp(args[0]) {
		fmt.Println(usage)
		fmt.Println("Settings are environment variables: skewtest settings lists them with their defaults; docs/settings.md explains each.")
		return nil
	}
	if settingsOnly[args[0]] && len(args) > 1 {
		if isHelp(args[1]) {
			fmt.Printf("usage: skewtest %s\nIt takes no arguments: its settings are environment variables (skewtest settings lists them with their defaults; docs/settings.md explains each).\n", args[0])
			return nil
		}
		return fmt.Errorf("%w: skewtest %s takes no arguments, got %q: its settings are environment variables (skewtest settings lists them), e.g. PLAN=v1.37.2,v1.36.3 skewtest %s", skewrun.ErrInvalid, args[0], strings.Join(args[1:], " "), args[0])
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	switch args[0] {
	case "run", "matrix":
		o, err := skewrun.OptionsFromEnv(nil)
		if err != nil {
			return err
		}
		o.Logger = logger
		runOne := skewrun.Run
		if args[0] == "matrix" {
			runOne = skewrun.RunMatrix
		}
		_, err = runOne(ctx, o)
		return err
	case "catalogue":
		return catalogueCmd(ctx, logger)
	case "mutants":
		return mutantsCmd(ctx, logger)
	case "bench":
		return bench(ctx, logger, args[1:])
	case "bench-scale":
		return benchScale(ctx, logger, args[1:])
	case "build":
		if len(args) != 3 {
			return fmt.Errorf("%w: %s", skewrun.ErrInvalid, usage)
		}
		v, err := version.ParseSemantic(args[1])
		if err != nil {
			return fmt.Errorf("%w: version %q: %v", skewrun.ErrInvalid, args[1], err)
		}
		b := &binaries.ModuleBuilder{CacheDir: binaries.DefaultCacheDir(), Logger: logger}
		bins, err := b.Build(ctx, v, strings.Split(args[2], ",")...)
		if err != nil {
			return infrastructure(err)
		}
		printBinaries(bins)
		return nil
	case "build-containerd":
		b := &binaries.ModuleBuilder{CacheDir: binaries.DefaultCacheDir(), Logger: logger}
		bins, err := b.BuildTool(ctx, binaries.Containerd)
		if err != nil {
			return infrastructure(err)
		}
		printBinaries(bins)
		return nil
	case "kind-node-image":
		if len(args) != 2 {
			return fmt.Errorf("%w: %s", skewrun.ErrInvalid, usage)
		}
		v, err := version.ParseSemantic(args[1])
		if err != nil {
			return fmt.Errorf("%w: version %q: %v", skewrun.ErrInvalid, args[1], err)
		}
		img, err := kind.BuildNodeImage(ctx, v, binaries.DefaultCacheDir(), logger)
		if err != nil {
			return infrastructure(err)
		}
		fmt.Printf("%s\t%s\n", img.Name, img.RootfsTar)
		return nil
	case "clean":
		return infrastructure(clean(ctx, logger, args[1:]))
	case "footprint":
		return footprintCmd(ctx, os.Stdout, args[1:])
	case "signoff":
		return signoffCmd(os.Stdout, args[1:])
	case "scenarios":
		return catalogue.Write(os.Stdout, catalogue.All())
	case "vm":
		return vmCmd(ctx, logger, args[1:])
	case "janitor-aws":
		return janitorAWS(ctx, os.Stdout, args[1:])
	case "helpers":
		return helpersCmd(ctx, os.Stdout, os.Stderr, args[1:])
	case "settings":
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
		for _, s := range skewrun.AllSettings() {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Default, s.Help)
		}
		tw.Flush()
		return nil
	}
	return fmt.Errorf("%w: unknown command %q\n%s", skewrun.ErrInvalid, args[0], usage)
}

// infrastructure marks a failed build or clean-up (exit 3); a version the
// module proxy does not serve stays bad input (exit 2), and so does a
// skewtest without its helper programs, whose fix is make skewtest.
func infrastructure(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, clusters.ErrNoHelpers) {
		return fmt.Errorf("%w: %w", skewrun.ErrInvalid, err)
	}
	return fmt.Errorf("%w: %w", skewrun.ErrInfrastructure, err)
}

func printBinaries(bins map[string]binaries.Binary) {
	for _, bin := range bins {
		fmt.Printf("%s\t%s\t%s\t%s\n", bin.Component, bin.Version, bin.SHA256, bin.Path)
	}
}
