//go:build embedhelpers

package helpers

import (
	"embed"
	"io/fs"
)

// programs are the helper programs BuildEmbedded put into embedDir before
// this binary was built (make skewtest).
//
//go:embed embedded
var programs embed.FS

// carried is the file system of the helper programs this binary carries.
func carried() fs.FS {
	sub, err := fs.Sub(programs, embedDir)
	if err != nil {
		panic(err) // fs.Sub fails only for an invalid path, and embedDir is valid
	}
	return sub
}
