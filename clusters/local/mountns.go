package local

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

// Every kubelet, whatever its --root-dir, serves device plugin
// registration on the compiled-in hostDevicePluginDir: a starting kubelet
// removes any socket there and binds its own, so two kubelets of one host
// starting at once could each remove the other's socket, and one exited
// ("Failed to start ContainerManager"). So each node's kubelet runs in a
// mount namespace of its own, where that directory is the node's own
// (nodeLayout.devicePluginDir) and everything else is the host's:
//
//   - The run directory is a shared mount (shareRunDir, at bring-up): the
//     namespace's copy is a peer of the host's, so what the kubelet mounts
//     under its root (pod volumes, subPaths) is seen by containerd, the
//     CSI driver and the harness on the host, and what they mount there
//     (staging mounts, local volumes) is seen by the kubelet.
//   - In the namespace, the mount holding hostDevicePluginDir is made a
//     slave before the node's directory is bound over it, so the bind
//     never propagates back: the host's directory stays empty, and on a
//     host whose / is shared (systemd) no other namespace sees the bind.
//
// The namespace is made by util-linux's unshare with propagation
// unchanged (its default, private, would cut the run directory off from
// the host) and dies with the kubelet, taking the bind with it; nothing
// of it is left on the host. Starts then need no serialising.
const hostDevicePluginDir = hostKubeletRoot + "/device-plugins"

// kubeletNamespaceScript runs inside the kubelet's new mount namespace:
// $1 is the mount holding $3 (hostDevicePluginDir), $2 the node's own
// directory; the rest is the kubelet's command line. One line, as the
// kubelet's log quotes its command line.
const kubeletNamespaceScript = `set -e; mount --make-slave "$1"; mount --bind "$2" "$3"; shift 3; exec "$@"`

// Host programs the kubelet's namespace needs, from util-linux and mount.
const (
	unshareProgram = "unshare"
	shellProgram   = "/bin/sh"
)

// devicePluginDir is the node's hostDevicePluginDir, as its kubelet sees
// it.
func (l nodeLayout) devicePluginDir() string { return l.path("device-plugins" + l.suffix) }

// inOwnMountNamespace wraps the kubelet's command line argv so that it
// runs in a mount namespace of its own where hostDevicePluginDir is
// devicePluginDir (see hostDevicePluginDir). holder is the host's mount
// holding hostDevicePluginDir (devicePluginMount).
func (l nodeLayout) inOwnMountNamespace(holder string, argv []string) []string {
	return ownMountNamespace(holder, l.devicePluginDir(), hostDevicePluginDir, argv)
}

// ownMountNamespace wraps argv to run in a new mount namespace where own is
// bound over target, after the mount holding target, holder, was made a
// slave.
func ownMountNamespace(holder, own, target string, argv []string) []string {
	return append([]string{unshareProgram, "--mount", "--propagation", "unchanged", "--",
		shellProgram, "-c", kubeletNamespaceScript, "sh", holder, own, target}, argv...)
}

// prepareKubeletNamespaces readies the host for the kubelets' namespaces,
// once the state recorded what existed before: hostDevicePluginDir as a
// mount point (made if missing, removed by teardown when the state says
// the run made it), the run directory as a shared mount (unmounted by
// teardown with everything else under it), and each node's own device
// plugin directory. It returns the mount holding hostDevicePluginDir.
func (p *Provider) prepareKubeletNamespaces() (string, error) {
	if err := os.MkdirAll(hostDevicePluginDir, 0o755); err != nil {
		return "", fmt.Errorf("local provider: make %s, which each kubelet's namespace binds its node's own over: %w", hostDevicePluginDir, err)
	}
	for _, n := range p.nodes {
		if err := os.MkdirAll(n.l.devicePluginDir(), 0o755); err != nil {
			return "", err
		}
	}
	if err := shareRunDir(p.dir); err != nil {
		return "", err
	}
	return mountHolding(hostDevicePluginDir)
}

// shareRunDir makes dir a shared mount of its own, a bind of itself in a
// peer group of its own, unless it already is one (a repeated call).
func shareRunDir(dir string) error {
	mounts, err := mountinfo.ParseFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	if mountinfo.IsMountPoint(mounts, dir) {
		return nil
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("local provider: bind the run directory %s over itself, to share it with the kubelets' mount namespaces: %w", dir, err)
	}
	// A bind made under a shared mount (/ under systemd) joins that
	// mount's peer group: every mount under the run directory would then
	// propagate to / too, at the same path beneath the bind, and show
	// twice in mountinfo (a CSI staging mount "mounted 2 times"). Made
	// private first, it leaves that group; made shared then, it is a peer
	// group of its own, which the kubelets' namespaces and the CSI
	// driver's bidirectional mounts join.
	for _, flag := range []uintptr{unix.MS_PRIVATE, unix.MS_SHARED} {
		if err := unix.Mount("", dir, "", flag, ""); err != nil {
			return errors.Join(fmt.Errorf("local provider: make the run directory %s a shared mount of its own peer group: %w", dir, err), unix.Unmount(dir, unix.MNT_DETACH))
		}
	}
	return nil
}

// mountHolding is the mount point of the host's mount holding path: the
// deepest mount whose mount point is path or one of its parents.
func mountHolding(path string) (string, error) {
	mounts, err := mountinfo.ParseFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	best := ""
	for _, m := range mounts {
		if mountinfo.IsUnder(path, m.MountPoint) && len(m.MountPoint) > len(best) {
			best = m.MountPoint
		}
	}
	if best == "" {
		return "", fmt.Errorf("local provider: no mount holds %s in /proc/self/mountinfo", path)
	}
	return best, nil
}
