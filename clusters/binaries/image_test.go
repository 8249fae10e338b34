package binaries

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// fakeKubelet is a script that answers --version like a kubelet.
func fakeKubelet(v string) string {
	return "#!/bin/sh\n[ \"$1\" = --version ] && echo \"Kubernetes " + v + "\"\n"
}

// tarEntry is one file of a test layer; a name starting with "dir:" is a
// directory, "link:" a symlink to body.
type tarEntry struct{ name, body string }

func layerOf(t *testing.T, entries ...tarEntry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o755, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if n, ok := strings.CutPrefix(e.name, "link:"); ok {
			hdr = &tar.Header{Name: n, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: e.body}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func imageOf(t *testing.T, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// testRegistry is an in-process OCI registry (go-containerregistry's, the
// distribution API) on 127.0.0.1, which the client speaks plain HTTP to.
func testRegistry(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return srv, strings.TrimPrefix(srv.URL, "http://")
}

func push(t *testing.T, ref string, img v1.Image) string {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func TestResolveImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("runs the extracted kubelet")
	}
	_, host := testRegistry(t)
	kubelet := tarEntry{"usr/bin/kubelet", fakeKubelet("v1.36.3")}
	version := tarEntry{"kind/version", "v1.36.3\n"}
	for _, tc := range []struct {
		name    string
		layers  []v1.Layer
		want    string // content of the extracted kubelet
		wantErr string
	}{
		{name: "one layer", layers: []v1.Layer{layerOf(t, tarEntry{"etc/x", "x"}, version, kubelet)}, want: kubelet.body},
		{name: "leading ./ in names", layers: []v1.Layer{layerOf(t, tarEntry{"./kind/version", "v1.36.3"}, tarEntry{"./usr/bin/kubelet", kubelet.body})}, want: kubelet.body},
		{name: "top layer wins", layers: []v1.Layer{
			layerOf(t, version, tarEntry{"usr/bin/kubelet", fakeKubelet("v1.35.0")}),
			layerOf(t, kubelet),
		}, want: kubelet.body},
		{name: "version file in a lower layer", layers: []v1.Layer{
			layerOf(t, version),
			layerOf(t, tarEntry{"usr/bin/other", "x"}),
			layerOf(t, kubelet),
		}, want: kubelet.body},
		{name: "no kind version: the kubelet tells", layers: []v1.Layer{layerOf(t, kubelet)}, want: kubelet.body},
		{name: "whiteout", layers: []v1.Layer{
			layerOf(t, version, kubelet),
			layerOf(t, tarEntry{"usr/bin/.wh.kubelet", ""}),
		}, wantErr: "/usr/bin/kubelet is deleted in the image"},
		{name: "opaque directory", layers: []v1.Layer{
			layerOf(t, version, kubelet),
			layerOf(t, tarEntry{"usr/bin/.wh..wh..opq", ""}, tarEntry{"usr/bin/kubectl", "x"}),
		}, wantErr: "/usr/bin/kubelet is deleted in the image"},
		{name: "opaque directory with the file beside it", layers: []v1.Layer{
			layerOf(t, version, tarEntry{"usr/bin/kubelet", fakeKubelet("v1.35.0")}),
			layerOf(t, tarEntry{"usr/bin/.wh..wh..opq", ""}, kubelet),
		}, want: kubelet.body},
		{name: "no kubelet", layers: []v1.Layer{layerOf(t, version)}, wantErr: "has no /usr/bin/kubelet; is it a kind node image"},
		{name: "symlink", layers: []v1.Layer{layerOf(t, version, tarEntry{"link:usr/bin/kubelet", "/opt/kubelet"})}, wantErr: "/usr/bin/kubelet is a link to /opt/kubelet"},
		{name: "inconsistent image", layers: []v1.Layer{layerOf(t, tarEntry{"kind/version", "v1.37.2"}, kubelet)}, wantErr: "/kind/version says v1.37.2 but its kubelet reports v1.36.3"},
		{name: "version file is not a version", layers: []v1.Layer{layerOf(t, tarEntry{"kind/version", "banana"}, kubelet)}, wantErr: `/kind/version says "banana"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := host + "/kindest/node:" + strings.NewReplacer(" ", "-", ":", "", "/", "", ".", "").Replace(tc.name)
			digest := push(t, ref, imageOf(t, tc.layers...))
			cache := t.TempDir()
			b, err := (&Resolver{CacheDir: cache}).Resolve(context.Background(), "kubelet", "image:"+ref)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %+v, %v; want error containing %q", b, err, tc.wantErr)
				}
				if files := cacheFiles(t, cache); len(files) != 0 {
					t.Fatalf("a failed extraction left %v in the cache", files)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Version != "v1.36.3" || b.Component != "kubelet" || b.SHA256 != sum(tc.want) {
				t.Fatalf("got %+v; want kubelet v1.36.3 with sha256 %s", b, sum(tc.want))
			}
			if want := "image:" + host + "/kindest/node@" + digest; b.Source != want {
				t.Fatalf("source %q, want %q", b.Source, want)
			}
		})
	}
}

// A reference by digest is served from the cache with the registry gone; a
// tag, which may move, needs the registry.
func TestResolveImageCache(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("runs the extracted kubelet")
	}
	srv, host := testRegistry(t)
	img := imageOf(t, layerOf(t, tarEntry{"kind/version", "v1.36.3"}, tarEntry{"usr/bin/kubelet", fakeKubelet("v1.36.3")}))
	digest := push(t, host+"/kindest/node:v1.36.3", img)
	cache := t.TempDir()
	r := &Resolver{CacheDir: cache}
	first, err := r.Resolve(context.Background(), "kubelet", "image:"+host+"/kindest/node:v1.36.3")
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	again, err := r.Resolve(context.Background(), "kubelet", "image:"+host+"/kindest/node@"+digest)
	if err != nil {
		t.Fatalf("by digest with the registry down: %v", err)
	}
	if again != first {
		t.Fatalf("cached %+v, first %+v", again, first)
	}
	_, err = r.Resolve(context.Background(), "kubelet", "image:"+host+"/kindest/node:v1.36.3")
	if err == nil || !strings.Contains(err.Error(), "cannot read it from "+host) || !strings.Contains(err.Error(), "module:vX.Y.Z") {
		t.Fatalf("by tag with the registry down: %v; want an error naming the registry and the offline alternative", err)
	}
	if errors.Is(err, ErrBadSource) {
		t.Errorf("a registry that is down is marked as a bad source (exit 2), want an infrastructure failure: %v", err)
	}
}

// A multi-platform index yields the kubelet of the resolver's architecture;
// one that cannot run here takes its version from /kind/version.
func TestResolveImagePlatform(t *testing.T) {
	_, host := testRegistry(t)
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	plat := func(arch, body string) mutate.IndexAddendum {
		img := imageOf(t, layerOf(t, tarEntry{"kind/version", "v1.36.3"}, tarEntry{"usr/bin/kubelet", body}))
		img, err := mutate.ConfigFile(img, &v1.ConfigFile{OS: "linux", Architecture: arch})
		if err != nil {
			t.Fatal(err)
		}
		return mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}}
	}
	idx := mutate.AppendManifests(empty.Index, plat(runtime.GOARCH, fakeKubelet("v1.36.3")), plat(other, "not for this machine"))
	ref, err := name.ParseReference(host + "/kindest/node:v1.36.3")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	b, err := (&Resolver{CacheDir: t.TempDir(), Arch: other}).Resolve(context.Background(), "kubelet", "image:"+ref.String())
	if err != nil {
		t.Fatal(err)
	}
	if b.SHA256 != sum("not for this machine") || b.Version != "v1.36.3" {
		t.Fatalf("got %+v; want the %s kubelet, version from /kind/version", b, other)
	}
	if _, err := (&Resolver{CacheDir: t.TempDir(), Arch: "riscv64"}).Resolve(context.Background(), "kubelet", "image:"+ref.String()); err == nil || !strings.Contains(err.Error(), "riscv64") {
		t.Fatalf("an architecture the index lacks: %v; want an error naming it", err)
	}
}

func TestResolveImageNotFound(t *testing.T) {
	_, host := testRegistry(t)
	cache := t.TempDir()
	_, err := (&Resolver{CacheDir: cache}).Resolve(context.Background(), "kubelet", "image:"+host+"/kindest/node:v9.9.9")
	if err == nil || !strings.Contains(err.Error(), "image "+host+"/kindest/node:v9.9.9 not found") || !strings.Contains(err.Error(), "check the tag") {
		t.Fatalf("got %v; want a not-found error naming the image and the fix", err)
	}
	if files := cacheFiles(t, cache); len(files) != 0 {
		t.Fatalf("left %v in the cache", files)
	}
}
