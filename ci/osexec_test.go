package ci

// clusters/exec is how skewtest runs a command on a node, whatever the
// node is (this host, an SSH machine, a kind container). Code that runs a
// program through os/exec instead (a daemon in its own process group, a
// host tool whose output it streams, a build) says why on the import's
// line, so that the package comment of clusters/exec stays true and a
// new use is a decision someone wrote down.

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// osexecHome is the package whose job running commands is.
const osexecHome = "clusters/exec"

func TestOSExecImportsSayWhy(t *testing.T) {
	root := ".."
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "_artifacts" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(rel) == osexecHome {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if imp.Path.Value != `"os/exec"` {
				continue
			}
			files++
			if imp.Comment == nil || len(strings.Fields(imp.Comment.Text())) < 3 {
				t.Errorf("%s imports os/exec without saying why on the import's line: "+
					"run it through %s (a Cmder), or write the reason beside the import", fset.Position(imp.Pos()), osexecHome)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no file outside clusters/exec imports os/exec: the walk found nothing, so the check proves nothing")
	}
	t.Logf("%d files import os/exec, each with its reason", files)
}
