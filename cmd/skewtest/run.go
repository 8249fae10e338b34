package main

import (
	"context"

	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// runCmd is one run (skewrun.Run), configured by the same environment
// variables as make test-skew (PLAN, PROVIDER, ...).
func runCmd(ctx context.Context, s streams, _ []string) error {
	o, err := skewrun.OptionsFromEnv(nil)
	if err != nil {
		return err
	}
	o.Logger = s.logger
	_, err = skewrun.Run(ctx, o)
	return err
}

// matrixCmd is the matrix tour (skewrun.RunMatrix: MATRIX, MATRIX_NODES,
// ...), as make test-matrix runs it.
func matrixCmd(ctx context.Context, s streams, _ []string) error {
	o, err := skewrun.OptionsFromEnv(nil)
	if err != nil {
		return err
	}
	o.Logger = s.logger
	_, err = skewrun.RunMatrix(ctx, o)
	return err
}
