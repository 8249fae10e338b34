package skewrun

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// classified is an error marked with the class a phase gave it
// (exitcode.ErrInvalid, ErrInfrastructure, ErrKubelet); its message is
// the error's own.
type classified struct{ err, class error }

func (e *classified) Error() string        { return e.err.Error() }
func (e *classified) Unwrap() error        { return e.err }
func (e *classified) Is(target error) bool { return target == e.class }

// classify marks err with the phase's class, unless it is a binary source
// the user must change, which is bad input whatever the phase.
func classify(err, class error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, binaries.ErrBadSource) || errors.Is(err, hostlock.ErrHostInUse) {
		class = exitcode.ErrInvalid
	}
	return &classified{err: err, class: class}
}

// interrupted adds to err the signal that cancelled ctx, if one did.
func interrupted(ctx context.Context, err error) error {
	var in *exitcode.Interrupted
	if err == nil || errors.As(err, &in) {
		return err
	}
	if cause := context.Cause(ctx); errors.As(cause, &in) {
		return fmt.Errorf("%w: %w", in, err)
	}
	return err
}
