package signoff

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"sigs.k8s.io/skewtest/reports"
)

// File names Write writes in the output dir.
const (
	MarkdownFileName = "signoff.md"
	HTMLFileName     = "signoff.html"
)

// Write writes signoff.md and signoff.html into dir, creating it, each
// through a temporary file and a rename. It returns the paths written.
func Write(dir string, p *Page) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("signoff: creating %s: %w", dir, err)
	}
	var paths []string
	for _, f := range []struct {
		name  string
		write func(io.Writer, *Page) error
	}{
		{MarkdownFileName, writeMarkdown},
		{HTMLFileName, writeHTML},
	} {
		path := filepath.Join(dir, f.name)
		if err := reports.WriteFileAtomic(path, func(w io.Writer) error { return f.write(w, p) }); err != nil {
			return paths, fmt.Errorf("signoff: writing %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}
