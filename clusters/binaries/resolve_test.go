package binaries

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const ciVersion = "v1.38.0-alpha.1.123+abcdef"

// fakeDL is a fake dl.k8s.io that counts the requests it serves.
type fakeDL struct {
	*httptest.Server
	mu       sync.Mutex
	files    map[string]string
	requests []string
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func newFakeDL(t *testing.T) *fakeDL {
	t.Helper()
	const bin = "/bin/linux/amd64/kubelet"
	release := "ELF kubelet v1.36.3 " + strings.Repeat("x", 100000)
	latest := "ELF kubelet v1.37.2"
	ci := "ELF kubelet " + ciVersion
	bad := "ELF kubelet v1.36.4 (tampered)"
	f := &fakeDL{files: map[string]string{
		"/release/v1.36.3" + bin:             release,
		"/release/v1.36.3" + bin + ".sha256": sum(release) + "  kubelet\n",
		"/release/latest-1.37.txt":           "v1.37.2\n",
		"/release/v1.37.2" + bin:             latest,
		"/release/v1.37.2" + bin + ".sha256": strings.ToUpper(sum(latest)),
		"/ci/latest-1.38.txt":                ciVersion + "\n",
		"/ci/" + ciVersion + bin:             ci,
		"/ci/" + ciVersion + bin + ".sha256": sum(ci),
		"/release/v1.36.4" + bin:             bad,
		"/release/v1.36.4" + bin + ".sha256": sum("the real v1.36.4"),
		"/release/v1.36.5" + bin:             "ELF kubelet v1.36.5",
	}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.URL.Path)
		body, ok := f.files[r.URL.Path]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		fmt.Fprint(w, body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeDL) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func (f *fakeDL) requested(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.requests {
		if p == path {
			n++
		}
	}
	return n
}

func (f *fakeDL) resolver(cache string) *Resolver {
	return &Resolver{CacheDir: cache, BaseURL: f.URL, CIBaseURL: f.URL + "/", Arch: "amd64", HTTPClient: f.Client()}
}

// cacheFiles lists the regular files under dir, relative to it.
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		want    Spec
		wantErr string
	}{
		{spec: "v1.36.3", want: Spec{KindRelease, "v1.36.3"}},
		{spec: " 1.36.3 ", want: Spec{KindRelease, "v1.36.3"}},
		{spec: "v1.37.0-rc.1", want: Spec{KindRelease, "v1.37.0-rc.1"}},
		{spec: "release:v1.36.3", want: Spec{KindRelease, "v1.36.3"}},
		{spec: "latest-1.37", want: Spec{KindMarker, "latest-1.37"}},
		{spec: "stable-1.36", want: Spec{KindMarker, "stable-1.36"}},
		{spec: "stable", want: Spec{KindMarker, "stable"}},
		{spec: "ci/latest-1.38", want: Spec{KindCI, "latest-1.38"}},
		{spec: "ci/latest", want: Spec{KindCI, "latest"}},
		{spec: "ci/" + ciVersion, want: Spec{KindCI, ciVersion}},
		{spec: ciVersion, want: Spec{KindCI, ciVersion}},
		{spec: "module:v1.36.3", want: Spec{KindModule, "v1.36.3"}},
		{spec: "file:/path/to/kubelet", want: Spec{KindFile, "/path/to/kubelet"}},
		{spec: "file:./kubelet", want: Spec{KindFile, "./kubelet"}},
		{spec: "checkout:/src/kubernetes", want: Spec{KindCheckout, "/src/kubernetes"}},
		{spec: "image:kindest/node:v1.36.3", want: Spec{KindImage, "kindest/node:v1.36.3"}},
		{spec: "image:localhost:5000/kindest/node:v1.36.3", want: Spec{KindImage, "localhost:5000/kindest/node:v1.36.3"}},
		{spec: "image:kindest/node@sha256:" + strings.Repeat("ab", 32), want: Spec{KindImage, "kindest/node@sha256:" + strings.Repeat("ab", 32)}},
		{spec: "patch:/home/me/fix.diff@v1.37.2", want: Spec{KindPatch, "/home/me/fix.diff@v1.37.2"}},
		{spec: "patch: ./fix.diff@1.37.2 ", want: Spec{KindPatch, "./fix.diff@v1.37.2"}},
		{spec: "patch:/tmp/a@b/fix.diff@v1.37.2", want: Spec{KindPatch, "/tmp/a@b/fix.diff@v1.37.2"}},

		{spec: "banana", wantErr: `unknown kubelet source "banana": want vX.Y.Z, release:, module:, patch:<diff>@vX.Y.Z, file:, checkout:, image:, latest-X.Y, stable-X.Y or ci/latest-X.Y`},
		{spec: "", wantErr: "empty kubelet source"},
		{spec: "ftp:v1.36.3", wantErr: `unknown kubelet source "ftp:v1.36.3"`},
		{spec: "release:banana", wantErr: `"banana" is not a Kubernetes version`},
		{spec: "release:" + ciVersion, wantErr: "is a CI build"},
		{spec: "release:latest-1.37", wantErr: "is not a Kubernetes version"},
		{spec: "v1.36", wantErr: `unknown kubelet source "v1.36"`},
		{spec: "v1.36.3/../../etc", wantErr: "unknown kubelet source"},
		{spec: "latest-1.37/../x", wantErr: "unknown kubelet source"},
		{spec: "module:v1.37.0-rc.1", wantErr: "module: needs a release version"},
		{spec: "module:", wantErr: "module: needs a release version"},
		{spec: "file:", wantErr: "file: needs a path"},
		{spec: "checkout: ", wantErr: "checkout: needs a path"},
		{spec: "ci/banana", wantErr: `unknown kubelet source "ci/banana"`},
		{spec: "patch:/home/me/fix.diff", wantErr: "patch: needs a diff and the release it applies to"},
		{spec: "patch:@v1.37.2", wantErr: "patch: needs a diff and the release it applies to"},
		{spec: "patch:fix.diff@v1.37.0-rc.1", wantErr: "patch: needs a release version"},
		{spec: "patch:fix.diff@banana", wantErr: "patch: needs a release version"},
		{spec: "patch:fix.diff@", wantErr: "patch: needs a release version"},
		{spec: "image:kindest/node", wantErr: "give the image's tag or digest, e.g. image:kindest/node:v1.36.3"},
		{spec: "image:localhost:5000/kindest/node", wantErr: "give the image's tag or digest"},
		{spec: "image:", wantErr: "is not an image reference"},
		{spec: "image:Kindest/Node:v1", wantErr: "is not an image reference"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := ParseSpec(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseSpec(%q) = %v, %v; want error containing %q", tc.spec, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseSpec(%q) = %v, %v; want %v", tc.spec, got, err, tc.want)
			}
			// String round-trips.
			again, err := ParseSpec(got.String())
			if err != nil || again != got {
				t.Fatalf("ParseSpec(%q) = %v, %v; want %v", got.String(), again, err, got)
			}
		})
	}
}

