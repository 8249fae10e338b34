package nodeimage

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

// suite is the Debian release of the base; the machines run it too.
const suite = "bookworm"

// basePackages are what kind's images/base/Dockerfile installs with
// clean-install, less what only rootless or network storage needs
// (fuse-overlayfs, nfs-common, open-iscsi), plus Debian's runc and CNI
// plugins (kind builds those from source; we take Debian's, which work with
// containerd v2 on these machines) and a few tools the brief asks for.
var basePackages = []string{
	// services
	"systemd",
	// Kubernetes components
	"conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux", "mount", "kmod",
	"ebtables", "socat",
	// container runtime
	"libseccomp2", "pigz", "runc", "containernetworking-plugins",
	// storage e2e tests
	"e2fsprogs",
	// kind itself: jq is used by the createContainer hook
	// (/kind/bin/mount-product-files.sh)
	"bash", "ca-certificates", "curl", "jq", "procps", "rsync",
}

// baseKey names the cached base tar: it changes with the package list.
func baseKey() string {
	pkgs := append([]string(nil), basePackages...)
	sort.Strings(pkgs)
	sum := sha256.Sum256([]byte(suite + "\n" + strings.Join(pkgs, ",")))
	return suite + "-" + hex.EncodeToString(sum[:])[:12]
}

// baseTar returns the cached debootstrap base as a tar, making it first if
// needed (about a minute; needs root and the Debian mirror).
func (b *builder) baseTar(ctx context.Context) (string, error) {
	dir := filepath.Join(b.kindDir, "base")
	final := filepath.Join(dir, baseKey()+".tar")
	if _, err := os.Stat(final); err == nil {
		b.log.Info("debootstrap base cached", "tar", final)
		return final, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Builds of other versions share the base: one debootstrap at a time.
	unlock, err := lockFile(ctx, filepath.Join(dir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	removeStale(filepath.Join(dir, ".debootstrap-*"))
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("debootstrap needs root")
	}
	debootstrap, err := exec.LookPath("debootstrap")
	if err != nil {
		return "", fmt.Errorf("debootstrap is not installed (apt-get install debootstrap): %w", err)
	}
	mirror, err := debianMirror("/etc/apt", suite)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, ".debootstrap-")
	if err != nil {
		return "", err
	}
	defer func() {
		unmountUnder(tmp)
		os.RemoveAll(tmp)
	}()
	target := filepath.Join(tmp, "rootfs")
	args := []string{"--variant=minbase", "--include=" + strings.Join(basePackages, ","), suite, target, mirror}
	b.log.Info("running debootstrap (about 1 min)", "suite", suite, "mirror", mirror, "packages", len(basePackages))
	cmd := exec.CommandContext(ctx, debootstrap, args...)
	logFile := filepath.Join(tmp, "debootstrap.log")
	lf, err := os.Create(logFile)
	if err != nil {
		return "", err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	err = cmd.Run()
	lf.Close()
	// debootstrap mounts /proc and /sys in the target and does not always
	// unmount them when it fails.
	unmountUnder(target)
	if err != nil {
		log, _ := os.ReadFile(logFile)
		return "", fmt.Errorf("debootstrap: %w\n%s", err, lastLines(string(log), 20))
	}
	if err := cleanBase(target); err != nil {
		return "", err
	}
	part := filepath.Join(tmp, "base.tar")
	if err := writeRootfsTar(ctx, target, part); err != nil {
		return "", err
	}
	if err := os.Rename(part, final); err != nil {
		return "", err
	}
	return final, nil
}

// cleanBase removes what debootstrap leaves that an image should not carry:
// downloaded packages, the host's resolv.conf and hostname, device nodes
// (the container runtime provides /dev), the machine id (kind's entrypoint
// makes one per node).
func cleanBase(root string) error {
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

// debianMirror finds the Debian archive URI serving suite's main component
// in the host's apt sources (one-line sources.list files and deb822
// .sources files) under aptDir.
func debianMirror(aptDir, suite string) (string, error) {
	files := []string{filepath.Join(aptDir, "sources.list")}
	for _, pattern := range []string{"*.list", "*.sources"} {
		m, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", pattern))
		sort.Strings(m)
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var uri string
		if strings.HasSuffix(f, ".sources") {
			uri = mirrorFromDeb822(string(b), suite)
		} else {
			uri = mirrorFromList(string(b), suite)
		}
		if uri != "" {
			return uri, nil
		}
	}
	return "", fmt.Errorf("no Debian mirror for %s main in %s/sources.list(.d)", suite, aptDir)
}

// mirrorFromList reads one-line-style entries: "deb [opts] URI SUITE COMP...".
func mirrorFromList(text, suite string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) >= 3 && f[1] == suite && contains(f[2:], "main") {
			return f[0]
		}
	}
	return ""
}

// mirrorFromDeb822 reads deb822 stanzas (Types/URIs/Suites/Components).
func mirrorFromDeb822(text, suite string) string {
	for _, stanza := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		fields := map[string][]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				continue
			}
			fields[strings.ToLower(strings.TrimSpace(k))] = strings.Fields(v)
		}
		if strings.EqualFold(strings.Join(fields["enabled"], ""), "no") {
			continue
		}
		if !contains(fields["types"], "deb") || !contains(fields["suites"], suite) || !contains(fields["components"], "main") {
			continue
		}
		if len(fields["uris"]) > 0 {
			return fields["uris"][0]
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// tarFlags keep owners, permissions, hard links, xattrs (file capabilities)
// and ACLs exactly.
var tarFlags = []string{"--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls"}

// writeRootfsTar writes root as an uncompressed tar (entries "./...") at
// out, through a temporary name.
func writeRootfsTar(ctx context.Context, root, out string) error {
	part := out + ".part"
	args := append([]string{"-C", root, "-cf", part}, tarFlags...)
	args = append(args, ".")
	if o, err := exec.CommandContext(ctx, "tar", args...).CombinedOutput(); err != nil {
		os.Remove(part)
		return fmt.Errorf("tar %s: %w\n%s", root, err, lastLines(string(o), 10))
	}
	return os.Rename(part, out)
}

// untar unpacks tarball into dir (made if needed), keeping owners.
func untar(ctx context.Context, tarball, dir string, members ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := append([]string{"-C", dir, "-xpf", tarball, "--same-owner"}, tarFlags...)
	args = append(args, members...)
	if o, err := exec.CommandContext(ctx, "tar", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("untar %s: %w\n%s", tarball, err, lastLines(string(o), 10))
	}
	return nil
}

// unmountUnder unmounts everything at or below dir, best effort: it runs
// on cleanup paths whose own error matters more.
func unmountUnder(dir string) {
	if abs, err := filepath.Abs(dir); err == nil {
		_ = mountinfo.UnmountUnder(abs)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
