//go:build images

// The node image build test runs only with the images build tag (make
// test-images): a cold build takes 10-15 minutes, too long for make test.
// Under that tag a missing prerequisite fails rather than skips, so the
// target cannot pass without having built and checked the image.

package nodeimage

import (
	"compress/gzip"
	"context"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/debian"
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestBuild builds the real v1.37.2 node image (cold: 10-15 min on 2
// cores, mostly Go builds and debootstrap; warm: seconds) and checks what
// is inside: the node binaries, kind's files, the containerd config, and
// the control-plane images in the rootfs's containerd store.
func TestBuild(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("building a node image needs root (debootstrap, file ownership): run sudo -E make test-images")
	}
	cache := binaries.DefaultCacheDir()
	if _, err := exec.LookPath("debootstrap"); err != nil {
		if _, err := os.Stat(filepath.Join(cache, "kind", "base", baseKey()+".tar")); err != nil {
			t.Fatal("debootstrap is not installed and no base rootfs is cached: run scripts/install-deps.sh (or apt-get install debootstrap)")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	v := version.MustParseSemantic("v1.37.2")
	cfg := Config{Version: v, CacheDir: cache, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	start := time.Now()
	img, err := Build(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Build: %s, %s (%s)", time.Since(start).Round(100*time.Millisecond), img.RootfsTar, humanBytes(img.Size))

	// A second Build is a cache hit.
	start = time.Now()
	again, err := Build(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if warm := time.Since(start); warm > 10*time.Second || again.RootfsTar != img.RootfsTar || again.Size != img.Size {
		t.Errorf("warm Build took %s and gave %+v", warm, again)
	}

	if img.Name != "skewtest/kind-node:v1.37.2" || img.Version != "v1.37.2" || img.StopSignal != "SIGRTMIN+3" ||
		strings.Join(img.Entrypoint, " ") != "/usr/local/bin/entrypoint /sbin/init" || img.Env[0] != "container=docker" {
		t.Errorf("image metadata: %+v", img)
	}
	wantImages := []string{
		"localhost/skewtest/kind-cni:v1", "registry.k8s.io/etcd:3.7.0-0",
		"registry.k8s.io/kube-apiserver:v1.37.2", "registry.k8s.io/kube-controller-manager:v1.37.2",
		"registry.k8s.io/kube-proxy:v1.37.2", "registry.k8s.io/kube-scheduler:v1.37.2", "registry.k8s.io/pause:3.10.2",
	}
	if !reflect.DeepEqual(img.Images, wantImages) {
		t.Errorf("Image.Images = %q, want %q", img.Images, wantImages)
	}
	if filepath.Dir(img.RootfsTar) != filepath.Join(cache, "kind", "node-v1.37.2") {
		t.Errorf("tar at %s", img.RootfsTar)
	}

	// What the tar holds.
	list, err := exec.CommandContext(ctx, "tar", "-tvf", img.RootfsTar).Output()
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]string{}
	for _, line := range strings.Split(string(list), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		name := f[5]
		entries[strings.TrimSuffix(name, "/")] = line
	}
	for _, want := range []string{
		"./usr/bin/kubelet", "./usr/bin/kubeadm", "./usr/bin/kubectl",
		"./usr/local/bin/containerd", "./usr/local/bin/containerd-shim-runc-v2", "./usr/local/bin/ctr", "./usr/local/bin/crictl",
		"./usr/local/bin/entrypoint", "./usr/sbin/runc", "./opt/cni/bin/bridge", "./opt/cni/bin/host-local", "./opt/cni/bin/loopback", "./opt/cni/bin/portmap",
		"./kind/version", "./kind/manifests/default-cni.yaml", "./kind/bin/mount-product-files.sh",
		"./etc/containerd/config.toml", "./etc/containerd/cri-base.json", "./etc/crictl.yaml",
		"./etc/systemd/system/kubelet.service", "./etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
		"./etc/systemd/system/multi-user.target.wants/kubelet.service", "./etc/systemd/system/multi-user.target.wants/containerd.service",
		"./etc/kubernetes/manifests", "./usr/bin/jq", "./usr/sbin/iptables", "./var/lib/containerd",
	} {
		if _, ok := entries[want]; !ok {
			t.Errorf("rootfs tar lacks %s", want)
		}
	}
	if l := entries["./sbin/init"]; l == "" {
		if l = entries["./usr/sbin/init"]; !strings.Contains(l, "-> /usr/lib/systemd/systemd") {
			t.Errorf("/sbin/init: %q", l)
		}
	}

	dir := t.TempDir()
	if err := debian.Untar(ctx, img.RootfsTar, dir, "./usr/bin/kubelet", "./usr/local/bin/containerd", "./usr/local/bin/ctr",
		"./kind", "./etc/containerd", "./var/lib/containerd"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "usr/bin/kubelet"), "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "Kubernetes v1.37.2" {
		t.Errorf("kubelet --version: %q %v", out, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "kind/version")); err != nil || string(b) != "v1.37.2" {
		t.Errorf("/kind/version: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "kind/manifests/default-cni.yaml")); err != nil || string(b) != cniManifest(KindCNIImage) {
		t.Errorf("/kind/manifests/default-cni.yaml: %v\n%s", err, b)
	}
	cfgToml, err := os.ReadFile(filepath.Join(dir, "etc/containerd/config.toml"))
	if err != nil || !strings.Contains(string(cfgToml), "\n  restrict_oom_score_adj = true\n") ||
		!strings.Contains(string(cfgToml), `sandbox_image = "registry.k8s.io/pause:3.10.2"`) {
		t.Errorf("config.toml: %v\n%s", err, cfgToml)
	}
	// containerd v2 reads kind's version-2 config with the setting in place.
	dump, err := exec.CommandContext(ctx, filepath.Join(dir, "usr/local/bin/containerd"), "--config", filepath.Join(dir, "etc/containerd/config.toml"), "config", "dump").CombinedOutput()
	if err != nil {
		t.Errorf("containerd config dump: %v\n%s", err, dump)
	}
	if !strings.Contains(string(dump), "restrict_oom_score_adj = true") || !strings.Contains(string(dump), "sandbox = 'registry.k8s.io/pause:3.10.2'") {
		t.Errorf("containerd's view of the node config lacks restrict_oom_score_adj = true or the pinned sandbox image:\n%s", dump)
	}
	cri, err := os.ReadFile(filepath.Join(dir, "etc/containerd/cri-base.json"))
	if err != nil || !strings.Contains(string(cri), "/kind/bin/mount-product-files.sh") || strings.Contains(string(cri), "rlimits") {
		t.Errorf("cri-base.json: %v\n%s", err, cri)
	}

	// The control-plane images in the node's containerd store.
	c, err := startStoreContainerd(ctx, map[string]binaries.Binary{
		"containerd": {Path: filepath.Join(dir, "usr/local/bin/containerd")},
		"ctr":        {Path: filepath.Join(dir, "usr/local/bin/ctr")},
	}, filepath.Join(dir, "var/lib/containerd"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	have, err := c.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"registry.k8s.io/kube-apiserver:v1.37.2", "registry.k8s.io/kube-controller-manager:v1.37.2",
		"registry.k8s.io/kube-scheduler:v1.37.2", "registry.k8s.io/kube-proxy:v1.37.2",
		"registry.k8s.io/etcd:3.7.0-0", "registry.k8s.io/pause:3.10.2",
		KindCNIImage,
	}
	if missing := missingImages(have, want); len(missing) > 0 {
		t.Errorf("node containerd store lacks %v; has %v", missing, have)
	}
	// No CoreDNS: kubeadm init skips its addon in every cluster of
	// skewtest's.
	for _, h := range have {
		if strings.Contains(h, "coredns") {
			t.Errorf("node containerd store has %s, which no cluster of skewtest's runs", h)
		}
	}
	// The blobs are outside /var, which kind copies into every node.
	if fi, err := os.Lstat(filepath.Join(dir, contentInVar)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("%s is not a symlink out of /var: %v", contentInVar, err)
	}
	var varBytes int64
	_ = filepath.Walk(filepath.Join(dir, "var"), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			varBytes += fi.Size()
		}
		return nil
	})
	if varBytes > 16<<20 {
		t.Errorf("the node image's /var holds %d MiB, which kind copies into every node", varBytes>>20)
	}
	ls, err := c.Ctr(ctx, "images", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(ls, "\n") {
		if strings.HasPrefix(line, "registry.k8s.io/") && !strings.Contains(line, "io.cri-containerd.pinned=pinned") {
			t.Errorf("image not pinned: %s", line)
		}
	}
	if err := c.Stop(); err != nil {
		t.Error(err)
	}

	t.Run("kubelet source image: reads it from a registry", func(t *testing.T) {
		kubeletFromRegistry(ctx, t, img, filepath.Join(dir, "usr/bin/kubelet"))
	})
}

// TestKubeadmImagesFromModule checks the parser against the real kubeadm
// constants of v1.37.2, downloading that module source (124 MB unpacked) through
// the module proxy like Build does, hence the images tag.
func TestKubeadmImagesFromModule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := moduleDir(ctx, "k8s.io/kubernetes", "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "cmd", "kubeadm", "app", "constants", "constants.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := kubeadmImages(src, version.MustParseSemantic("v1.37.2"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"registry.k8s.io/kube-apiserver:v1.37.2",
		"registry.k8s.io/kube-controller-manager:v1.37.2",
		"registry.k8s.io/kube-scheduler:v1.37.2",
		"registry.k8s.io/kube-proxy:v1.37.2",
		"registry.k8s.io/coredns/coredns:v1.14.6",
		"registry.k8s.io/pause:3.10.2",
		"registry.k8s.io/etcd:3.7.0-0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

// kubeletFromRegistry serves the node image from an in-process registry
// and resolves the kubelet source image:<registry>/kindest/node:v1.37.2,
// which is how a plan takes its kubelets from the kindest/node images of
// Docker Hub. The extracted kubelet must be the one in the image.
func kubeletFromRegistry(ctx context.Context, t *testing.T, img Image, want string) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	layer, err := tarball.LayerFromFile(img.RootfsTar, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		t.Fatal(err)
	}
	image, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://") + "/kindest/node:" + img.Version)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := remote.Write(ref, image, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %s in %s", ref, time.Since(start).Round(100*time.Millisecond))
	start = time.Now()
	b, err := (&binaries.Resolver{CacheDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}).Resolve(ctx, "kubelet", "image:"+ref.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("extracted in %s: %+v", time.Since(start).Round(100*time.Millisecond), b)
	sum, err := binaries.FileSHA256(want)
	if err != nil {
		t.Fatal(err)
	}
	if b.Version != img.Version || b.SHA256 != sum {
		t.Fatalf("got %+v; want %s with sha256 %s", b, img.Version, sum)
	}
}
