package binaries

// This file is the file: source: an executable on the local disk, used as
// it is, with the version it reports.

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

	"sigs.k8s.io/skewtest/internal/lines"
)

// resolveFile uses an executable on the local disk as it is.
func (r *Resolver) resolveFile(ctx context.Context, component, p string) (Binary, error) {
	path, err := absPath(p)
	if err != nil {
		return Binary{}, err
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Binary{}, badSource("%s binary file:%s does not exist: build one (make WHAT=cmd/%s in a kubernetes checkout, or use checkout:/path/to/kubernetes) or use module:vX.Y.Z", component, path, component)
	}
	if err != nil {
		return Binary{}, fmt.Errorf("%s binary file:%s: %w", component, path, err)
	}
	if fi.IsDir() {
		return Binary{}, badSource("%s binary file:%s is a directory, not an executable (for a kubernetes checkout use checkout:%s)", component, path, path)
	}
	if fi.Mode()&0o111 == 0 {
		return Binary{}, badSource("%s binary file:%s is not executable (chmod +x %s)", component, path, path)
	}
	return r.localBinary(ctx, path, "file:"+path)
}

// localBinary describes a binary used where it is: the version it reports
// and its sha256.
func (r *Resolver) localBinary(ctx context.Context, path, source string) (Binary, error) {
	v, err := r.binaryVersion(ctx, path)
	if err != nil {
		return Binary{}, err
	}
	sum, err := FileSHA256(path)
	if err != nil {
		return Binary{}, err
	}
	return Binary{Version: v, Source: source, Path: path, SHA256: sum}, nil
}

var versionOutputRE = regexp.MustCompile(`Kubernetes (v[0-9]+\.[0-9]+\.[0-9]+\S*)`)

// binaryVersion runs `<path> --version` ("Kubernetes v1.36.3").
func (r *Resolver) binaryVersion(ctx context.Context, path string) (string, error) {
	out, err := r.run(ctx, "", path, "--version")
	if err != nil {
		hint := ""
		if r.arch() != runtime.GOARCH {
			hint = fmt.Sprintf(" (it is built for %s; this machine is %s)", r.arch(), runtime.GOARCH)
		}
		return "", badSource("%s --version%s: %w: %s", path, hint, err, lines.Last(string(out), 5))
	}
	m := versionOutputRE.FindStringSubmatch(string(out))
	if m == nil {
		return "", badSource("%s --version printed %q, want \"Kubernetes vX.Y.Z\"", path, strings.TrimSpace(lines.Last(string(out), 3)))
	}
	v, _, ok := parseKubeVersion(m[1])
	if !ok {
		return "", badSource("%s --version reports %q, not a usable Kubernetes version; build it with make, which stamps the version", path, m[1])
	}
	return v, nil
}

// absPath expands a leading ~/ and makes p absolute.
func absPath(p string) (string, error) {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		p = filepath.Join(home, rest)
	}
	return filepath.Abs(p)
}
