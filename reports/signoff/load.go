// Package signoff gathers the runs of a night (or of a release) into one
// sign-off page for the KEP-3756 enhancement issue: a verdict, a matrix of
// kubelet versions (from × to) per provider and volume kind, the expected
// deviations, binaries and environments, and trends against an earlier
// night. It writes signoff.md to paste and signoff.html to read.
package signoff

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"sigs.k8s.io/skewtest/reports"
)

// ErrNoRuns is returned by Load when a directory holds no run.json.
var ErrNoRuns = errors.New("no runs")

// Source is one run read from disk.
type Source struct {
	Run *reports.Run
	// Path is the run.json the run was read from.
	Path string
	// Report is the report.md next to it; "" when there is none.
	Report string
}

// load reads every run.json under dir, recursively, one per run ID: a
// symlink such as $ARTIFACTS/latest is not followed, and when two files
// carry the same ID the first in lexical order is kept. Runs come back in
// the order they started. A missing dir, a dir without any run.json, and a
// run.json that cannot be read are errors naming the path.
func load(dir string) ([]Source, error) {
	root, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("runs dir %s does not exist; point signoff at the $ARTIFACTS dir of your runs (./_artifacts by default)", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("runs dir %s: %w", dir, err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("runs dir %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("runs dir %s is not a directory", dir)
	}
	var srcs []Source
	seen := map[string]bool{}
	err = reports.FindFiles(root, reports.JSONFileName, func(path string) error {
		src, err := readSource(path)
		if err != nil {
			return err
		}
		id := src.Run.ID
		if id == "" {
			id = path
		}
		if seen[id] {
			return nil
		}
		seen[id] = true
		srcs = append(srcs, src)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("%w: no %s under %s; runs write $ARTIFACTS/<run-id>/%s (make test-skew, or go run ./cmd/skewtest run), so point signoff at that $ARTIFACTS dir",
			ErrNoRuns, reports.JSONFileName, dir, reports.JSONFileName)
	}
	sort.SliceStable(srcs, func(i, j int) bool {
		a, b := srcs[i].Run, srcs[j].Run
		if !a.Started.Equal(b.Started) {
			return a.Started.Before(b.Started)
		}
		return a.ID < b.ID
	})
	return srcs, nil
}

func readSource(path string) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return Source{}, err
	}
	defer f.Close()
	run, err := reports.ReadJSON(f)
	if err != nil {
		return Source{}, fmt.Errorf("%s: %w", path, err)
	}
	src := Source{Run: run, Path: path}
	if md := filepath.Join(filepath.Dir(path), reports.MarkdownFileName); fileExists(md) {
		src.Report = md
	}
	return src, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
