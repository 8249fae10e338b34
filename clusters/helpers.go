package clusters

import (
	"context"

	"sigs.k8s.io/skewtest/clusters/internal/helpers"
)

// ErrNoHelpers marks the error of a skewtest that neither carries its
// helper programs nor can build them from source: bad input, whose fix
// (make skewtest) the error names.
var ErrNoHelpers = helpers.ErrUnavailable

// Helper is one of the programs skewtest runs beside itself, as
// WriteHelpers wrote it.
type Helper struct {
	Name, Package, Path string
}

// WriteHelpers writes every helper program (the pods' podbin, the CSI
// driver, kindcni, the runc shim) into dir, created with mode 0700 if it
// does not exist, and says where they came from: carried by this binary
// (make skewtest) or built from the source tree.
func WriteHelpers(ctx context.Context, dir string) (origin string, written []Helper, err error) {
	origin, err = helpers.Origin()
	if err != nil {
		return "", nil, err
	}
	paths, err := helpers.Write(ctx, dir, helpers.All()...)
	if err != nil {
		return "", nil, err
	}
	for _, p := range helpers.All() {
		written = append(written, Helper{Name: p.Name, Package: p.Package, Path: paths[p.Name]})
	}
	return origin, written, nil
}
