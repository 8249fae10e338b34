// Package helpers gives skewtest its helper programs: the programs of this
// module that run beside skewtest rather than in its process (podbin in
// its pods' images, the CSI driver, kindcni in the offline kind node image,
// the runc shim under a private dockerd). Write is the one way to get one.
//
// Where they come from:
//
//   - bin/skewtest, built by `make skewtest`, carries them: the Makefile
//     first builds them into embedded/ (cmd/embedhelpers, BuildEmbedded),
//     then builds skewtest with the embedhelpers tag, under which
//     carried.go embeds that directory. Write copies them out; no source
//     tree and no Go toolchain is needed, so bin/skewtest runs from any
//     directory, and on any Linux machine of its architecture.
//   - Any other build (go run ./cmd/skewtest, test binaries, the
//     suites' go build) compiles them with go build from the skewtest
//     source tree it was built from (sourceRoot).
//
// Both ways run the one go build of build(), so that they give the same
// bytes for the same source and Go toolchain: a kind node image cached
// with programs of one (nodeimage records their digest) is fresh for the
// other, and the cached runc shim is replaced only when its source changed.
package helpers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Module is the module path of skewtest, whose packages the programs are.
const Module = "sigs.k8s.io/skewtest"

// Program is one helper program.
type Program struct {
	// Name is its file name, the last element of Package (go build names
	// it so).
	Name string
	// Package is the import path of its main package.
	Package string
}

// The helper programs.
var (
	// Podbin is the only program of skewtest's pods (pause and workload).
	Podbin = Program{"podbin", Module + "/clusters/internal/podbin"}
	// CSIDriver is skewtest's CSI driver: processes of the local
	// provider, a DaemonSet's image on kind.
	CSIDriver = Program{"skewtest-csi-driver", Module + "/clusters/internal/csidriver/cmd/skewtest-csi-driver"}
	// KindCNI is the offline kind node image's stand-in for kindnetd.
	KindCNI = Program{"kindcni", Module + "/clusters/kind/internal/nodeimage/cmd/kindcni"}
	// RuncShim is the OCI runtime shim of a private dockerd on hosts
	// without CAP_SYS_RESOURCE (package capshim).
	RuncShim = Program{"skewtest-runc-shim", Module + "/clusters/kind/internal/capshim/cmd/skewtest-runc-shim"}
)

// All are the helper programs, as bin/skewtest carries them.
func All() []Program { return []Program{Podbin, CSIDriver, KindCNI, RuncShim} }

// ErrUnavailable marks the error of a skewtest that neither carries its
// helper programs nor has a source tree to build them from: the fix is
// `make skewtest`, not a retry.
var ErrUnavailable = errors.New("skewtest's helper programs are unavailable")

// embedDir is the directory, beside this file, that BuildEmbedded fills and
// carried.go embeds.
const embedDir = "embedded"

// Write puts progs into dir as executable files (creating dir, mode 0700,
// if it does not exist) and returns their paths by name. A file of the
// same name in dir is replaced, atomically. dir must be the caller's own,
// e.g. in its run directory: not a predictable path in a world-writable
// directory.
func Write(ctx context.Context, dir string, progs ...Program) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if fsys := carried(); fsys != nil {
		return writeCarried(fsys, dir, progs)
	}
	root, err := sourceRoot()
	if err != nil {
		return nil, err
	}
	return build(ctx, root, dir, progs)
}

// Check tells, without writing or building anything, whether Write can
// give progs: a clear error (ErrUnavailable) before a run makes anything,
// rather than a failed bring-up.
func Check(progs ...Program) error {
	if fsys := carried(); fsys != nil {
		return checkCarried(fsys, progs)
	}
	root, err := sourceRoot()
	if err != nil {
		return err
	}
	return checkToolchain(root)
}

// checkCarried says whether fsys holds every one of progs.
func checkCarried(fsys fs.FS, progs []Program) error {
	var missing []string
	for _, p := range progs {
		if fi, err := fs.Stat(fsys, p.Name); err != nil || !fi.Mode().IsRegular() {
			missing = append(missing, p.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: this skewtest was built with the embedhelpers tag but does not carry %s: build it with `make skewtest`", ErrUnavailable, strings.Join(missing, ", "))
	}
	return nil
}

// Origin says where Write takes the programs from, for logs and `skewtest
// helpers`: carried by this binary, or built from a source tree.
func Origin() (string, error) {
	if carried() != nil {
		return "carried by this skewtest binary", nil
	}
	root, err := sourceRoot()
	if err != nil {
		return "", err
	}
	return "built with go build from the source tree " + root, nil
}

// unavailable is the error of a skewtest with no way to get its helper
// programs: it names them, why, and the fix.
func unavailable(why string) error {
	names := make([]string, 0, len(All()))
	for _, p := range All() {
		names = append(names, p.Name)
	}
	return fmt.Errorf("%w (%s): this binary does not carry them, as the bin/skewtest that `make skewtest` builds does, and %s. "+
		"Fix: run `make skewtest` in the skewtest source tree, then run bin/skewtest from any directory (or run this build from inside the source tree)",
		ErrUnavailable, strings.Join(names, ", "), why)
}

// writeCarried copies progs out of fsys into dir.
func writeCarried(fsys fs.FS, dir string, progs []Program) (map[string]string, error) {
	if err := checkCarried(fsys, progs); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range progs {
		path, err := copyOut(fsys, p.Name, dir)
		if err != nil {
			return nil, fmt.Errorf("write helper program %s: %w", p.Name, err)
		}
		out[p.Name] = path
	}
	return out, nil
}

// copyOut writes fsys's file name into dir/name, mode 0755, through a
// temporary file and a rename, so that nobody ever runs half a program.
func copyOut(fsys fs.FS, name, dir string) (string, error) {
	src, err := fsys.Open(name)
	if err != nil {
		return "", err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.Rename(tmp.Name(), path)
}
