package binaries

// This file is the release source (release:, marker: and ci:): binaries
// downloaded from dl.k8s.io or a mirror, verified against their published
// sha256 and cached.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultBaseURL serves Kubernetes releases (/release/) and CI builds (/ci/).
const DefaultBaseURL = "https://dl.k8s.io"

// progressInterval is how often a download logs how far it got.
var progressInterval = 5 * time.Second

func (r *Resolver) client() *http.Client {
	if r.HTTPClient != nil {
		return r.HTTPClient
	}
	return http.DefaultClient
}

// baseURL is where kind (release or ci) lives.
func (r *Resolver) baseURL(kind string) string {
	base := r.BaseURL
	if kind == KindCI {
		base = r.CIBaseURL
	}
	if base == "" {
		base = DefaultBaseURL
	}
	return strings.TrimRight(base, "/")
}

// binaryURL is where component at version v of kind (release or ci) is
// published.
func (r *Resolver) binaryURL(component, kind, v string) string {
	return fmt.Sprintf("%s/%s/%s/bin/linux/%s/%s", r.baseURL(kind), kind, v, r.arch(), component)
}

// resolveMarker reads a marker file (<base>/<kind>/<name>.txt) and resolves
// the version it holds.
func (r *Resolver) resolveMarker(ctx context.Context, component, kind, name string) (Binary, error) {
	markerURL := fmt.Sprintf("%s/%s/%s.txt", r.baseURL(kind), kind, name)
	resp, err := r.get(ctx, markerURL)
	if err != nil {
		return Binary{}, fmt.Errorf("resolve %s marker %s: %w", kind, name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return Binary{}, badSource("%s marker %s not found at %s: markers look like latest-1.37 or stable-1.36 (see https://kubernetes.io/releases/)", kind, name, markerURL)
	}
	if resp.StatusCode != http.StatusOK {
		return Binary{}, fmt.Errorf("resolve %s marker %s: GET %s: %s", kind, name, markerURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil {
		return Binary{}, fmt.Errorf("resolve %s marker %s: read %s: %w", kind, name, markerURL, err)
	}
	text := strings.TrimSpace(string(body))
	v, parsed, ok := parseKubeVersion(text)
	if !ok || !strings.HasPrefix(text, "v") || (kind == KindRelease && parsed.BuildMetadata() != "") {
		return Binary{}, badSource("%s marker %s at %s holds %q, not a Kubernetes %s version", kind, name, markerURL, text, kind)
	}
	r.logger().Info("resolved marker", "marker", kind+"/"+name, "version", v, "url", markerURL)
	b, err := r.download(ctx, component, kind, v)
	if err != nil {
		return Binary{}, fmt.Errorf("%s marker %s -> %s: %w", kind, name, v, err)
	}
	if kind == KindCI {
		b.Source = fmt.Sprintf("marker:ci/%s -> ci:%s (%s)", name, v, r.binaryURL(component, kind, v))
	} else {
		b.Source = fmt.Sprintf("marker:%s -> release:%s (%s)", name, v, r.binaryURL(component, kind, v))
	}
	return b, nil
}

// download makes sure component at version v of kind (release or ci) is in
// the cache, verified against its published sha256, and returns it. A warm
// cache makes no request.
func (r *Resolver) download(ctx context.Context, component, kind, v string) (Binary, error) {
	url := r.binaryURL(component, kind, v)
	kindDir := filepath.Join(r.cacheDir(), kind)
	dest := filepath.Join(kindDir, v, r.arch(), component)
	done := func(b Binary) Binary {
		b.Component, b.Version, b.Source = component, v, kind+":"+url
		return b
	}
	b, err := cachedBinary(dest)
	if err == nil {
		r.logger().Debug("using cached binary", "path", dest, "sha256", b.SHA256)
		return done(b), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		r.logger().Warn("cached binary is damaged; downloading it again", "path", dest, "err", err)
	}

	resp, err := r.get(ctx, url)
	if err != nil {
		return Binary{}, fmt.Errorf("download %s %s: %w", component, v, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		if kind == KindCI {
			return Binary{}, badSource("%s %s not found at %s: is it a CI build that still exists? (CI markers: %s/ci/latest-X.Y.txt)", component, v, url, r.baseURL(kind))
		}
		return Binary{}, badSource("%s %s not found at %s: is it a released version? (see https://kubernetes.io/releases/)", component, v, url)
	}
	if resp.StatusCode != http.StatusOK {
		return Binary{}, fmt.Errorf("download %s %s: GET %s: %s", component, v, url, resp.Status)
	}

	// Download to a temporary file beside the destination and rename it
	// only once it is verified, so that the cache never holds a partial or
	// unverified binary.
	dir := filepath.Dir(dest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binary{}, err
	}
	tmp, err := os.CreateTemp(dir, "."+component+".download-*")
	if err != nil {
		removeEmptyDirs(dir, kindDir)
		return Binary{}, err
	}
	installed := false
	defer func() {
		if !installed {
			tmp.Close()
			os.Remove(tmp.Name())
			removeEmptyDirs(dir, kindDir)
		}
	}()

	r.logger().Info("downloading", "component", component, "version", v, "url", url, "bytes", resp.ContentLength)
	start := time.Now()
	h := sha256.New()
	progress := &progressLogger{logger: r.logger(), url: url, total: resp.ContentLength, last: start}
	n, err := io.Copy(io.MultiWriter(tmp, h, progress), resp.Body)
	if err != nil {
		return Binary{}, fmt.Errorf("download %s: %w", url, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return Binary{}, fmt.Errorf("download %s: got %d of %d bytes", url, n, resp.ContentLength)
	}
	if err := tmp.Close(); err != nil {
		return Binary{}, fmt.Errorf("download %s: %w", url, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	want, err := r.publishedSHA256(ctx, url+".sha256")
	if err != nil {
		return Binary{}, fmt.Errorf("refusing %s %s from %s: %w", component, v, url, err)
	}
	if got != want {
		return Binary{}, fmt.Errorf("refusing %s %s from %s: checksum mismatch: expected sha256 %s (published at %s.sha256), got %s; the mirror or cache may be corrupt", component, v, url, want, url, got)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return Binary{}, err
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return Binary{}, fmt.Errorf("install %s: %w", dest, err)
	}
	installed = true
	b, err = recordBinary(dest)
	if err != nil {
		return Binary{}, err
	}
	r.logger().Info("downloaded", "component", component, "version", v, "bytes", n, "took", time.Since(start).Round(time.Millisecond), "sha256", got)
	return done(b), nil
}

// publishedSHA256 fetches a .sha256 file: a hex sum, maybe followed by a
// file name.
func (r *Resolver) publishedSHA256(ctx context.Context, url string) (string, error) {
	resp, err := r.get(ctx, url)
	if err != nil {
		return "", fmt.Errorf("fetch its checksum: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return "", fmt.Errorf("no checksum published at %s; will not use an unverified binary", url)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetch its checksum: GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", fmt.Errorf("fetch its checksum: read %s: %w", url, err)
	}
	fields := strings.Fields(string(body))
	if len(fields) == 0 {
		return "", fmt.Errorf("checksum file %s is empty", url)
	}
	sum := strings.ToLower(fields[0])
	if raw, err := hex.DecodeString(sum); err != nil || len(raw) != sha256.Size {
		return "", fmt.Errorf("checksum file %s holds %q, not a sha256", url, fields[0])
	}
	return sum, nil
}

func (r *Resolver) get(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "skewtest")
	return r.client().Do(req)
}

// removeEmptyDirs removes dir and its parents up to, not including, stop,
// as long as they are empty.
func removeEmptyDirs(dir, stop string) {
	for dir != stop && strings.HasPrefix(dir, stop+string(filepath.Separator)) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// progressLogger logs how much of a download arrived, every
// progressInterval.
type progressLogger struct {
	logger *slog.Logger
	url    string
	total  int64
	n      int64
	last   time.Time
}

func (p *progressLogger) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	if now := time.Now(); now.Sub(p.last) >= progressInterval {
		p.last = now
		attrs := []any{"url", p.url, "bytes", p.n}
		if p.total > 0 {
			attrs = append(attrs, "total", p.total, "percent", p.n*100/p.total)
		}
		p.logger.Info("downloading", attrs...)
	}
	return len(b), nil
}
