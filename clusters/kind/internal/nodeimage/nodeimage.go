// Package nodeimage builds a kind node image without a container registry:
// only the Go module proxy and Debian's package archive are used.
//
// The image is produced as an uncompressed root file system tarball for
// `docker import`, plus the metadata docker import cannot carry (the stop
// signal; see Image). The pipeline follows what `kind build node-image` and
// kind's images/base/Dockerfile do, with every download replaced:
//
//  1. a Debian bookworm base made with debootstrap (the packages kind's base
//     image installs, plus Debian's runc and CNI plugins), cached as a tar;
//  2. kind's own files (entrypoint, /kind/bin scripts, systemd units,
//     containerd config, sysctls) read from the kind module in the Go module
//     cache, and the RUN steps of kind's base Dockerfile replayed;
//  3. containerd v2, crictl, kubeadm, kubelet and kubectl built from their Go
//     modules (cached by clusters/binaries);
//  4. /kind/version and /kind/manifests/default-cni.yaml, whose DaemonSet
//     runs cmd/kindcni, a small stand-in for kindnetd;
//  5. the control-plane images kubeadm asks for (registry.k8s.io/...),
//     each a single binary made with go-containerregistry, imported into
//     the rootfs's containerd store by a throwaway containerd.
//
// Build needs root and debootstrap (apt-get install debootstrap). Its own
// programs, cmd/kindcni and podbin, come from package helpers.
package nodeimage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/debian"
)

// recipe is bumped whenever the contents Build produces change, so that a
// cached image made by older code is rebuilt rather than reused.
const recipe = 4

// Config says which node image to build.
type Config struct {
	// Version is the Kubernetes version of the node image, e.g. v1.37.2. It
	// must be a release: the binaries are built from the k8s.io/kubernetes
	// module at that version.
	Version *version.Version
	// CacheDir is the skewtest cache root (binaries.DefaultCacheDir()).
	CacheDir string
	// Logger receives progress with timings; nil discards it.
	Logger *slog.Logger
}

// Image is a built node image.
type Image struct {
	// RootfsTar is the uncompressed root file system tarball to give to
	// `docker import`.
	RootfsTar string `json:"rootfsTar"`
	// Name is the name to import it as, e.g. "skewtest/kind-node:v1.37.2".
	Name string `json:"name"`
	// Entrypoint, StopSignal and Env are the image config kind's node image
	// has (ENTRYPOINT, STOPSIGNAL, ENV). docker import takes ENTRYPOINT and
	// ENV as --change (see ImportChanges) but rejects STOPSIGNAL, which
	// needs a one-line `docker build` on top.
	Entrypoint []string `json:"entrypoint"`
	StopSignal string   `json:"stopSignal"`
	Env        []string `json:"env"`
	// Version is the Kubernetes version, e.g. "v1.37.2".
	Version string `json:"version"`

	// Images are the image names in the node's containerd store (namespace
	// k8s.io), e.g. registry.k8s.io/kube-apiserver:v1.37.2.
	Images []string `json:"images"`
	// Size is RootfsTar's size in bytes.
	Size int64 `json:"size"`
	// Recipe identifies the code that built it.
	Recipe int `json:"recipe"`
	// Own is the digest of skewtest's own programs baked into it (the CNI
	// plugin and the pause program, ownDigest): a change to their source
	// makes the cached image stale without a change of Recipe.
	Own string `json:"own"`
}

// ImportChanges returns the `docker import --change` values that carry
// Entrypoint and Env. StopSignal cannot be given this way.
func (i Image) ImportChanges() []string {
	ep, _ := json.Marshal(i.Entrypoint)
	changes := []string{"ENTRYPOINT " + string(ep)}
	for _, e := range i.Env {
		changes = append(changes, "ENV "+e)
	}
	return changes
}

