package binaries

// This file keeps the patch source's writable copy of one version's
// k8s.io/kubernetes source (go build -overlay refuses files under
// GOMODCACHE) and the copy of the wrapper module that builds it: one copy
// per version, shared by every patch of it so that Go's build cache stays
// warm, patched for one build at a time and put back from the module
// cache after it. A record of the files a patch touches is written before
// the patch is applied and removed once they are pristine again, so that
// a build killed in between is repaired by the next one.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/skewtest/clusters/internal/statefile"
)

// patchTree is <cache>/patch/vX: the lock of its builds (lock), the
// source copy (src), the wrapper module (module), the record of a patch
// being applied (touched.json), and one directory per built patch named
// by the diff's sha256.
type patchTree struct {
	dir string
	// pristine is k8s.io/kubernetes@vX in the module cache, read-only.
	pristine string
}

func (t patchTree) src() string        { return filepath.Join(t.dir, "src") }
func (t patchTree) module() string     { return filepath.Join(t.dir, "module") }
func (t patchTree) lock() string       { return filepath.Join(t.dir, "lock") }
func (t patchTree) recordPath() string { return filepath.Join(t.dir, touchedFile) }

// touchedFile is the record of the files a patch being applied touches.
const touchedFile = "touched.json"

// Temporary names under t.dir, nobody's once the lock is held: a build's
// output, a source copy and a wrapper module being made.
const (
	patchBuildPrefix  = buildTmpPrefix
	patchSrcPrefix    = "src.tmp-"
	patchModulePrefix = "module.tmp-"
)

// touchedRecord is touched.json: the files of the source copy a patch
// may have changed, to put back from the module cache.
type touchedRecord struct {
	PatchSHA256 string   `json:"patchSHA256"`
	Files       []string `json:"files"`
}

// prepare readies t for a build, under its lock: it removes what killed
// builds left, repairs a copy a killed build left patched, copies the
// source if it is missing, and writes the wrapper module from moduleDir
// with k8s.io/kubernetes replaced by the copy.
func (t patchTree) prepare(moduleDir string) error {
	for _, prefix := range []string{patchBuildPrefix, patchSrcPrefix, patchModulePrefix} {
		stale, _ := filepath.Glob(filepath.Join(t.dir, prefix+"*"))
		for _, s := range stale {
			if err := os.RemoveAll(s); err != nil {
				return err
			}
		}
	}
	if err := t.repair(); err != nil {
		return err
	}
	if _, err := os.Stat(t.src()); errors.Is(err, fs.ErrNotExist) {
		if err := t.copySource(); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return t.writeModule(moduleDir)
}

// repair puts back the files a record lists, then removes the record. A
// record that cannot be read condemns the whole copy.
func (t patchTree) repair() error {
	var rec touchedRecord
	err := statefile.Read(t.dir, touchedFile, &rec)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) {
		if err := os.RemoveAll(t.src()); err != nil {
			return err
		}
		return os.Remove(t.recordPath())
	}
	if err != nil {
		return err
	}
	return t.restore(rec.Files)
}

// begin records the files d touches before it is applied.
func (t patchTree) begin(d *patchDiff) error {
	return statefile.Write(t.dir, touchedFile, touchedRecord{PatchSHA256: d.SHA256, Files: d.Files}, 0o644)
}

// restore puts files back as the module cache has them (removing those
// it lacks, and the directories a patch made for them), then removes the
// record: it describes a copy that is not pristine.
func (t patchTree) restore(files []string) error {
	for _, f := range files {
		if err := checkPatchPath(f); err != nil {
			// A record skewtest did not write: trust nothing of the copy.
			if err := os.RemoveAll(t.src()); err != nil {
				return err
			}
			break
		}
		if err := t.restoreFile(filepath.FromSlash(f)); err != nil {
			return fmt.Errorf("put %s back in the patch source copy %s: %w", f, t.src(), err)
		}
	}
	if err := os.Remove(t.recordPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (t patchTree) restoreFile(rel string) error {
	dst := filepath.Join(t.src(), rel)
	orig := filepath.Join(t.pristine, rel)
	fi, err := os.Lstat(orig)
	switch {
	case err == nil && fi.Mode().IsRegular():
		if dfi, err := os.Lstat(dst); err == nil && !dfi.Mode().IsRegular() {
			if err := os.RemoveAll(dst); err != nil {
				return err
			}
		}
		return copyFile(orig, dst)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	// The directories a patch made for a new file go with it.
	for d := filepath.Dir(rel); d != "." && d != string(filepath.Separator); d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(t.pristine, d)); err == nil {
			break
		}
		if err := os.Remove(filepath.Join(t.src(), d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			break // not empty: something else of a patch's, removed with its own record
		}
	}
	return nil
}

// copySource copies the module cache's source to src, writable, through
// a temporary name so that a killed copy is never taken for a whole one.
func (t patchTree) copySource() error {
	tmp, err := os.MkdirTemp(t.dir, patchSrcPrefix)
	if err != nil {
		return err
	}
	if err := copyTree(t.pristine, tmp); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("copy %s to %s: %w", t.pristine, tmp, err)
	}
	if err := os.Rename(tmp, t.src()); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return nil
}

// writeModule copies the version's wrapper module (go.mod, go.sum,
// tools.go, the stubs) and replaces k8s.io/kubernetes in it with the
// source copy; the staging modules keep resolving through the wrapper's
// own replaces (the copy's ./staging ones count only in a main module).
func (t patchTree) writeModule(moduleDir string) error {
	tmp, err := os.MkdirTemp(t.dir, patchModulePrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, name := range []string{"go.mod", "go.sum", "tools.go", stubsFile, "stub"} {
		from := filepath.Join(moduleDir, name)
		fi, err := os.Stat(from)
		if errors.Is(err, fs.ErrNotExist) && (name == stubsFile || name == "stub") {
			continue
		}
		if err != nil {
			return err
		}
		if fi.IsDir() {
			err = copyTree(from, filepath.Join(tmp, name))
		} else {
			err = copyFile(from, filepath.Join(tmp, name))
		}
		if err != nil {
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(tmp, "go.mod"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := fmt.Fprintf(f, "\n// The patch source's writable copy, patched for one build at a time.\nreplace k8s.io/kubernetes => ../%s\n", filepath.Base(t.src()))
	if err := errors.Join(werr, f.Close()); err != nil {
		return err
	}
	if err := os.RemoveAll(t.module()); err != nil {
		return err
	}
	return os.Rename(tmp, t.module())
}

// copyTree copies the regular files and directories under from to to,
// writable by their owner (the module cache's are read-only).
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type().IsRegular():
			return copyFile(p, dst)
		}
		return nil // the module cache holds no links or devices
	})
}

// copyFile copies a regular file's content to dst (mode 0644), making
// dst's directory.
func copyFile(from, dst string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, cerr := io.Copy(out, in)
	return errors.Join(cerr, out.Close())
}
