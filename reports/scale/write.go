package scale

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"sigs.k8s.io/skewtest/reports"
)

// File names Write writes in a result's directory, beside each panel's
// chart (Panel.ChartFile).
const (
	JSONFileName     = "bench-scale.json"
	MarkdownFileName = "bench-scale.md"
)

// Write writes the result's JSON, its Markdown page and each panel's SVG
// chart into dir, creating it, each through a temporary file and a rename.
// It returns the paths written.
func Write(dir string, r *Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("scale: creating %s: %w", dir, err)
	}
	files := []struct {
		name  string
		write func(io.Writer) error
	}{
		{JSONFileName, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(r)
		}},
		{MarkdownFileName, r.WriteMarkdown},
	}
	for _, pn := range r.Panels() {
		files = append(files, struct {
			name  string
			write func(io.Writer) error
		}{pn.ChartFile(), func(w io.Writer) error { return r.WriteSVG(w, pn) }})
	}
	var paths []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := reports.WriteFileAtomic(p, f.write); err != nil {
			return paths, fmt.Errorf("scale: writing %s: %w", p, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// Read reads a result's JSON.
func Read(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// Found is a result read from disk, and where.
type Found struct {
	Result *Result
	// Path is its JSON file; the charts are beside it.
	Path string
}

// Find reads every result under dir, recursively, without following
// symlinks below it, oldest first. A dir with none gives none; a result that
// cannot be read is an error naming it.
func Find(dir string) ([]Found, error) {
	root, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("scale: %s does not exist", dir)
	}
	if err != nil {
		return nil, err
	}
	var out []Found
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil
		}
		if d.IsDir() || d.Name() != JSONFileName || !d.Type().IsRegular() {
			return nil
		}
		r, err := Read(path)
		if err != nil {
			return err
		}
		out = append(out, Found{Result: r, Path: path})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Result.Started.Before(out[j].Result.Started) })
	return out, nil
}