// The metadata of kind's base image (images/base/Dockerfile).
var (
	nodeEntrypoint = []string{"/usr/local/bin/entrypoint", "/sbin/init"}
	nodeStopSignal = "SIGRTMIN+3"
	nodeEnv        = []string{"container=docker", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
)

// ImageName is the name Build gives the node image of Kubernetes version v.
func ImageName(v *version.Version) string {
	return "skewtest/kind-node:v" + v.String()
}

const (
	imageJSON = "image.json"
	rootfsTar = "rootfs.tar"
)

// Build produces the kind node image for cfg.Version, cached under
// <CacheDir>/kind/node-<version>/: a warm cache is a no-op. Every step is
// cached on its own (the debootstrap base, each Go build), and a failed
// build leaves no cache entry behind: it is assembled in a temporary
// directory and renamed into place.
func Build(ctx context.Context, cfg Config) (Image, error) {
	if cfg.Version == nil || cfg.Version.PreRelease() != "" || cfg.Version.BuildMetadata() != "" {
		return Image{}, fmt.Errorf("kind node image: need a release Kubernetes version such as v1.37.2, got %v", cfg.Version)
	}
	if cfg.CacheDir == "" {
		return Image{}, errors.New("kind node image: CacheDir is empty")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	kv := "v" + cfg.Version.String()
	kindDir := filepath.Join(cfg.CacheDir, "kind")
	if err := os.MkdirAll(kindDir, 0o755); err != nil {
		return Image{}, err
	}
	final := filepath.Join(kindDir, "node-"+kv)
	unlock, err := debian.LockFile(ctx, final+".lock")
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	// Our own programs are written first, every time (carried by
	// bin/skewtest, or built from source, which Go's build cache makes
	// about a second): a cached image holding other builds of them is
	// stale. They go to a directory of this build's own, removed after it
	// (under the lock, one a killed build of this version left is
	// nobody's).
	ownPattern := ".own-node-" + kv + "-"
	debian.RemoveStale(filepath.Join(kindDir, ownPattern+"*"))
	ownDir, err := os.MkdirTemp(kindDir, ownPattern)
	if err != nil {
		return Image{}, err
	}
	defer os.RemoveAll(ownDir)
	own, err := ownPrograms(ctx, ownDir)
	if err != nil {
		return Image{}, fmt.Errorf("kind node image %s: %w", kv, err)
	}
	digest, err := ownDigest(own)
	if err != nil {
		return Image{}, fmt.Errorf("kind node image %s: %w", kv, err)
	}
	img, err := readCached(final, cfg.Version, digest)
	if err == nil {
		logger.Info("kind node image cached", "image", img.Name, "tar", img.RootfsTar, "size", humanBytes(img.Size))
		return img, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		logger.Info("kind node image cached but not usable: building it again", "why", err)
	}
	// Under the lock, leftovers of a build of this version that was killed
	// are nobody's: remove them.
	debian.RemoveStale(filepath.Join(kindDir, ".build-node-"+kv+"-*"))
	start := time.Now()
	logger.Info("building kind node image (cold: 10-15 min on 2 cores, mostly Go builds)", "version", kv)
	b := &builder{
		v:        cfg.Version,
		kv:       kv,
		cacheDir: cfg.CacheDir,
		kindDir:  kindDir,
		log:      logger,
		mb:       &binaries.ModuleBuilder{CacheDir: cfg.CacheDir, Logger: logger},
		own:      own,
		ownSum:   digest,
	}
	img, err = b.build(ctx, final)
	if err != nil {
		return Image{}, fmt.Errorf("kind node image %s: %w", kv, err)
	}
	logger.Info("kind node image built", "image", img.Name, "tar", img.RootfsTar, "size", humanBytes(img.Size),
		"took", time.Since(start).Round(time.Second))
	return img, nil
}

// readCached returns the image recorded in dir if it is complete and was
// made by this recipe, with our own programs of digest own.
func readCached(dir string, v *version.Version, own string) (Image, error) {
	b, err := os.ReadFile(filepath.Join(dir, imageJSON))
	if err != nil {
		return Image{}, err
	}
	var img Image
	if err := json.Unmarshal(b, &img); err != nil {
		return Image{}, err
	}
	if img.Recipe != recipe || img.Version != "v"+v.String() {
		return Image{}, fmt.Errorf("cached image %s is from another recipe or version", dir)
	}
	if img.Own != own {
		return Image{}, fmt.Errorf("cached image %s holds other builds of kindcni and podbin (digest %q, now %q)", dir, img.Own, own)
	}
	img.RootfsTar = filepath.Join(dir, rootfsTar)
	st, err := os.Stat(img.RootfsTar)
	if err != nil {
		return Image{}, err
	}
	if st.Size() != img.Size {
		return Image{}, fmt.Errorf("cached %s has size %d, recorded %d", img.RootfsTar, st.Size(), img.Size)
	}
	return img, nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d B", n)
}