func TestBareVersion(t *testing.T) {
	for spec, want := range map[string]string{
		"v1.37.2": "1.37.2", " 1.36.3 ": "1.36.3", "v1.37.0-rc.1": "1.37.0-rc.1",
		"release:v1.37.2": "", "module:v1.37.2": "", "patch:/d@v1.37.2": "", ciVersion: "", "latest-1.37": "", "banana": "",
	} {
		got := ""
		if v, ok := BareVersion(spec); ok {
			got = v.String()
		}
		if got != want {
			t.Errorf("BareVersion(%q) = %q, want %q (empty: not a bare version)", spec, got, want)
		}
	}
}

func TestResolveDownloads(t *testing.T) {
	for _, tc := range []struct {
		name        string
		spec        string
		wantVersion string
		wantPath    string // relative to the cache
		wantBody    string // prefix of the binary
		wantSource  string // "%s" is the server URL
	}{
		{
			name: "release", spec: "v1.36.3", wantVersion: "v1.36.3",
			wantPath:   "release/v1.36.3/amd64/kubelet",
			wantBody:   "ELF kubelet v1.36.3",
			wantSource: "release:%s/release/v1.36.3/bin/linux/amd64/kubelet",
		},
		{
			name: "release prefix", spec: "release:v1.36.3", wantVersion: "v1.36.3",
			wantPath:   "release/v1.36.3/amd64/kubelet",
			wantBody:   "ELF kubelet v1.36.3",
			wantSource: "release:%s/release/v1.36.3/bin/linux/amd64/kubelet",
		},
		{
			name: "marker", spec: "latest-1.37", wantVersion: "v1.37.2",
			wantPath:   "release/v1.37.2/amd64/kubelet",
			wantBody:   "ELF kubelet v1.37.2",
			wantSource: "marker:latest-1.37 -> release:v1.37.2 (%s/release/v1.37.2/bin/linux/amd64/kubelet)",
		},
		{
			name: "ci marker", spec: "ci/latest-1.38", wantVersion: ciVersion,
			wantPath:   "ci/" + ciVersion + "/amd64/kubelet",
			wantBody:   "ELF kubelet " + ciVersion,
			wantSource: "marker:ci/latest-1.38 -> ci:" + ciVersion + " (%s/ci/" + ciVersion + "/bin/linux/amd64/kubelet)",
		},
		{
			name: "ci version", spec: "ci/" + ciVersion, wantVersion: ciVersion,
			wantPath:   "ci/" + ciVersion + "/amd64/kubelet",
			wantBody:   "ELF kubelet " + ciVersion,
			wantSource: "ci:%s/ci/" + ciVersion + "/bin/linux/amd64/kubelet",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dl := newFakeDL(t)
			cache := t.TempDir()
			ctx := context.Background()
			b, err := dl.resolver(cache).Resolve(ctx, "kubelet", tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			wantPath := filepath.Join(cache, filepath.FromSlash(tc.wantPath))
			want := Binary{
				Component: "kubelet",
				Version:   tc.wantVersion,
				Source:    fmt.Sprintf(tc.wantSource, dl.URL),
				Path:      wantPath,
			}
			got := b
			got.SHA256 = ""
			if got != want {
				t.Fatalf("Resolve(%q) =\n %+v\nwant\n %+v", tc.spec, got, want)
			}
			data, err := os.ReadFile(b.Path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(data), tc.wantBody) {
				t.Errorf("%s holds %.40q, want %q...", b.Path, data, tc.wantBody)
			}
			if b.SHA256 != sum(string(data)) {
				t.Errorf("SHA256 = %s, want %s", b.SHA256, sum(string(data)))
			}
			fi, err := os.Stat(b.Path)
			if err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("%s: mode %v, %v; want 0755", b.Path, fi.Mode(), err)
			}
			wantFiles := []string{tc.wantPath, tc.wantPath + ".sha256"}
			if files := cacheFiles(t, cache); !reflect.DeepEqual(files, wantFiles) {
				t.Errorf("cache holds %q, want %q (no temporary files)", files, wantFiles)
			}

			// A warm cache makes no request for a version (markers, which
			// move, are read again).
			before := dl.count()
			again, err := dl.resolver(cache).Resolve(ctx, "kubelet", tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if again != b {
				t.Errorf("second Resolve = %+v, want %+v", again, b)
			}
			wantRequests := 0
			if strings.Contains(tc.spec, "latest") {
				wantRequests = 1
			}
			if n := dl.count() - before; n != wantRequests {
				t.Errorf("second Resolve made %d requests, want %d", n, wantRequests)
			}
		})
	}
}

func TestResolveDownloadErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     string
		wantErrs []string // "%s" is the server URL
	}{
		{
			name: "checksum mismatch", spec: "v1.36.4",
			wantErrs: []string{
				"refusing kubelet v1.36.4 from %s/release/v1.36.4/bin/linux/amd64/kubelet",
				"checksum mismatch",
				"expected sha256 " + sum("the real v1.36.4"),
				"got " + sum("ELF kubelet v1.36.4 (tampered)"),
				"the mirror or cache may be corrupt",
			},
		},
		{
			name: "not found", spec: "v1.99.0",
			wantErrs: []string{"kubelet v1.99.0 not found at %s/release/v1.99.0/bin/linux/amd64/kubelet: is it a released version? (see https://kubernetes.io/releases/)"},
		},
		{
			name: "no published checksum", spec: "v1.36.5",
			wantErrs: []string{"refusing kubelet v1.36.5", "no checksum published at %s/release/v1.36.5/bin/linux/amd64/kubelet.sha256"},
		},
		{
			name: "unknown marker", spec: "stable-1.99",
			wantErrs: []string{"release marker stable-1.99 not found at %s/release/stable-1.99.txt"},
		},
		{
			name: "ci marker missing", spec: "ci/latest-1.99",
			wantErrs: []string{"ci marker latest-1.99 not found at %s/ci/latest-1.99.txt"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dl := newFakeDL(t)
			cache := t.TempDir()
			_, err := dl.resolver(cache).Resolve(context.Background(), "kubelet", tc.spec)
			if err == nil {
				t.Fatalf("Resolve(%q) succeeded", tc.spec)
			}
			for _, w := range tc.wantErrs {
				if w = strings.ReplaceAll(w, "%s", dl.URL); !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if files := cacheFiles(t, cache); len(files) != 0 {
				t.Errorf("failed Resolve left %q in the cache", files)
			}
		})
	}
}

