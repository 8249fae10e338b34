//go:build !embedhelpers

package helpers

import "io/fs"

// carried is nil: this binary carries no helper programs (it was not built
// by make skewtest), so Write builds them from source.
func carried() fs.FS { return nil }
