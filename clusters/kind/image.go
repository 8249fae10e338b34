package kind

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec" // the docker CLI that imports the node image, before there is any node
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/kind/internal/dockerd"
	"sigs.k8s.io/skewtest/clusters/kind/internal/nodeimage"
)

// chooseImage is the node image for a cluster on a private dockerd or
// not (private): a reference Docker pulls (img nil), or the offline image,
// built here unless cached (img set, ref its name).
func (p *Provider) chooseImage(ctx context.Context, private bool) (ref string, img *nodeimage.Image, err error) {
	if ref, offline := chooseNodeImage(p.cfg.NodeImage, private, p.cfg.APIServerVersion); !offline {
		p.logger.Info("using a node image Docker pulls (KIND_NODE_IMAGE=offline builds one locally instead)", "image", ref)
		return ref, nil, nil
	}
	built, err := nodeimage.Build(ctx, nodeimage.Config{Version: p.cfg.APIServerVersion, CacheDir: p.cfg.CacheDir, Logger: p.logger})
	if err != nil {
		return "", nil, fmt.Errorf("kind provider: build the node image: %w", err)
	}
	sum, err := rootfsSHA256(built.RootfsTar)
	if err != nil {
		return "", nil, err
	}
	p.mu.Lock()
	p.binaries = append(p.binaries, binaries.Binary{Component: "kind node image", Version: built.Version,
		Source: fmt.Sprintf("offline build %s (%d images in its containerd)", built.Name, len(built.Images)), Path: built.RootfsTar, SHA256: sum})
	p.mu.Unlock()
	return built.Name, &built, nil
}

// seedPrefix names the seeds of a private dockerd's images
// (dockerd.SaveSeed) kept in the node image's cache directory, which a
// new build of the image replaces with them.
const seedPrefix = "dockerd-seed-"

// seedDir is where the seed of img's import into a private dockerd is
// kept: beside the image in the cache, named by what makes the import
// what it is (the rootfs, the image's name and config, and dockerd's
// version, whose data-root layout the seed is in).
func seedDir(ctx context.Context, img nodeimage.Image) (string, error) {
	v, err := dockerd.Version(ctx)
	if err != nil {
		return "", err
	}
	sum, err := rootfsSHA256(img.RootfsTar)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(img.RootfsTar), seedPrefix+seedKey(v, sum, img)), nil
}

// seedKey is a short hash of everything the import of img into a dockerd
// of version dockerdVersion depends on.
func seedKey(dockerdVersion, rootfsSum string, img nodeimage.Image) string {
	h := sha256.New()
	for _, s := range append([]string{dockerdVersion, rootfsSum, img.Name, img.StopSignal}, img.ImportChanges()...) {
		fmt.Fprintf(h, "%d:%s\n", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// rootfsSHA256 hashes the node image's rootfs once per build and keeps
// the sum beside it (hashing 700 MB each run would slow every bring-up).
func rootfsSHA256(tar string) (string, error) {
	if b, err := os.ReadFile(tar + ".sha256"); err == nil {
		if fi, serr := os.Stat(tar + ".sha256"); serr == nil {
			if ti, terr := os.Stat(tar); terr == nil && !ti.ModTime().After(fi.ModTime()) {
				return strings.TrimSpace(string(b)), nil
			}
		}
	}
	sum, err := binaries.FileSHA256(tar)
	if err != nil {
		return "", err
	}
	return sum, os.WriteFile(tar+".sha256", []byte(sum+"\n"), 0o644)
}

// importImage docker-imports the rootfs and adds, with a one-line build,
// the STOPSIGNAL that docker import cannot set, unless Docker has the
// image (the host's Docker from an earlier run, or a private dockerd
// planted from its seed). A private dockerd's import is then kept as the
// seed in seed, when set, for the next bring-up: importing 700 MB is most
// of what a seed saves.
func (p *Provider) importImage(ctx context.Context, img nodeimage.Image, seed string) error {
	if exec.CommandContext(ctx, "docker", "image", "inspect", img.Name).Run() == nil {
		return nil
	}
	t0 := time.Now()
	args := []string{"import"}
	for _, c := range img.ImportChanges() {
		args = append(args, "--change", c)
	}
	args = append(args, img.RootfsTar, img.Name+"-base")
	if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("kind provider: docker import %s: %w\n%s", img.RootfsTar, err, out)
	}
	dir := filepath.Join(p.dir, "image-build")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dockerfile := fmt.Sprintf("FROM %s-base\nSTOPSIGNAL %s\n", img.Name, img.StopSignal)
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "docker", "build", "-t", img.Name, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("kind provider: docker build %s: %w\n%s", img.Name, err, out)
	}
	p.logger.Info("node image imported", "image", img.Name, "took", time.Since(t0).Round(10*time.Millisecond))
	p.mu.Lock()
	d := p.docker
	p.mu.Unlock()
	if d != nil && seed != "" {
		// Kept when the daemon stops (a running daemon's data-root is a
		// mount of its own, which no hard link crosses); the older seeds
		// go now, this daemon started from none of them.
		d.KeepSeed(seed)
		removeOtherSeeds(seed, p.logger.Warn)
	}
	return nil
}

// removeOtherSeeds removes the seeds beside seed (of an older dockerd, or
// of the image's earlier configuration): only the newest is used.
func removeOtherSeeds(seed string, warn func(string, ...any)) {
	others, _ := filepath.Glob(filepath.Join(filepath.Dir(seed), seedPrefix+"*"))
	for _, o := range others {
		if o == seed || strings.Contains(filepath.Base(o), ".tmp-") {
			continue
		}
		if err := os.RemoveAll(o); err != nil {
			warn("an old seed of images is left in the cache", "seed", o, "err", err)
		}
	}
}
