package kubeletmetrics

// This file reads, from k8s.io/kubernetes sources in the module cache,
// which metrics a kubelet version registers and under which name, and
// checks the table (exposed.go) against it.

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/internal/testgate"
)

// ciSources are the versions whose source CI must read: the kubelets of
// the default plan, which its builds download into the module cache too.
var ciSources = []string{"v1.37.2", "v1.36.3"}

// registeredMetric is one metric a file registers.
type registeredMetric struct {
	name string // as exposed: namespace_subsystem_name
	// conditional: every MustRegister of it is inside an if (a feature
	// gate), which the table cannot say.
	conditional bool
}

// readRegistered parses file (Go source) for the component-base metrics it
// declares (var X = metrics.NewCounter(&metrics.CounterOpts{Subsystem:
// ..., Name: ...}), and its kin) and registers
// (legacyregistry.MustRegister(X)): their exposed names by their Name
// field without namespace or subsystem.
func readRegistered(t *testing.T, file string) map[string]registeredMetric {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	type declared struct{ base, full string }
	vars := map[string]declared{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gd.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				switch gd.Tok {
				case token.CONST:
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts[name.Name], _ = strconv.Unquote(lit.Value)
					}
				case token.VAR:
					if base, full, ok := metricOpts(vs.Values[i], consts); ok {
						vars[name.Name] = declared{base, full}
					}
				}
			}
		}
	}
	out := map[string]registeredMetric{}
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		call, ok := n.(*ast.CallExpr)
		if !ok || !isCall(call, "legacyregistry", "MustRegister") {
			return true
		}
		inIf := slices.ContainsFunc(stack, func(n ast.Node) bool { _, ok := n.(*ast.IfStmt); return ok })
		for _, a := range call.Args {
			id, ok := a.(*ast.Ident)
			if !ok {
				continue
			}
			d, ok := vars[id.Name]
			if !ok {
				continue
			}
			if prev, seen := out[d.base]; seen && !prev.conditional {
				continue
			}
			out[d.base] = registeredMetric{name: d.full, conditional: inIf}
		}
		return true
	})
	return out
}

func isCall(call *ast.CallExpr, pkg, fn string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != fn {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}

// metricOpts reads metrics.NewX(&metrics.XOpts{Namespace: ..., Subsystem:
// ..., Name: ...}, ...): the Name field and the exposed name.
func metricOpts(e ast.Expr, consts map[string]string) (base, full string, ok bool) {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return "", "", false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || !strings.HasPrefix(sel.Sel.Name, "New") {
		return "", "", false
	}
	if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "metrics" {
		return "", "", false
	}
	u, ok := call.Args[0].(*ast.UnaryExpr)
	if !ok {
		return "", "", false
	}
	lit, ok := u.X.(*ast.CompositeLit)
	if !ok {
		return "", "", false
	}
	field := map[string]string{}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key, ok := kv.Key.(*ast.Ident)
		if !ok {
			continue
		}
		switch v := kv.Value.(type) {
		case *ast.BasicLit:
			field[key.Name], _ = strconv.Unquote(v.Value)
		case *ast.Ident:
			field[key.Name] = consts[v.Name]
		}
	}
	if field["Name"] == "" {
		return "", "", false
	}
	var parts []string
	for _, k := range []string{"Namespace", "Subsystem", "Name"} {
		if field[k] != "" {
			parts = append(parts, field[k])
		}
	}
	return field["Name"], strings.Join(parts, "_"), true
}

