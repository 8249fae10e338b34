package main

import (
	"context"
	"flag"
	"fmt"

	"sigs.k8s.io/skewtest/scenarios/bench"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// benchCmd runs bench.Rounds with the settings of skewtest run and prints
// its tables; -out writes them as JSON.
func benchCmd(ctx context.Context, s streams, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	rounds := fs.Int("rounds", 5, "number of rounds")
	out := fs.String("out", "", "write the results as JSON to this file")
	matrixRounds := fs.Int("matrix-rounds", 1, "rounds of the matrix tour at the default node count and at one node (0: none)")
	catalogueRounds := fs.Int("catalogue-rounds", 1, "rounds of each catalogue fault that runs on the provider (0: none)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", exitcode.ErrInvalid, err)
	}
	o, err := skewrun.OptionsFromEnv(nil)
	if err != nil {
		return err
	}
	o.Logger, o.Out = s.logger, s.errOut
	res, err := bench.Rounds(ctx, bench.Options{Run: o, Rounds: *rounds, MatrixRounds: *matrixRounds, CatalogueRounds: *catalogueRounds, Progress: s.errOut})
	if err != nil {
		return err
	}
	res.Print(s.out)
	if *out != "" {
		if err := res.WriteJSON(*out); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "written: %s\n", *out)
	}
	return nil
}