func TestResolveMarkerNotAVersion(t *testing.T) {
	dl := newFakeDL(t)
	_, err := dl.resolver(t.TempDir()).Resolve(context.Background(), "kubelet", "latest")
	// latest.txt is not served: 404.
	if err == nil || !strings.Contains(err.Error(), "release/latest.txt") {
		t.Fatalf("err = %v", err)
	}
	dl.mu.Lock()
	dl.files["/release/latest.txt"] = "<html>oops</html>"
	dl.mu.Unlock()
	_, err = dl.resolver(t.TempDir()).Resolve(context.Background(), "kubelet", "latest")
	if err == nil || !strings.Contains(err.Error(), `holds "<html>oops</html>", not a Kubernetes release version`) {
		t.Fatalf("err = %v", err)
	}
}

func TestResolveRepairsDamagedCache(t *testing.T) {
	dl := newFakeDL(t)
	cache := t.TempDir()
	ctx := context.Background()
	b, err := dl.resolver(cache).Resolve(ctx, "kubelet", "v1.36.3")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.Path, []byte("truncated"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := dl.count()
	again, err := dl.resolver(cache).Resolve(ctx, "kubelet", "v1.36.3")
	if err != nil {
		t.Fatal(err)
	}
	if again != b {
		t.Errorf("after repair got %+v, want %+v", again, b)
	}
	if n := dl.count() - before; n != 2 {
		t.Errorf("repair made %d requests, want 2 (binary and checksum)", n)
	}
}

func TestDownloadLogsProgress(t *testing.T) {
	old := progressInterval
	progressInterval = 0
	t.Cleanup(func() { progressInterval = old })
	var logs bytes.Buffer
	dl := newFakeDL(t)
	r := dl.resolver(t.TempDir())
	r.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := r.Resolve(context.Background(), "kubelet", "v1.36.3"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "total=") || !strings.Contains(logs.String(), "percent=100") {
		t.Errorf("no progress logged:\n%s", logs.String())
	}
}

func TestResolvePlan(t *testing.T) {
	dl := newFakeDL(t)
	cache := t.TempDir()
	ctx := context.Background()
	specs := []string{"v1.36.3", "latest-1.37", "release:v1.36.3", "v1.36.3", "latest-1.37", "1.36.3"}
	bins, err := dl.resolver(cache).ResolvePlan(ctx, "kubelet", specs)
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, b := range bins {
		versions = append(versions, b.Version)
		if b.Component != "kubelet" || b.Path == "" || b.SHA256 == "" || b.Source == "" {
			t.Errorf("incomplete %+v", b)
		}
	}
	if want := []string{"v1.36.3", "v1.37.2", "v1.36.3", "v1.36.3", "v1.37.2", "v1.36.3"}; !slices.Equal(versions, want) {
		t.Errorf("versions %q, want %q", versions, want)
	}
	for _, p := range []string{"/release/latest-1.37.txt", "/release/v1.36.3/bin/linux/amd64/kubelet", "/release/v1.37.2/bin/linux/amd64/kubelet"} {
		if n := dl.requested(p); n != 1 {
			t.Errorf("%s requested %d times, want once", p, n)
		}
	}
}

func TestResolvePlanFails(t *testing.T) {
	for _, tc := range []struct {
		name         string
		specs        []string
		wantErr      string
		wantRequests int
		wantFiles    int
	}{
		{
			name:         "bad spec is found before fetching anything",
			specs:        []string{"v1.36.3", "latest-1.37", "banana"},
			wantErr:      `plan entry 3: unknown kubelet source "banana"`,
			wantRequests: 0,
		},
		{
			name:         "stops at the first failure",
			specs:        []string{"v1.36.3", "v1.36.4", "latest-1.37"},
			wantErr:      "plan entry 2 (v1.36.4): refusing kubelet v1.36.4",
			wantRequests: 4,
			wantFiles:    2, // v1.36.3 and its record, complete and verified
		},
		{
			name:    "empty plan",
			wantErr: "no kubelet sources",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dl := newFakeDL(t)
			cache := t.TempDir()
			_, err := dl.resolver(cache).ResolvePlan(context.Background(), "kubelet", tc.specs)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if n := dl.count(); n != tc.wantRequests {
				t.Errorf("%d requests, want %d: %q", n, tc.wantRequests, dl.requests)
			}
			if files := cacheFiles(t, cache); len(files) != tc.wantFiles {
				t.Errorf("cache holds %q, want %d files", files, tc.wantFiles)
			}
		})
	}
}

