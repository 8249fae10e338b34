package nodeimage

import (
	"context"
	"path/filepath"
	"slices"

	"sigs.k8s.io/skewtest/clusters/internal/debian"
)

// suite is the Debian release of the base; the machines run it too.
const suite = debian.Suite

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

// baseSpec is the debootstrap base of every node image.
var baseSpec = debian.Spec{Suite: suite, Packages: basePackages}

// baseKey names the cached base tar: it changes with the package list.
func baseKey() string { return baseSpec.Key() }

// baseTar returns the cached debootstrap base as a tar, making it first if
// needed (about a minute; needs root and the Debian mirror).
func (b *builder) baseTar(ctx context.Context) (string, error) {
	return debian.BaseTar(ctx, filepath.Join(b.kindDir, "base"), baseSpec, b.log)
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }
