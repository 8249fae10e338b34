package nodeimage

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec" // kubeadm and the Go toolchain on this host, building the node image
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/debian"
)

// kubeComponents are built from the k8s.io/kubernetes module: the first
// three go into the node's /usr/bin, the rest into control-plane images.
var kubeComponents = []string{"kubeadm", "kubelet", "kubectl", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"}

// crictl, as kind's base image has it; cri-tools v1.37.0 is the newest the
// Go module proxy serves (v1.35.0 is not served).
var crictlTool = binaries.GoTool{
	Module:   "sigs.k8s.io/cri-tools",
	Version:  "v1.37.0",
	Commands: []string{"cmd/crictl"},
}

type builder struct {
	v        *version.Version
	kv       string
	cacheDir string
	kindDir  string
	log      *slog.Logger
	mb       *binaries.ModuleBuilder
	// own are our own programs (ownPrograms), written before the cache
	// was looked at, and ownSum their digest.
	own    map[string]string
	ownSum string
}

// step runs fn and logs how long it took.
func (b *builder) step(name string, fn func() error) error {
	start := time.Now()
	b.log.Info("node image: "+name+" ...", "version", b.kv)
	if err := fn(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	b.log.Info("node image: "+name+" done", "version", b.kv, "took", time.Since(start).Round(100*time.Millisecond))
	return nil
}

func (b *builder) build(ctx context.Context, final string) (Image, error) {
	var (
		base     string
		kube     map[string]binaries.Binary
		ctrd     map[string]binaries.Binary
		crictl   map[string]binaries.Binary
		etcd     string
		kindSrc  string
		k8sSrc   string
		required []string
		work     string
	)
	steps := []struct {
		name string
		fn   func() error
	}{
		{"debootstrap base rootfs", func() (err error) { base, err = b.baseTar(ctx); return }},
		{"kind module source", func() (err error) { kindSrc, err = moduleDir(ctx, "sigs.k8s.io/kind", KindVersion); return }},
		{"Kubernetes components from the k8s.io/kubernetes module", func() (err error) {
			kube, err = b.mb.Build(ctx, b.v, kubeComponents...)
			return
		}},
		{"containerd " + binaries.Containerd.Version, func() (err error) { ctrd, err = b.mb.BuildTool(ctx, binaries.Containerd); return }},
		{"crictl " + crictlTool.Version, func() (err error) { crictl, err = b.mb.BuildTool(ctx, crictlTool); return }},
		{"kubeadm's image list", func() (err error) {
			k8sSrc, err = moduleDir(ctx, "k8s.io/kubernetes", b.kv)
			if err != nil {
				return err
			}
			required, err = b.requiredImages(ctx, k8sSrc, kube["kubeadm"].Path)
			return
		}},
		// Not CoreDNS: kubeadm init skips its addon in every cluster
		// skewtest makes (clusters/kind's initSkipPhases), and its build
		// was minutes of a cold CI.
		{"etcd", func() (err error) {
			ki, err := parseKubeadmImages(required)
			if err != nil {
				return err
			}
			etcd, err = b.buildMain(ctx, etcdMain(ki.Etcd.Tag))
			return
		}},
	}
	for _, s := range steps {
		if err := b.step(s.name, s.fn); err != nil {
			return Image{}, err
		}
	}

	// Everything below is assembled in a temporary directory beside the
	// final one (same file system, so the rename is atomic).
	var err error
	work, err = os.MkdirTemp(b.kindDir, ".build-node-"+b.kv+"-")
	if err != nil {
		return Image{}, err
	}
	defer func() {
		debian.UnmountUnder(work)
		os.RemoveAll(work)
	}()
	rootfs := filepath.Join(work, "rootfs")
	out := filepath.Join(work, "out")
	var imported []string
	steps = []struct {
		name string
		fn   func() error
	}{
		{"unpack base rootfs", func() error { return debian.Untar(ctx, base, rootfs) }},
		{"kind base files and Dockerfile steps", func() error {
			return installKindBase(filepath.Join(kindSrc, "images", "base", "files"), rootfs)
		}},
		{"containerd, runc, CNI plugins, crictl", func() error {
			return installRuntime(ctx, rootfs, ctrd, crictl["crictl"].Path, pauseImageOf(required))
		}},
		{"Kubernetes node binaries and /kind files", func() error {
			return installKubernetes(rootfs, b.kv, kube)
		}},
		{"control-plane images into the node's containerd", func() error {
			tarball := filepath.Join(work, "images.tar")
			names, err := writeImages(tarball, rootfs, required, imageBinaries{
				kube: kube, etcd: etcd, pause: b.own["podbin"], kindcni: b.own["kindcni"],
			})
			if err != nil {
				return err
			}
			if imported, err = importImages(ctx, b.log, rootfs, ctrd, tarball, names); err != nil {
				return err
			}
			return moveContentOutOfVar(rootfs)
		}},
		{"write rootfs tar", func() error {
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			return debian.WriteRootfsTar(ctx, rootfs, filepath.Join(out, rootfsTar))
		}},
	}
	for _, s := range steps {
		if err := b.step(s.name, s.fn); err != nil {
			return Image{}, err
		}
	}
	st, err := os.Stat(filepath.Join(out, rootfsTar))
	if err != nil {
		return Image{}, err
	}
	sort.Strings(imported)
	img := Image{
		RootfsTar:  filepath.Join(final, rootfsTar),
		Name:       ImageName(b.v),
		Entrypoint: nodeEntrypoint,
		StopSignal: nodeStopSignal,
		Env:        nodeEnv,
		Version:    b.kv,
		Images:     imported,
		Size:       st.Size(),
		Recipe:     recipe,
		Own:        b.ownSum,
	}
	meta, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return Image{}, err
	}
	if err := os.WriteFile(filepath.Join(out, imageJSON), append(meta, '\n'), 0o644); err != nil {
		return Image{}, err
	}
	if err := os.RemoveAll(final); err != nil {
		return Image{}, err
	}
	if err := os.Rename(out, final); err != nil {
		return Image{}, err
	}
	return img, nil
}

// requiredImages returns the images kubeadm of this version pulls, from its
// constants in the module source, checked against what the built kubeadm
// itself says (`kubeadm config images list`).
func (b *builder) requiredImages(ctx context.Context, k8sSrc, kubeadm string) ([]string, error) {
	src, err := os.ReadFile(filepath.Join(k8sSrc, "cmd", "kubeadm", "app", "constants", "constants.go"))
	if err != nil {
		return nil, err
	}
	fromConstants, err := kubeadmImages(src, b.v)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, kubeadm, "config", "images", "list", "--kubernetes-version", b.kv)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubeadm config images list: %w: %s", err, stderr.String())
	}
	fromKubeadm := strings.Fields(string(outb))
	a, k := append([]string(nil), fromConstants...), append([]string(nil), fromKubeadm...)
	sort.Strings(a)
	sort.Strings(k)
	if strings.Join(a, " ") != strings.Join(k, " ") {
		return nil, fmt.Errorf("images from kubeadm's constants %v differ from `kubeadm config images list` %v: update kubeadmImages", a, k)
	}
	return fromConstants, nil
}

// moduleDir returns the directory of module@version in the Go module
// cache, downloading it through the module proxy if needed.
func moduleDir(ctx context.Context, module, ver string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+ver)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); jerr != nil || dl.Error != "" || err != nil || dl.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s %s", module, ver, err, dl.Error, stderr.String())
	}
	return dl.Dir, nil
}
