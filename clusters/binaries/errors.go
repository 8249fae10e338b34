package binaries

import (
	"errors"
	"fmt"
)

// ErrBadSource marks an error the user fixes by naming another source for
// the binary (a file that does not exist or is not executable, a checkout
// that is not one, a version that no release or module proxy has), as
// opposed to a failure of the network, the disk or a build. Test it with
// errors.Is; the message is the wrapped error's own.
var ErrBadSource = errors.New("unusable binary source")

// badSourceError is an error of the user's choice of source.
type badSourceError struct{ err error }

func (e *badSourceError) Error() string        { return e.err.Error() }
func (e *badSourceError) Unwrap() error        { return e.err }
func (e *badSourceError) Is(target error) bool { return target == ErrBadSource }

// badSource is fmt.Errorf marked with ErrBadSource.
func badSource(format string, args ...any) error {
	return &badSourceError{err: fmt.Errorf(format, args...)}
}
