package helpers

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec" // the Go toolchain on this host, building the helper programs from source
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// buildFlags are go build's flags for every helper program, carried or
// built at run time: static (CGO_ENABLED=0, in buildEnv) for images and
// nodes without a C library; -trimpath and -buildvcs=false so that the
// bytes depend on the source alone, not on where the tree is or on its
// commit (every commit would otherwise make the cached kind node image
// stale); -s -w for smaller images.
var buildFlags = []string{"-trimpath", "-buildvcs=false", "-ldflags=-s -w"}

// buildEnv is added to go build's environment: static programs for linux
// on this machine's architecture, where they run.
func buildEnv() []string {
	return append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
}

// goBuild compiles progs from the module at root into out, a directory
// ending in a path separator.
func goBuild(ctx context.Context, root, out string, progs []Program) error {
	if err := checkToolchain(root); err != nil {
		return err
	}
	args := append([]string{"build"}, buildFlags...)
	args = append(args, "-o", out)
	names := make([]string, 0, len(progs))
	for _, p := range progs {
		args = append(args, p.Package)
		names = append(names, p.Name)
	}
	if b, err := goCommand(ctx, root, args).CombinedOutput(); err != nil {
		return fmt.Errorf("build helper programs %s in %s: go %s: %w\n%s", strings.Join(names, ", "), root, strings.Join(args, " "), err, b)
	}
	return nil
}

// goCommand is the go command run in root. It dies with skewtest: a go
// build outliving a killed skewtest would write its output (go build -o
// makes the directory) into the run directory after skewtest clean
// removed it.
func goCommand(ctx context.Context, root string, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = root, buildEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// build compiles progs from the source tree at root into dir and returns
// their paths by name. It builds in a directory of its own inside dir and
// renames, so that a failed or killed build leaves no half-written program
// under its name.
func build(ctx context.Context, root, dir string, progs []Program) (map[string]string, error) {
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := goBuild(ctx, root, tmp+string(filepath.Separator), progs); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range progs {
		path := filepath.Join(dir, p.Name)
		if err := os.Rename(filepath.Join(tmp, p.Name), path); err != nil {
			return nil, err
		}
		out[p.Name] = path
	}
	return out, nil
}

// checkToolchain says whether the go command is there to build from root.
func checkToolchain(root string) error {
	if _, err := exec.LookPath("go"); err != nil {
		return unavailable("there is no go command on PATH to build them from the source tree " + root)
	}
	return nil
}

// sourceRoot is the skewtest source tree this binary was built from: the
// tree holding this file when the build kept source paths and the tree is
// still there, else the one the working directory is in (builds with
// -trimpath, as the Makefile's, record no paths: go test runs in the
// package's directory, go run ./cmd/skewtest in the tree). The module
// there must be skewtest's.
func sourceRoot() (string, error) {
	var dirs []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dirs = append(dirs, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		dirs = append(dirs, wd)
	}
	return findRoot(dirs...)
}

// findRoot returns the root of the first of dirs that is inside the
// skewtest module, or ErrUnavailable naming what each is.
func findRoot(dirs ...string) (string, error) {
	var seen []string
	for _, d := range dirs {
		root, module := moduleOf(d)
		if module == Module {
			return root, nil
		}
		switch {
		case root == "":
			seen = append(seen, d+" is not inside a Go module")
		default:
			seen = append(seen, fmt.Sprintf("%s is inside module %s (%s), not %s", d, module, root, Module))
		}
	}
	if len(seen) == 0 {
		return "", unavailable("there is no working directory to look for the skewtest source tree from")
	}
	return "", unavailable("there is no skewtest source tree to build them from: " + strings.Join(seen, "; "))
}

// moduleOf is the root and module path of the Go module dir is in, or ""
// for both when no go.mod is above it.
func moduleOf(dir string) (root, module string) {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			return d, modulePath(b)
		}
		if filepath.Dir(d) == d {
			return "", ""
		}
	}
}

// modulePath is the path of a go.mod's module directive.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "module" {
			continue
		}
		if p, err := strconv.Unquote(f[1]); err == nil {
			return p
		}
		return f[1]
	}
	return ""
}

// BuildEmbedded builds every helper program from the source tree into
// embedDir beside this package's source, which carried.go embeds, and
// returns that directory. It builds in place, so that go build skips the
// link of a program that is up to date (make skewtest stays fast warm),
// and removes any other file there, so that the directory holds All()
// exactly.
func BuildEmbedded(ctx context.Context) (string, error) {
	root, err := sourceRoot()
	if err != nil {
		return "", err
	}
	rel, ok := strings.CutPrefix(reflect.TypeFor[Program]().PkgPath(), Module+"/")
	if !ok {
		return "", fmt.Errorf("package %s is not in module %s", reflect.TypeFor[Program]().PkgPath(), Module)
	}
	out := filepath.Join(root, filepath.FromSlash(rel), embedDir)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	if err := goBuild(ctx, root, out+string(filepath.Separator), All()); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return "", err
	}
	want := map[string]bool{}
	for _, p := range All() {
		want[p.Name] = true
	}
	for _, e := range entries {
		if !want[e.Name()] {
			if err := os.RemoveAll(filepath.Join(out, e.Name())); err != nil {
				return "", err
			}
		}
	}
	return out, nil
}
