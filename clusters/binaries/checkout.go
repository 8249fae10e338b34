package binaries

// This file is the checkout: source: a binary built with make in a local
// kubernetes checkout.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/internal/lines"
)

// resolveCheckout builds component in a local kubernetes checkout.
func (r *Resolver) resolveCheckout(ctx context.Context, component, p string) (Binary, error) {
	dir, err := absPath(p)
	if err != nil {
		return Binary{}, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return Binary{}, fmt.Errorf("checkout:%s: %w", dir, err)
	}
	if !fi.IsDir() {
		return Binary{}, badSource("checkout:%s is not a directory (for a binary use file:%s)", dir, dir)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if errors.Is(err, fs.ErrNotExist) {
		return Binary{}, badSource("checkout:%s is not a kubernetes checkout: it has no go.mod (want a clone of https://github.com/kubernetes/kubernetes)", dir)
	}
	if err != nil {
		return Binary{}, fmt.Errorf("checkout:%s: %w", dir, err)
	}
	if mod := modulePath(gomod); mod != "k8s.io/kubernetes" {
		return Binary{}, badSource("checkout:%s is not a kubernetes checkout: its go.mod declares module %q, want k8s.io/kubernetes", dir, mod)
	}
	argv := []string{"make", "WHAT=cmd/" + component, "KUBE_BUILD_PLATFORMS=linux/" + r.arch()}
	r.logger().Info("building in the kubernetes checkout (several minutes when cold)", "dir", dir, "command", strings.Join(argv, " "))
	start := time.Now()
	if out, err := r.run(ctx, dir, argv...); err != nil {
		return Binary{}, fmt.Errorf("%s in %s: %w\n%s", strings.Join(argv, " "), dir, err, lines.Last(string(out), 20))
	}
	r.logger().Info("built", "dir", dir, "component", component, "took", time.Since(start).Round(time.Second))
	path, err := r.checkoutOutput(dir, component)
	if err != nil {
		return Binary{}, err
	}
	return r.localBinary(ctx, path, "checkout:"+dir)
}

// checkoutOutput finds what `make WHAT=cmd/<component>` built: the newest of
// the places the kubernetes build puts binaries for the target platform.
func (r *Resolver) checkoutOutput(dir, component string) (string, error) {
	arch := r.arch()
	candidates := []string{
		filepath.Join(dir, "_output", "local", "bin", "linux", arch, component),
		filepath.Join(dir, "_output", "local", "go", "bin", "linux_"+arch, component),
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == arch {
		// Native builds also land here (_output/bin links to
		// _output/local/bin/<platform>).
		candidates = append(candidates,
			filepath.Join(dir, "_output", "bin", component),
			filepath.Join(dir, "_output", "local", "go", "bin", component))
	}
	var best string
	var bestTime time.Time
	for _, c := range candidates {
		fi, err := os.Stat(c)
		if err != nil || fi.IsDir() {
			continue
		}
		if best == "" || fi.ModTime().After(bestTime) {
			best, bestTime = c, fi.ModTime()
		}
	}
	if best == "" {
		return "", fmt.Errorf("make in %s built no %s: looked for %s", dir, component, strings.Join(candidates, ", "))
	}
	return best, nil
}

var moduleLineRE = regexp.MustCompile(`(?m)^\s*module\s+"?([^\s"]+)"?`)

// modulePath returns the module path a go.mod declares, or "".
func modulePath(gomod []byte) string {
	m := moduleLineRE.FindSubmatch(gomod)
	if m == nil {
		return ""
	}
	return string(m[1])
}
