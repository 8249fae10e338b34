package skewrun

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// publicNames are the package's exported top-level names: the entry
// points, what they take and return, and the settings. Everything else of
// the pipeline is internal (docs/design.md, The pipeline); a new export
// is a decision, made here.
var publicNames = []string{"AllSettings", "BatchResult", "Job", "JobResult", "Options", "OptionsFromEnv", "Result", "Run", "RunBatch", "RunMatrix"}

func TestExports(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range pkgs["skewrun"].Files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					got = append(got, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							got = append(got, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								got = append(got, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, publicNames) {
		t.Errorf("skewrun exports %v, want %v: keep the pipeline's verbs internal, or change publicNames and docs/design.md's pipeline section together", got, publicNames)
	}
}
