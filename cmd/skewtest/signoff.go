package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"sigs.k8s.io/skewtest/reports/scale"
	"sigs.k8s.io/skewtest/reports/signoff"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

const signoffUsage = "usage: skewtest signoff DIR [-baseline DIR] [-out DIR]"

// signoffCmd writes the sign-off page (signoff.md, signoff.html) of every
// run under DIR into -out (default DIR), compared with the runs under
// -baseline when given, with every bench-scale result and mutation
// measurement under DIR (the measurements' mutants' runs left out of the
// runs, here and in the baseline). A page that reports failed runs or
// mutants the checks let through is still a success: the page is the
// product. Bad input (no DIR, no run.json nor mutation.json under it, an
// unreadable run.json, mutation.json or bench-scale.json) is ErrInvalid,
// exit 2.
func signoffCmd(_ context.Context, s streams, args []string) error {
	out := s.out
	fs := flag.NewFlagSet("signoff", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	baseline := fs.String("baseline", "", "an earlier night's runs dir to compare time-to-cleanup against")
	outDir := fs.String("out", "", "where to write signoff.md and signoff.html (default DIR)")
	// Flags may come before or after DIR.
	var dirs []string
	for {
		if err := fs.Parse(args); err != nil {
			return fmt.Errorf("%w: %v\n%s", exitcode.ErrInvalid, err, signoffUsage)
		}
		if fs.NArg() == 0 {
			break
		}
		dirs = append(dirs, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(dirs) != 1 {
		return fmt.Errorf("%w: want one runs dir, got %d\n%s", exitcode.ErrInvalid, len(dirs), signoffUsage)
	}
	dir := dirs[0]
	if *outDir == "" {
		*outDir = dir
	}
	srcs, muts, err := signoff.LoadAll(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", exitcode.ErrInvalid, err)
	}
	page := signoff.Build(srcs, *outDir)
	found, err := scale.Find(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", exitcode.ErrInvalid, err)
	}
	page.AddScale(found, *outDir)
	page.AddMutations(muts, *outDir)
	if *baseline != "" {
		base, _, err := signoff.LoadAll(*baseline)
		if err != nil {
			if errors.Is(err, signoff.ErrNoRuns) {
				err = fmt.Errorf("baseline: %w", err)
			}
			return fmt.Errorf("%w: -baseline: %v", exitcode.ErrInvalid, err)
		}
		page.Compare(signoff.Build(base, *outDir), *baseline)
	}
	paths, err := signoff.Write(*outDir, page)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, page.VerdictLine())
	if page.Baseline != nil {
		for _, w := range page.Baseline.Warnings {
			fmt.Fprintln(out, "warning: slower than the baseline:", w.Text())
		}
	}
	if page.MutantScore != nil {
		for _, th := range page.MutantScore.Through {
			fmt.Fprintf(out, "warning: the checks did not kill mutant %s: %s (measurement %s)\n", th.Mutant.Name, th.Mutant.Outcome, th.Measurement)
		}
	}
	for _, p := range paths {
		fmt.Fprintln(out, "wrote", p)
	}
	return nil
}
