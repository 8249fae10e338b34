package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/scenarios/bench"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

const benchScaleUsage = "usage: skewtest bench-scale [-pods N,...] [-volumes N,...] [-modes tmpfs,ebs] [-out DIR]"

// benchScaleCmd runs bench.Scale with the settings of skewtest run, prints
// the fits and names what it wrote.
func benchScaleCmd(ctx context.Context, s streams, args []string) error {
	fs := flag.NewFlagSet("bench-scale", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pods := fs.String("pods", bench.JoinInts(bench.ScaleDefaults.Pods), fmt.Sprintf("pod counts of the pods shape, one volume each (1 to %d, the kubelet's maxPods); %s: no such run", bench.KubeletMaxPods, bench.NoCounts))
	volumes := fs.String("volumes", bench.JoinInts(bench.ScaleDefaults.Volumes), fmt.Sprintf("volume counts of the one-pod shape (1 to %d, the CSI driver's limit per node); %s: no such run", clusters.CSIDriverMaxVolumesPerNode, bench.NoCounts))
	modes := fs.String("modes", "", "the CSI driver's modes to run, comma-separated (default: every mode the provider runs)")
	out := fs.String("out", "", "where to write the result (default $ARTIFACTS/bench-scale/<time>)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v\n%s", exitcode.ErrInvalid, err, benchScaleUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q\n%s", exitcode.ErrInvalid, fs.Arg(0), benchScaleUsage)
	}
	o, err := skewrun.OptionsFromEnv(nil)
	if err != nil {
		return err
	}
	o.Logger, o.Out = s.logger, s.errOut
	res, paths, err := bench.Scale(ctx, bench.ScaleOptions{Run: o, Pods: *pods, Volumes: *volumes, Modes: *modes, Out: *out, Args: args, Progress: s.errOut})
	if res != nil {
		bench.PrintScale(s.out, res)
	}
	for _, p := range paths {
		fmt.Fprintf(s.out, "written: %s\n", p)
	}
	return err
}