// kubernetesSource is the directory of k8s.io/kubernetes@v in the module
// cache. Absent, a version CI must read is downloaded there under CI (as
// its kubelet builds do) and skipped locally; another is skipped.
func kubernetesSource(t *testing.T, v string) string {
	t.Helper()
	testgate.RequireTools(t, "go")
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "k8s.io", "kubernetes@"+v)
	if _, err := os.Stat(filepath.Join(dir, VolumeManagerMetricsFile)); err == nil {
		return dir
	}
	how := "go mod download -json k8s.io/kubernetes@" + v + " brings it"
	if !slices.Contains(ciSources, v) {
		t.Skipf("SKIPPED, NOT PASSED: the source of k8s.io/kubernetes@%s is not in the module cache; %s", v, how)
	}
	if !testgate.Required() {
		testgate.SkipOrFail(t, "the source of k8s.io/kubernetes@"+v+" is not in the module cache", how)
	}
	cmd := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+v)
	cmd.Dir = t.TempDir() // outside any module
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	raw, err := cmd.Output()
	var got struct{ Dir, Error string }
	if jerr := json.Unmarshal(raw, &got); err != nil || jerr != nil || got.Dir == "" {
		t.Fatalf("go mod download -json k8s.io/kubernetes@%s: %v %v %s", v, err, jerr, got.Error)
	}
	return got.Dir
}

// sourceFacts is what the source of one version says of the checked
// metrics: the exposed name of each it registers, "" for the others.
func sourceFacts(t *testing.T, dir string) map[string]string {
	t.Helper()
	reg := map[string]map[string]registeredMetric{}
	for _, f := range []string{VolumeManagerMetricsFile, KubeletMetricsFile} {
		reg[f] = readRegistered(t, filepath.Join(dir, f))
	}
	out := map[string]string{}
	for _, m := range CheckedMetrics {
		file := fileOf(t, m)
		base := strings.TrimPrefix(m, "kubelet_")
		r, ok := reg[file][base]
		if ok && r.conditional {
			t.Errorf("%s registers %s only under a condition (a feature gate?), which the table cannot say", file, r.name)
		}
		if ok {
			out[m] = r.name
		} else {
			out[m] = ""
		}
	}
	return out
}

// fileOf is the file the table reads metric's facts from: one for all
// its ranges.
func fileOf(t *testing.T, metric string) string {
	t.Helper()
	file := ""
	for _, x := range exposedTable {
		if x.Metric != metric {
			continue
		}
		if file != "" && x.File != file {
			t.Fatalf("%s: the table reads it from %s and %s", metric, file, x.File)
		}
		file = x.File
	}
	if file == "" {
		t.Fatalf("%s: not in the table", metric)
	}
	return file
}

// The table says, for every version read, what that version's source
// says: each checked metric registered under the name the table gives, or
// not registered where it says so.
func TestExposedTableMatchesTheSources(t *testing.T) {
	for _, v := range SourcesRead {
		t.Run(v, func(t *testing.T) {
			dir := kubernetesSource(t, v)
			facts := sourceFacts(t, dir)
			for _, m := range CheckedMetrics {
				x, err := Exposed(v, m)
				if err != nil {
					t.Errorf("%s: %v", m, err)
					continue
				}
				if x.Name != facts[m] {
					t.Errorf("%s: the table says kubelet %s exposes it as %q (\"\": not registered), its source %s says %q", m, v, x.Name, filepath.Join(dir, x.File), facts[m])
				}
			}
		})
	}
}

// The reader finds what it looks for: a file with a registered counter
// under a subsystem, one registered only under a feature gate, and one
// declared but never registered.
func TestReadRegistered(t *testing.T) {
	src := `package metrics

const (
	KubeletSubsystem = "kubelet"
	aKey = "a_total"
)

var (
	A = metrics.NewCounter(&metrics.CounterOpts{Subsystem: KubeletSubsystem, Name: aKey})
	B = metrics.NewGauge(&metrics.GaugeOpts{Name: "b"})
	C = metrics.NewCounter(&metrics.CounterOpts{Name: "c_total"})
)

func Register() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(A)
		if utilfeature.DefaultFeatureGate.Enabled(features.X) {
			legacyregistry.MustRegister(B)
		}
	})
}
`
	file := filepath.Join(t.TempDir(), "metrics.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got := readRegistered(t, file)
	want := map[string]registeredMetric{"a_total": {name: "kubelet_a_total"}, "b": {name: "b", conditional: true}}
	if len(got) != len(want) || got["a_total"] != want["a_total"] || got["b"] != want["b"] {
		t.Errorf("read %+v, want %+v", got, want)
	}
}
