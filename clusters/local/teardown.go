package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec" // this host's ip tool, deleting the bridges the run made
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/iptables"
	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/clusters/internal/sysctl"
	"sigs.k8s.io/skewtest/clusters/local/internal/process"
	"sigs.k8s.io/skewtest/clusters/loopdev"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

// Down implements clusters.Provider: stops everything this run started and
// removes everything it made. It is safe after a partial Up and repeatable.
func (p *Provider) Down(ctx context.Context) error {
	start := time.Now()
	var errs []error
	if p.csiMode == csidriver.ModeEBS {
		p.awaitDetach(ctx)
	}
	p.mu.Lock()
	nodes, procs := p.nodes, p.procs
	p.procs = nil
	if p.stopRecording != nil {
		p.stopRecording()
	}
	p.mu.Unlock()
	// The kubelets first, so none restarts a container; the plugins; the
	// pods, so containerd has nothing to wait for; the containerds; then
	// the control plane in reverse start order. Nodes stop at once.
	if err := p.parallel(ctx, func(ctx context.Context, n *Node) error { return n.stop(ctx) }); err != nil {
		errs = append(errs, err)
	}
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].Stop(20 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if err := clean(ctx, p.dir, p.logger); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		p.logger.Info("local cluster removed", "dir", p.dir, "nodes", len(nodes), "took", time.Since(start).Round(100*time.Millisecond))
	}
	return errors.Join(errs...)
}

