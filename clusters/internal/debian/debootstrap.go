// Package debian makes Debian root file systems with debootstrap, from the
// mirror the host's apt already uses: the one implementation behind the
// kind node image's base and the VM guest image. It also holds the file
// chores around them: tar that keeps owners and capabilities, and the lock
// and temporary-directory discipline of a cache built atomically.
package debian

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec" // debootstrap on this host, building an image before any node exists
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/skewtest/internal/lines"
)

// Suite is the Debian release debootstrap installs; our machines run it too.
const Suite = "bookworm"

// Spec says which root file system to make.
type Spec struct {
	// Suite is the Debian release; empty means Suite.
	Suite string
	// Packages are installed on top of the minbase variant
	// (debootstrap --include). Recommends are not installed.
	Packages []string
}

func (s Spec) suite() string {
	if s.Suite == "" {
		return Suite
	}
	return s.Suite
}

// Key names a rootfs made from s: it changes with the suite and the package
// list, whatever the order the packages are given in.
func (s Spec) Key() string {
	pkgs := append([]string(nil), s.Packages...)
	sort.Strings(pkgs)
	sum := sha256.Sum256([]byte(s.suite() + "\n" + strings.Join(pkgs, ",")))
	return s.suite() + "-" + hex.EncodeToString(sum[:])[:12]
}

// Debootstrap installs s into target (which must not exist or be empty)
// and removes what an image should not carry (see Clean). It needs root,
// debootstrap and the Debian mirror of the host's apt sources; it takes
// about a minute. On failure target may hold a partial tree, with nothing
// mounted below it: the caller removes it.
func Debootstrap(ctx context.Context, target string, s Spec, log *slog.Logger) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("debootstrap needs root")
	}
	debootstrap, err := exec.LookPath("debootstrap")
	if err != nil {
		return fmt.Errorf("debootstrap is not installed (apt-get install debootstrap): %w", err)
	}
	mirror, err := Mirror("/etc/apt", s.suite())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	args := []string{"--variant=minbase", "--include=" + strings.Join(s.Packages, ","), s.suite(), target, mirror}
	log.Info("running debootstrap (one to a few minutes)", "suite", s.suite(), "mirror", mirror, "packages", len(s.Packages))
	logFile := target + ".debootstrap.log"
	lf, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer os.Remove(logFile)
	cmd := exec.CommandContext(ctx, debootstrap, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	err = cmd.Run()
	lf.Close()
	// debootstrap mounts /proc and /sys in the target and does not always
	// unmount them when it fails.
	UnmountUnder(target)
	if err != nil {
		log, _ := os.ReadFile(logFile)
		return fmt.Errorf("debootstrap: %w\n%s", err, lines.Last(string(log), 20))
	}
	return Clean(target)
}

// BaseTar returns the rootfs of s as an uncompressed tar cached in dir
// (<dir>/<key>.tar), making it first if needed. Builds of the same spec
// take turns (a lock file in dir); a failed or killed build leaves no tar.
func BaseTar(ctx context.Context, dir string, s Spec, log *slog.Logger) (string, error) {
	final := filepath.Join(dir, s.Key()+".tar")
	if _, err := os.Stat(final); err == nil {
		log.Info("debootstrap base cached", "tar", final)
		return final, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := LockFile(ctx, filepath.Join(dir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	RemoveStale(filepath.Join(dir, ".debootstrap-*"))
	tmp, err := os.MkdirTemp(dir, ".debootstrap-")
	if err != nil {
		return "", err
	}
	defer func() {
		UnmountUnder(tmp)
		os.RemoveAll(tmp)
	}()
	target := filepath.Join(tmp, "rootfs")
	if err := Debootstrap(ctx, target, s, log); err != nil {
		return "", err
	}
	part := filepath.Join(tmp, "base.tar")
	if err := WriteRootfsTar(ctx, target, part); err != nil {
		return "", err
	}
	if err := os.Rename(part, final); err != nil {
		return "", err
	}
	return final, nil
}

// Clean removes what debootstrap leaves that an image should not carry:
// downloaded packages, the host's resolv.conf and hostname, device nodes
// (the container runtime or devtmpfs provides /dev), the machine id (made
// at first boot, one per node).
func Clean(root string) error {
	for _, glob := range []string{"var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*", "dev/*", "run/*", "tmp/*"} {
		matches, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			return err
		}
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				return err
			}
		}
	}
	for _, f := range []string{"etc/hostname"} {
		if err := os.Remove(filepath.Join(root, f)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	for _, f := range []string{"etc/resolv.conf", "etc/machine-id"} {
		p := filepath.Join(root, f)
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return err
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}
