package binaries

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Two builds of one tool at once (two runs sharing the cache) build it
// once: the second waits for the first's lock and finds its binaries. A
// build dir a killed build left goes under the lock. The go command is a
// stub that counts its builds and writes the binaries.
func TestBuildToolOneBuildAtATime(t *testing.T) {
	cache := t.TempDir()
	tool := GoTool{Module: "example.com/tool", Version: "v1.2.3", Commands: []string{"cmd/a", "cmd/b"}}
	dir := filepath.Join(cache, "tools", tool.dirName())
	stale := filepath.Join(dir, buildTmpPrefix+"123")
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	// go mod tidy has run: the build is what is left to do.
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	builds := filepath.Join(t.TempDir(), "builds")
	goStub := filepath.Join(t.TempDir(), "go")
	writeScript(t, goStub, fmt.Sprintf(`[ "$1" = build ] || exit 1
echo build >> %s
sleep 1
while [ $# -gt 0 ]; do
	if [ "$1" = -o ]; then out=$2; fi
	shift
done
echo a > "$out/a"; echo b > "$out/b"
`, builds), 0o755)
	b := &ModuleBuilder{CacheDir: cache, GoBinary: goStub}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	outs := make([]map[string]Binary, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = b.BuildTool(ctx, tool)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
		if len(outs[i]) != 2 || outs[i]["a"].SHA256 == "" {
			t.Errorf("build %d returned %+v; want binaries a and b with their sha256", i, outs[i])
		}
	}
	data, err := os.ReadFile(builds)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "build"); n != 1 {
		t.Errorf("go build ran %d times for two builds at once of one tool; want once", n)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the build dir a killed build left, %s, is still there (%v)", stale, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, buildTmpPrefix+"*"))
	if len(left) != 0 {
		t.Errorf("build dirs left: %v", left)
	}
}