// stop stops what the node runs: its kubelet, its CSI driver, its pods and
// its containerd, in that order. Mounts and files stay for Clean.
func (n *Node) stop(ctx context.Context) error {
	var errs []error
	if err := n.StopKubelet(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := n.StopCSIDriver(ctx); err != nil {
		errs = append(errs, err)
	}
	n.mu.Lock()
	containerd := n.containerd
	n.containerd = nil
	n.mu.Unlock()
	if err := killCgroup(n.st.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	if containerd != nil {
		if err := containerd.Stop(20 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// loopDetachTimeout bounds the wait for a run's loop devices to detach.
const loopDetachTimeout = 10 * time.Second

// Clean removes everything a local run left under and outside runDir, for
// every node: processes (from pid files and the run's cgroups, including
// the CSI driver's and the external-attacher), containerd shims, mounts,
// loop devices backed by files under runDir, cgroups, the kubelets' iptables chains, the
// CNI bridges, the kubelets' /var/log/containers links, the pod logs of
// kubelets before 1.30 in /var/log/pods, CNI cache entries, /run/containerd if the run made it and nothing else uses it
// (else it says so and leaves it), then runDir itself. It is what Down does after stopping its own
// processes, and what `skewtest clean` runs for a harness that was killed.
func Clean(ctx context.Context, runDir string) error {
	return clean(ctx, runDir, slog.Default())
}

func clean(ctx context.Context, runDir string, log *slog.Logger) error {
	if _, err := os.Stat(runDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	st, err := readState(runDir)
	if err != nil {
		return fmt.Errorf("clean %s: read state: %w", runDir, err)
	}
	var errs []error
	// After a reboot the kernel state the run changed (iptables chains,
	// links, kernel settings, cgroups) went with that boot: what is there
	// now was made since, by someone else (the host's Docker, systemd),
	// and is never "restored". Only the run's files go. The process kills
	// below check the boot themselves.
	rebooted := st.BootID != "" && st.BootID != bootID()
	if rebooted {
		log.Warn("the host rebooted since the run: its iptables chains, links, kernel settings and cgroups went with that boot; what is there now is left alone, only the run's files are removed", "run", runDir, "bootID", st.BootID)
	}
	// The kubelets first so they do not restart containers; then the pods.
	for i := range st.Nodes {
		if err := process.KillPIDFile(layoutOf(runDir, i).kubeletPIDFile()); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range st.Nodes {
		if rebooted {
			break
		}
		if err := killCgroup(ns.CgroupRoot); err != nil {
			errs = append(errs, err)
		}
	}
	pids, _ := filepath.Glob(filepath.Join(runDir, "pids", "*.pid"))
	for _, f := range pids {
		if err := process.KillPIDFile(f); err != nil {
			errs = append(errs, err)
		}
	}
	// containerd's shims outlive containerd; they name its socket.
	for i := range st.Nodes {
		killMatching(layoutOf(runDir, i).containerdSocket())
	}
	if !rebooted {
		if err := killRunCgroup(st.Cgroup); err != nil {
			errs = append(errs, err)
		}
	}
	if err := mountinfo.UnmountBelow(runDir); err != nil {
		errs = append(errs, err)
	}
	// The CSI driver's EBS mode attaches loop devices over files in the
	// run directory, and the kubelet attaches its own over block volumes'
	// files under its root: detach them, now that nothing is mounted
	// below the run directory, and before its own bind (mountns.go) goes:
	// a loop device's backing file then reads relative to that bind, no
	// longer under runDir.
	if err := loopdev.DetachUnder(ctx, runDir, loopDetachTimeout); err != nil {
		errs = append(errs, err)
	}
	if err := mountinfo.UnmountUnder(runDir); err != nil {
		errs = append(errs, err)
	}
	if !rebooted {
		errs = append(errs, restoreKernelState(ctx, st)...)
	}
	for _, ns := range st.Nodes {
		if rebooted || ns.Bridge == "" {
			continue
		}
		if _, err := os.Stat("/sys/class/net/" + ns.Bridge); err == nil {
			if out, err := exec.CommandContext(ctx, "ip", "link", "delete", ns.Bridge).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("delete bridge %s: %v: %s", ns.Bridge, err, out))
			}
		}
	}
	if st.PodLogsRecorded {
		if err := removeRunPodLogs(hostPodLogDir, st.PodLogsBefore, st.PodLogDirMade, hostContainerLogDir); err != nil {
			errs = append(errs, fmt.Errorf("remove the pod logs of the run's kubelets before %s: %w", podLogsDirSince, err))
		}
	}
	removeLinksInto(hostContainerLogDir, runDir)
	if st.ContainerLogDirMade {
		removeEmptyDirs(hostContainerLogDir)
	}
	var networks []string
	for _, ns := range st.Nodes {
		networks = append(networks, ns.CNINetwork)
		if ns.CNINetwork != "" {
			os.RemoveAll(filepath.Join(hostCNIDir, "networks", ns.CNINetwork))
		}
	}
	if _, err := removeCNIEntries(hostCNIDir, runDir, networks); err != nil {
		errs = append(errs, fmt.Errorf("remove CNI cache entries: %w", err))
	}
	if st.CNIDirMade {
		removeEmptyDirs(hostCNIDir)
	}
	// The kubelets are gone: their kernel settings go back.
	if !rebooted {
		if err := sysctl.RestoreLogged(st.Sysctls, log, "run", runDir); err != nil {
			errs = append(errs, err)
		}
	}
	if !st.ContainerdRunDirExisted && len(st.Nodes) > 0 {
		// Shim sockets go to /run/containerd/s whatever the state dir is.
		// The run made the directory, but a containerd started since (a
		// reboot, a Docker install) may live there now: only the run's
		// dead leftovers are removed, never across a mount.
		if _, err := os.Lstat(containerdRunDir); err == nil {
			if why := containerdRunDirInUse(containerdRunDir, st); why != "" {
				log.Warn("not removing "+containerdRunDir+", which the run made: it is in use", "why", why, "run", runDir)
			} else if err := os.RemoveAll(containerdRunDir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	switch {
	case st.HostKubeletDirMade:
		if err := removeDirOfRun(hostKubeletRoot); err != nil {
			errs = append(errs, err)
		}
	case st.DevicePluginDirMade:
		if err := removeDirOfRun(hostDevicePluginDir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("clean %s: %w", runDir, errors.Join(errs...))
	}
	if err := removeDirOfRun(runDir); err != nil {
		return fmt.Errorf("clean %s: %w", runDir, err)
	}
	return nil
}

// restoreKernelState removes the run's cgroups and the iptables chains its
// kubelets added, in this boot of the host.
func restoreKernelState(ctx context.Context, st state) []error {
	var errs []error
	for _, ns := range st.Nodes {
		if err := removeCgroup(ns.CgroupRoot); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeRunCgroup(ctx, st.Cgroup); err != nil {
		errs = append(errs, err)
	}
	if err := removeNewChains(ctx, st); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// removeDirOfRun removes dir, which the run made, and all inside it, unless
// something is mounted under it.
func removeDirOfRun(dir string) error {
	// Never RemoveAll across a mount point: it would delete what is inside.
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("%d mounts still under %s (first: %s); not removing the directory", len(left), dir, left[0].MountPoint)
	}
	return os.RemoveAll(dir)
}

func mountsUnder(dir string) []mountinfo.Mount {
	mounts, err := mountinfo.ParseFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	return mountinfo.Under(mounts, dir)
}

// killMatching kills processes whose command line contains s.
func killMatching(s string) {
	for _, pid := range procfs.OtherPIDs() {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			_ = process.KillAndWait(pid, 5*time.Second)
		}
	}
}

func removeLinksInto(dir, target string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if dest, err := os.Readlink(path); err == nil && strings.HasPrefix(dest, target+"/") {
			os.Remove(path)
		}
	}
}

// iptables: the kubelet adds KUBE-FIREWALL, KUBE-KUBELET-CANARY and
// KUBE-IPTABLES-HINT chains (and jumps to them) in several tables. Up
// records which chains exist before the kubelet runs
// (iptables.ChainSets); teardown removes the KUBE-* ones added since and
// the jumps into them, and nothing else.

// kubeletChains is what of the tables the local provider's kubelets make.
var kubeletChains = iptables.Owner{Chain: func(c string) bool { return strings.HasPrefix(c, "KUBE-") }}

func removeNewChains(ctx context.Context, st state) error {
	if !st.IPTablesRecorded {
		// Never recorded (bring-up stopped before): nothing of ours.
		return nil
	}
	var errs []error
	for _, tool := range iptables.Tools {
		after, err := iptables.Save(ctx, tool)
		if err != nil {
			continue
		}
		errs = append(errs, iptables.Apply(ctx, tool, iptables.RestorePlan(iptables.ChainsOnly(tool, st.IPTablesBefore), after, kubeletChains)))
	}
	return errors.Join(errs...)
}
