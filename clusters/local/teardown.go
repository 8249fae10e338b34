package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/iptables"
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
	if err := Clean(ctx, p.dir); err != nil {
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
	killCgroup(n.st.CgroupRoot)
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
// every node: processes (from pid files and the nodes' cgroups, including
// the CSI driver's and the external-attacher), containerd shims, mounts,
// loop devices backed by files under runDir, cgroups, the kubelets' iptables chains, the
// CNI bridges, the kubelets' /var/log/containers links and CNI cache
// entries, then runDir itself. It is what Down does after stopping its own
// processes, and what `skewtest clean` runs for a harness that was killed.
func Clean(ctx context.Context, runDir string) error {
	if _, err := os.Stat(runDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	st, err := readState(runDir)
	if err != nil {
		return fmt.Errorf("clean %s: read state: %w", runDir, err)
	}
	var errs []error
	// The kubelets first so they do not restart containers; then the pods.
	for i := range st.Nodes {
		if err := process.KillPIDFile(layoutOf(runDir, i).kubeletPIDFile()); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range st.Nodes {
		killCgroup(ns.CgroupRoot)
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
	if err := mountinfo.UnmountUnder(runDir); err != nil {
		errs = append(errs, err)
	}
	// The CSI driver's EBS mode attaches loop devices over files in the
	// run directory, and the kubelet attaches its own over block volumes'
	// files under its root: detach them, now that nothing is mounted.
	if err := loopdev.DetachUnder(ctx, runDir, loopDetachTimeout); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range st.Nodes {
		if err := removeCgroup(ns.CgroupRoot); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeNewChains(ctx, st); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range st.Nodes {
		if ns.Bridge == "" {
			continue
		}
		if _, err := os.Stat("/sys/class/net/" + ns.Bridge); err == nil {
			if out, err := exec.CommandContext(ctx, "ip", "link", "delete", ns.Bridge).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("delete bridge %s: %v: %s", ns.Bridge, err, out))
			}
		}
	}
	removeLinksInto("/var/log/containers", runDir)
	for _, ns := range st.Nodes {
		if ns.CNINetwork == "" {
			continue
		}
		for _, pattern := range []string{"/var/lib/cni/results/" + ns.CNINetwork + "-*", "/var/lib/cni/networks/" + ns.CNINetwork} {
			matches, _ := filepath.Glob(pattern)
			for _, m := range matches {
				os.RemoveAll(m)
			}
		}
	}
	if !st.ContainerdRunDirExisted && len(st.Nodes) > 0 {
		// Shim sockets go to /run/containerd/s whatever the state dir is.
		os.RemoveAll("/run/containerd")
	}
	if st.HostKubeletDirMade {
		if err := removeDirOfRun(hostKubeletRoot); err != nil {
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

func cgroupDirs(root string) []string {
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	var dirs []string
	for _, h := range hier {
		d := filepath.Join(h, root)
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			dirs = append(dirs, d)
		}
	}
	if fi, err := os.Stat(filepath.Join("/sys/fs/cgroup", root)); err == nil && fi.IsDir() {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", root))
	}
	return dirs
}

// killCgroup SIGKILLs every process in a node's cgroup trees: the pods'
// containers, which containerd's shims would otherwise leave behind.
func killCgroup(root string) {
	if root == "" {
		// An empty root names the top of every hierarchy: the whole host.
		return
	}
	for range 3 {
		var pids []int
		for _, d := range cgroupDirs(root) {
			_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
				if err != nil || e.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids = append(pids, pid)
					}
				}
				return nil
			})
		}
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = process.KillAndWait(pid, 5*time.Second)
		}
	}
}

// removeCgroup removes a node's cgroup trees, deepest first.
func removeCgroup(root string) error {
	if root == "" {
		return nil
	}
	var errs []error
	for _, d := range cgroupDirs(root) {
		var dirs []string
		_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			// A cgroup whose last task just died can be briefly busy.
			for range 20 {
				if err = unix.Rmdir(dirs[i]); err == nil || errors.Is(err, unix.ENOENT) {
					err = nil
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// killMatching kills processes whose command line contains s.
func killMatching(s string) {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
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
// KUBE-IPTABLES-HINT chains (and jumps to them) in several tables. We note
// which chains exist before the kubelet runs and remove the KUBE-* ones it
// added.

func iptablesChains(ctx context.Context) []string {
	var out []string
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, c := range savedChains(ctx, tool) {
			out = append(out, tool+"|"+c.table+"|"+c.name)
		}
	}
	sort.Strings(out)
	return out
}

type chain struct{ table, name string }

type savedRule struct {
	table string
	args  []string // after "-A"
}

func iptablesSave(ctx context.Context, tool string) (chains []chain, rules []savedRule) {
	out, err := exec.CommandContext(ctx, tool+"-save").Output()
	if err != nil {
		return nil, nil
	}
	table := ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			if f := strings.Fields(line[1:]); len(f) > 0 {
				chains = append(chains, chain{table, f[0]})
			}
		case strings.HasPrefix(line, "-A "):
			// iptables-save writes no unterminated quote; a line with
			// one could not be replayed as a -D either.
			if args, err := iptables.SplitRule(line[3:]); err == nil {
				rules = append(rules, savedRule{table, args})
			}
		}
	}
	return chains, rules
}

func savedChains(ctx context.Context, tool string) []chain {
	c, _ := iptablesSave(ctx, tool)
	return c
}

func removeNewChains(ctx context.Context, st state) error {
	if !st.IPTablesRecorded {
		// Never recorded (bring-up stopped before): nothing of ours.
		return nil
	}
	had := map[string]bool{}
	for _, b := range st.IPTablesBefore {
		had[b] = true
	}
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		chains, rules := iptablesSave(ctx, tool)
		ours := map[chain]bool{}
		for _, c := range chains {
			if strings.HasPrefix(c.name, "KUBE-") && !had[tool+"|"+c.table+"|"+c.name] {
				ours[c] = true
			}
		}
		if len(ours) == 0 {
			continue
		}
		// Jumps into our chains from chains we keep.
		for _, r := range rules {
			if len(r.args) == 0 || ours[chain{r.table, r.args[0]}] {
				continue
			}
			for i, a := range r.args {
				if (a == "-j" || a == "-g") && i+1 < len(r.args) && ours[chain{r.table, r.args[i+1]}] {
					args := append([]string{"-w", "-t", r.table, "-D"}, r.args...)
					if out, err := exec.CommandContext(ctx, tool, args...).CombinedOutput(); err != nil {
						errs = append(errs, fmt.Errorf("%s %s: %v: %s", tool, strings.Join(args, " "), err, out))
					}
					break
				}
			}
		}
		for c := range ours {
			_ = exec.CommandContext(ctx, tool, "-w", "-t", c.table, "-F", c.name).Run()
		}
		for c := range ours {
			if out, err := exec.CommandContext(ctx, tool, "-w", "-t", c.table, "-X", c.name).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s -t %s -X %s: %v: %s", tool, c.table, c.name, err, out))
			}
		}
	}
	return errors.Join(errs...)
}

// makeCgroupRoot creates the kubelet's cgroupRoot in every hierarchy (the
// kubelet refuses a cgroupRoot that does not exist). cpuset children start
// empty on cgroup v1, so they get the parent's CPUs and memory nodes.
func makeCgroupRoot(root string) error {
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hier {
		if fi, err := os.Stat(h); err != nil || !fi.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue
		}
		d := filepath.Join(h, root)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				_ = os.WriteFile(filepath.Join(d, f), b, 0o644)
			}
		}
	}
	return nil
}