// writeScript writes an executable shell script.
func writeScript(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), mode); err != nil {
		t.Fatal(err)
	}
}

func TestResolveFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs /bin/sh")
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "kubelet")
	writeScript(t, good, `[ "$1" = --version ] && echo "Kubernetes v1.36.3"`+"\n", 0o755)
	writeScript(t, filepath.Join(dir, "noexec"), `echo "Kubernetes v1.36.3"`+"\n", 0o644)
	writeScript(t, filepath.Join(dir, "noversion"), `echo "kubelet (devel)"`+"\n", 0o755)
	writeScript(t, filepath.Join(dir, "broken"), "echo 'exec format error' >&2; exit 3\n", 0o755)
	data, _ := os.ReadFile(good)

	t.Run("ok", func(t *testing.T) {
		r := &Resolver{CacheDir: t.TempDir()}
		b, err := r.Resolve(context.Background(), "kubelet", "file:"+good)
		if err != nil {
			t.Fatal(err)
		}
		want := Binary{Component: "kubelet", Version: "v1.36.3", Source: "file:" + good, Path: good, SHA256: sum(string(data))}
		if b != want {
			t.Fatalf("got %+v, want %+v", b, want)
		}
	})
	t.Run("relative", func(t *testing.T) {
		t.Chdir(dir)
		b, err := (&Resolver{}).Resolve(context.Background(), "kubelet", "file:./kubelet")
		if err != nil {
			t.Fatal(err)
		}
		if b.Path != good || b.Source != "file:"+good {
			t.Fatalf("got %+v, want path %s", b, good)
		}
	})
	for _, tc := range []struct {
		name, spec string
		wantErrs   []string
	}{
		{"missing", "file:" + filepath.Join(dir, "nope"), []string{"file:" + filepath.Join(dir, "nope") + " does not exist", "module:vX.Y.Z"}},
		{"not executable", "file:" + filepath.Join(dir, "noexec"), []string{"is not executable", "chmod +x"}},
		{"directory", "file:" + dir, []string{"is a directory", "checkout:" + dir}},
		{"no version", "file:" + filepath.Join(dir, "noversion"), []string{`printed "kubelet (devel)", want "Kubernetes vX.Y.Z"`}},
		{"version fails", "file:" + filepath.Join(dir, "broken"), []string{"broken --version", "exit status 3", "exec format error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := (&Resolver{CacheDir: t.TempDir()}).Resolve(context.Background(), "kubelet", tc.spec)
			if err == nil {
				t.Fatal("succeeded")
			}
			if !errors.Is(err, ErrBadSource) {
				t.Errorf("not ErrBadSource (the user must give another file; exit 2): %v", err)
			}
			for _, w := range tc.wantErrs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// fakeCheckout records commands and acts like `make` in a kubernetes
// checkout.
type fakeCheckout struct {
	calls   [][]string
	dirs    []string
	output  string // where make puts the kubelet, relative to the checkout
	makeErr error
}

func (f *fakeCheckout) run(ctx context.Context, dir string, argv ...string) ([]byte, error) {
	f.calls = append(f.calls, argv)
	f.dirs = append(f.dirs, dir)
	switch {
	case argv[0] == "make":
		if f.makeErr != nil {
			return []byte("+++ [0101] Building go targets for linux/amd64\ncmd/kubelet/app/server.go:1: syntax error\n"), f.makeErr
		}
		out := filepath.Join(dir, filepath.FromSlash(f.output))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return nil, err
		}
		return []byte("+++ [0101] Building go targets for linux/amd64\n"), os.WriteFile(out, []byte("ELF kubelet built"), 0o755)
	case len(argv) == 2 && argv[1] == "--version":
		return []byte("Kubernetes v1.38.0-alpha.0.42+0123456789abcd-dirty\n"), nil
	}
	return nil, fmt.Errorf("unexpected command %q", argv)
}

func TestResolveCheckout(t *testing.T) {
	arch := runtime.GOARCH
	newCheckout := func(t *testing.T, gomod string) string {
		dir := t.TempDir()
		if gomod != "" {
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	const k8sMod = "// This is a generated file. Do not edit directly.\n\nmodule k8s.io/kubernetes\n\ngo 1.26.0\n"

	for _, output := range []string{"_output/bin/kubelet", "_output/local/go/bin/kubelet", "_output/local/bin/linux/" + arch + "/kubelet"} {
		t.Run(output, func(t *testing.T) {
			dir := newCheckout(t, k8sMod)
			f := &fakeCheckout{output: output}
			r := &Resolver{CacheDir: t.TempDir(), Runner: f.run}
			b, err := r.Resolve(context.Background(), "kubelet", "checkout:"+dir)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, filepath.FromSlash(output))
			want := Binary{Component: "kubelet", Version: "v1.38.0-alpha.0.42+0123456789abcd-dirty", Source: "checkout:" + dir, Path: path, SHA256: sum("ELF kubelet built")}
			if b != want {
				t.Fatalf("got %+v\nwant %+v", b, want)
			}
			wantCalls := [][]string{
				{"make", "WHAT=cmd/kubelet", "KUBE_BUILD_PLATFORMS=linux/" + arch},
				{path, "--version"},
			}
			if !reflect.DeepEqual(f.calls, wantCalls) || f.dirs[0] != dir {
				t.Errorf("commands %q in %q, want %q with make in %s", f.calls, f.dirs, wantCalls, dir)
			}
		})
	}

	t.Run("prefers the newest output", func(t *testing.T) {
		dir := newCheckout(t, k8sMod)
		stale := filepath.Join(dir, "_output", "local", "bin", "linux", arch, "kubelet")
		writeScript(t, stale, "old", 0o755)
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(stale, old, old); err != nil {
			t.Fatal(err)
		}
		f := &fakeCheckout{output: "_output/local/go/bin/kubelet"}
		b, err := (&Resolver{CacheDir: t.TempDir(), Runner: f.run}).Resolve(context.Background(), "kubelet", "checkout:"+dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(dir, "_output", "local", "go", "bin", "kubelet"); b.Path != want {
			t.Errorf("path %s, want %s", b.Path, want)
		}
	})

	t.Run("cross build", func(t *testing.T) {
		other := "arm64"
		if arch == other {
			other = "amd64"
		}
		dir := newCheckout(t, k8sMod)
		// A native build from earlier must not be taken for the target.
		writeScript(t, filepath.Join(dir, "_output", "bin", "kubelet"), "native", 0o755)
		f := &fakeCheckout{output: "_output/local/bin/linux/" + other + "/kubelet"}
		b, err := (&Resolver{CacheDir: t.TempDir(), Arch: other, Runner: f.run}).Resolve(context.Background(), "kubelet", "checkout:"+dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(dir, "_output", "local", "bin", "linux", other, "kubelet"); b.Path != want {
			t.Errorf("path %s, want %s", b.Path, want)
		}
		if got := f.calls[0][2]; got != "KUBE_BUILD_PLATFORMS=linux/"+other {
			t.Errorf("make %q", f.calls[0])
		}
	})

	for _, tc := range []struct {
		name      string
		gomod     string
		fake      fakeCheckout
		noDir     bool
		wantErrs  []string
		wantCalls int
	}{
		{name: "no go.mod", wantErrs: []string{"is not a kubernetes checkout: it has no go.mod"}},
		{name: "other module", gomod: "module example.com/other\n", wantErrs: []string{`declares module "example.com/other", want k8s.io/kubernetes`}},
		{name: "missing dir", noDir: true, wantErrs: []string{"no such file or directory"}},
		{
			name: "make fails", gomod: k8sMod, fake: fakeCheckout{makeErr: fmt.Errorf("exit status 2")},
			wantErrs: []string{"make WHAT=cmd/kubelet KUBE_BUILD_PLATFORMS=linux/" + arch, "exit status 2", "syntax error"}, wantCalls: 1,
		},
		{
			name: "make builds nothing", gomod: k8sMod, fake: fakeCheckout{output: "somewhere/else/kubelet"},
			wantErrs: []string{"built no kubelet: looked for", "_output/bin/kubelet"}, wantCalls: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newCheckout(t, tc.gomod)
			if tc.noDir {
				dir = filepath.Join(dir, "nope")
			}
			f := tc.fake
			_, err := (&Resolver{CacheDir: t.TempDir(), Runner: f.run}).Resolve(context.Background(), "kubelet", "checkout:"+dir)
			if err == nil {
				t.Fatal("succeeded")
			}
			for _, w := range tc.wantErrs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if len(f.calls) != tc.wantCalls {
				t.Errorf("ran %q, want %d commands", f.calls, tc.wantCalls)
			}
		})
	}
}

func TestResolveDefaults(t *testing.T) {
	var r Resolver
	if r.arch() != runtime.GOARCH || r.baseURL(KindRelease) != DefaultBaseURL || r.baseURL(KindCI) != DefaultBaseURL || r.cacheDir() != DefaultCacheDir() {
		t.Errorf("defaults: arch %s base %s ci %s cache %s", r.arch(), r.baseURL(KindRelease), r.baseURL(KindCI), r.cacheDir())
	}
	if got := r.binaryURL("kubelet", KindRelease, "v1.36.3"); got != "https://dl.k8s.io/release/v1.36.3/bin/linux/"+runtime.GOARCH+"/kubelet" {
		t.Errorf("binaryURL = %s", got)
	}
	for _, bad := range []struct{ component, arch string }{{"../kubelet", ""}, {"kubelet", "amd64/../x"}} {
		r := Resolver{Arch: bad.arch, CacheDir: t.TempDir()}
		if _, err := r.Resolve(context.Background(), bad.component, "v1.36.3"); err == nil || !strings.Contains(err.Error(), "invalid") {
			t.Errorf("Resolve(%q) with arch %q: err = %v, want invalid", bad.component, bad.arch, err)
		}
	}
}

// A batch resolves the same kubelet for each of its runs, each with a
// logger of its own: the process says "resolved" once per binary.
func TestResolvedIsLoggedOncePerBinary(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs /bin/sh")
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "kubelet-a"), filepath.Join(dir, "kubelet-b")
	writeScript(t, a, `[ "$1" = --version ] && echo "Kubernetes v1.36.3"`+"\n", 0o755)
	writeScript(t, b, `[ "$1" = --version ] && echo "Kubernetes v1.37.2"`+"\n", 0o755)
	var out strings.Builder
	for _, spec := range []string{a, a, b, a, b} {
		r := &Resolver{CacheDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&out, nil))}
		if _, err := r.Resolve(context.Background(), "kubelet", "file:"+spec); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{a, b} {
		if n := strings.Count(out.String(), "source=file:"+p+" "); n != 1 {
			t.Errorf("%s logged as resolved %d times, want once:\n%s", p, n, out.String())
		}
	}
}
