package vm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec" // debootstrap, qemu-img and mkfs on this host, building the guest image
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/debian"
	"sigs.k8s.io/skewtest/internal/lines"
)

// imageRecipe is bumped whenever BuildImage's steps change in a way the
// key does not see, so that an image made by older code is rebuilt.
const imageRecipe = 1

// diskSize is the guest disk's size; the file is sparse, so it takes only
// what the rootfs fills (about 1 GiB), and the overlay what the guest writes.
const diskSize = "16G"

// diskLabel is the guest root file system's label.
const diskLabel = "skewtest-root"

// guestSpec is the guest's Debian: systemd as init, sshd, the kernel and
// its initramfs tools, the host programs the local provider needs
// (clusters/local: etcd-server, runc, containernetworking-plugins,
// iptables, iproute2, mount), and what a kubelet and containerd call
// (conntrack, kmod, e2fsprogs, procps, util-linux). dbus lets systemctl
// and systemd-run talk to systemd.
var guestSpec = debian.Spec{Suite: debian.Suite, Packages: []string{
	"systemd", "systemd-sysv", "udev", "dbus",
	"openssh-server", "ca-certificates",
	"linux-image-amd64", "initramfs-tools", "zstd",
	"iptables", "iproute2", "kmod", "util-linux", "mount", "e2fsprogs", "procps", "conntrack",
	"etcd-server", "runc", "containernetworking-plugins",
}}

// ImageConfig says where the image is cached.
type ImageConfig struct {
	// CacheDir is the skewtest cache root (binaries.DefaultCacheDir()); the
	// image goes to <CacheDir>/vm/<key>/.
	CacheDir string
	Logger   *slog.Logger
}

// Image is a built guest image. Its files are never written to once made:
// every instance boots from its own overlay.
type Image struct {
	Key string `json:"key"`
	// Dir holds the files below.
	Dir string `json:"-"`
	// Disk is a raw ext4 file system image (no partition table), the
	// guest's /dev/vda.
	Disk string `json:"-"`
	// Kernel and Initrd are Debian's linux-image-amd64 as installed in the
	// guest, whose /lib/modules match.
	Kernel        string `json:"-"`
	Initrd        string `json:"-"`
	KernelVersion string `json:"kernelVersion"`
	Recipe        int    `json:"recipe"`
	Built         string `json:"built"`
}

// Files of an image directory.
const (
	imageMeta   = "image.json"
	imageDisk   = "disk.raw"
	imageKernel = "vmlinuz"
	imageInitrd = "initrd.img"
)

