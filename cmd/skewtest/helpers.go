package main

import (
	"context"
	"fmt"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// helpersCmd writes the helper programs this skewtest runs beside itself
// into DIR (created with mode 0700 if it does not exist), one line each:
// name, sha256, path, package; then where they came from, on stderr. It
// shows that a skewtest has its helpers before a run needs them, and which
// bytes a kind node image or a cached runc shim holds.
func helpersCmd(ctx context.Context, s streams, args []string) error {
	if len(args) != 1 || args[0] == "" {
		return fmt.Errorf("%w: usage: skewtest helpers DIR", exitcode.ErrInvalid)
	}
	origin, written, err := clusters.WriteHelpers(ctx, args[0])
	if err != nil {
		return infrastructure(err)
	}
	for _, h := range written {
		sum, err := binaries.FileSHA256(h.Path)
		if err != nil {
			return infrastructure(err)
		}
		fmt.Fprintf(s.out, "%s\t%s\t%s\t%s\n", h.Name, sum, h.Path, h.Package)
	}
	fmt.Fprintf(s.errOut, "skewtest: %d helper programs, %s\n", len(written), origin)
	return nil
}
