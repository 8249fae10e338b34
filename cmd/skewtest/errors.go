package main

import (
	"errors"
	"fmt"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// invalid is bad input (exit 2): the message names the input and the fix.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{exitcode.ErrInvalid}, args...)...)
}

// infrastructure marks a failed build or clean-up (exit 3). What is bad
// input whatever the step (a version the module proxy does not serve, a
// host another run holds, a kubeconfig now pointing at another cluster)
// stays bad input (exit 2), and says so, and so does a skewtest without
// its helper programs, whose fix is make skewtest.
func infrastructure(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, clusters.ErrNoHelpers) || exitcode.Of(err) == exitcode.Invalid {
		return fmt.Errorf("%w: %w", exitcode.ErrInvalid, err)
	}
	return fmt.Errorf("%w: %w", exitcode.ErrInfrastructure, err)
}