// ImageKey names the image of the current recipe: a hash of the package
// list, the guest's own files and units, the disk size and the recipe.
func ImageKey() string {
	h := sha256.New()
	fmt.Fprintf(h, "recipe %d\nspec %s\ndisk %s %s\n", imageRecipe, guestSpec.Key(), diskSize, diskLabel)
	files := append(guestFiles[:0:0], guestFiles...)
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	for _, f := range files {
		fmt.Fprintf(h, "file %s %o %d\n%s\n", f.path, f.mode, len(f.content), f.content)
	}
	fmt.Fprintf(h, "enable %s\nmask %s\n", strings.Join(enabledUnits, ","), strings.Join(maskedUnits, ","))
	return guestSpec.Suite + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// ImageDir is where the image of key is cached.
func ImageDir(cacheDir, key string) string { return filepath.Join(cacheDir, "vm", key) }

// BuildImage returns the cached guest image, building it first if needed:
// debootstrap with the kernel (cached on its own as a tar under
// <CacheDir>/vm/base/, 5-25 minutes on 2 busy cores, most of it the
// initramfs), then the guest's files and mkfs.ext4 -d (a minute). Needs
// root, debootstrap and e2fsprogs. Two builds take turns on a lock file; a
// failed or killed build leaves only a temporary directory that the next
// build removes.
func BuildImage(ctx context.Context, cfg ImageConfig) (Image, error) {
	if cfg.CacheDir == "" {
		return Image{}, errors.New("vm image: CacheDir is empty")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	key := ImageKey()
	final := ImageDir(cfg.CacheDir, key)
	if img, err := readImage(final); err == nil {
		return img, nil
	}
	vmDir := filepath.Dir(final)
	if err := os.MkdirAll(vmDir, 0o755); err != nil {
		return Image{}, err
	}
	unlock, err := debian.LockFile(ctx, final+".lock")
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	if img, err := readImage(final); err == nil {
		return img, nil
	}
	if err := checkImageTools(); err != nil {
		return Image{}, err
	}
	// Under the lock, leftovers of a killed build of this key are nobody's.
	debian.RemoveStale(filepath.Join(vmDir, ".build-"+key+"-*"))
	os.RemoveAll(final) // an incomplete directory readImage refused
	start := time.Now()
	log.Info("building the VM guest image (debootstrap with the kernel, then mkfs.ext4)", "key", key, "dir", final)
	tmp, err := os.MkdirTemp(vmDir, ".build-"+key+"-")
	if err != nil {
		return Image{}, err
	}
	defer func() {
		debian.UnmountUnder(tmp)
		os.RemoveAll(tmp)
	}()
	img, err := buildImage(ctx, cfg.CacheDir, tmp, log)
	if err != nil {
		return Image{}, fmt.Errorf("vm image %s: %w", key, err)
	}
	img.Key = key
	b, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return Image{}, err
	}
	out := filepath.Join(tmp, "out")
	if err := os.WriteFile(filepath.Join(out, imageMeta), b, 0o644); err != nil {
		return Image{}, err
	}
	if err := os.Rename(out, final); err != nil {
		return Image{}, err
	}
	img, err = readImage(final)
	if err != nil {
		return Image{}, err
	}
	log.Info("VM guest image built", "dir", final, "kernel", img.KernelVersion, "took", time.Since(start).Round(time.Second))
	return img, nil
}

// checkImageTools names the host packages a build needs.
func checkImageTools() error {
	if os.Geteuid() != 0 {
		return errors.New("vm image: building the guest image needs root (debootstrap, file ownership in the disk image)")
	}
	for _, t := range []struct{ prog, pkg string }{{"debootstrap", "debootstrap"}, {"mkfs.ext4", "e2fsprogs"}, {"chroot", "coreutils"}} {
		if _, err := exec.LookPath(t.prog); err != nil {
			return fmt.Errorf("vm image: %s not found (apt-get install %s; scripts/install-deps.sh installs it)", t.prog, t.pkg)
		}
	}
	return nil
}

// buildImage makes the image's files in tmp/out.
func buildImage(ctx context.Context, cacheDir, tmp string, log *slog.Logger) (Image, error) {
	rootfs := filepath.Join(tmp, "rootfs")
	out := filepath.Join(tmp, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return Image{}, err
	}
	step := func(name string, fn func() error) error {
		t := time.Now()
		log.Info("vm image: " + name + " ...")
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		log.Info("vm image: "+name+" done", "took", time.Since(t).Round(100*time.Millisecond))
		return nil
	}
	var img Image
	steps := []struct {
		name string
		fn   func() error
	}{
		{"debootstrap " + guestSpec.Suite + " with linux-image-amd64", func() error {
			// The base is cached on its own, keyed by the package list, so
			// that a change to the guest's own files does not debootstrap
			// again (the kernel's initramfs alone takes minutes).
			base, err := debian.BaseTar(ctx, filepath.Join(cacheDir, "vm", "base"), guestSpec, log)
			if err != nil {
				return err
			}
			return debian.Untar(ctx, base, rootfs)
		}},
		{"guest files and units", func() error { return customize(ctx, rootfs) }},
		{"kernel and initrd", func() (err error) { img.KernelVersion, err = copyKernel(rootfs, out); return }},
		{"ext4 disk image", func() error { return makeDisk(ctx, rootfs, filepath.Join(out, imageDisk)) }},
	}
	for _, s := range steps {
		if err := step(s.name, s.fn); err != nil {
			return Image{}, err
		}
	}
	img.Recipe = imageRecipe
	img.Built = time.Now().UTC().Format(time.RFC3339)
	return img, nil
}

// customize writes the guest's files, removes the SSH host keys
// openssh-server's postinst made (each instance gets its own), and enables
// and masks units.
func customize(ctx context.Context, rootfs string) error {
	for _, f := range guestFiles {
		p := filepath.Join(rootfs, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		os.Remove(p) // a symlink (e.g. /etc/hosts) must not be written through
		if err := os.WriteFile(p, []byte(f.content), os.FileMode(f.mode)); err != nil {
			return err
		}
	}
	keys, _ := filepath.Glob(filepath.Join(rootfs, "etc", "ssh", "ssh_host_*"))
	for _, k := range keys {
		if err := os.Remove(k); err != nil {
			return err
		}
	}
	// systemctl works offline in a chroot; the host needs no systemd.
	for _, args := range [][]string{append([]string{"enable"}, enabledUnits...), append([]string{"mask"}, maskedUnits...)} {
		argv := append([]string{rootfs, "systemctl", "--quiet"}, args...)
		if o, err := exec.CommandContext(ctx, "chroot", argv...).CombinedOutput(); err != nil {
			return fmt.Errorf("chroot systemctl %s: %w\n%s", strings.Join(args, " "), err, o)
		}
	}
	return nil
}

// copyKernel copies the one installed kernel and its initrd out of /boot
// and returns the kernel's version.
func copyKernel(rootfs, out string) (string, error) {
	kernels, _ := filepath.Glob(filepath.Join(rootfs, "boot", "vmlinuz-*"))
	if len(kernels) != 1 {
		return "", fmt.Errorf("want one kernel in the guest's /boot, found %d: %v", len(kernels), kernels)
	}
	kver := strings.TrimPrefix(filepath.Base(kernels[0]), "vmlinuz-")
	initrd := filepath.Join(rootfs, "boot", "initrd.img-"+kver)
	for src, dst := range map[string]string{kernels[0]: imageKernel, initrd: imageInitrd} {
		if err := copyFile(src, filepath.Join(out, dst)); err != nil {
			return "", fmt.Errorf("%w (did initramfs-tools run in debootstrap?)", err)
		}
	}
	return kver, nil
}

// makeDisk writes rootfs as a sparse ext4 image, without loop devices or
// mounts (mke2fs -d copies the tree with owners, modes and xattrs).
func makeDisk(ctx context.Context, rootfs, disk string) error {
	cmd := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-L", diskLabel, "-d", rootfs, disk, diskSize)
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4 -d: %w\n%s", err, lines.Last(string(o), 10))
	}
	return nil
}

// readImage returns the image recorded in dir if it is complete and of
// this recipe.
func readImage(dir string) (Image, error) {
	b, err := os.ReadFile(filepath.Join(dir, imageMeta))
	if err != nil {
		return Image{}, err
	}
	var img Image
	if err := json.Unmarshal(b, &img); err != nil {
		return Image{}, fmt.Errorf("%s: %w", filepath.Join(dir, imageMeta), err)
	}
	if img.Recipe != imageRecipe {
		return Image{}, fmt.Errorf("cached image %s is from recipe %d, want %d", dir, img.Recipe, imageRecipe)
	}
	img.Dir = dir
	img.Disk = filepath.Join(dir, imageDisk)
	img.Kernel = filepath.Join(dir, imageKernel)
	img.Initrd = filepath.Join(dir, imageInitrd)
	for _, f := range []string{img.Disk, img.Kernel, img.Initrd} {
		if _, err := os.Stat(f); err != nil {
			return Image{}, err
		}
	}
	return img, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
