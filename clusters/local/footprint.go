package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/skewtest/clusters/loopdev"
)

// Footprint is everything on this host that local runs make, counted so
// a test can prove a run left nothing behind: compare one taken before a
// run with one taken after.
type Footprint struct {
	// Processes are live cluster daemons and shims, "comm(pid)".
	Processes []string
	// Mounts are mount points under the run root.
	Mounts []string
	// RunDirs are directories under the run root.
	RunDirs []string
	// Cgroups are skewtest-* cgroups in any hierarchy.
	Cgroups []string
	// Chains are iptables/ip6tables KUBE-* chains, "tool|table|chain".
	Chains []string
	// Links are skw* network interfaces (the runs' CNI bridges) and veths
	// attached to them.
	Links []string
	// LogLinks are /var/log/containers links into the run root.
	LogLinks []string
	// CNIEntries are /var/lib/cni entries of skewtest networks.
	CNIEntries []string
	// HostKubeletFiles are files under /var/lib/kubelet, the kubelet's
	// default root and certificate directory: a kubelet run without
	// --root-dir or --cert-dir writes there, outside any run directory.
	HostKubeletFiles []string
	// LoopDevices are loop devices backed by files under the run root
	// (the CSI driver's EBS mode, the kubelet's block volumes),
	// "/dev/loopN backing-file".
	LoopDevices []string
}

// hostKubeletRoot is the kubelet's default --root-dir.
const hostKubeletRoot = "/var/lib/kubelet"

// daemons are the process names local runs start.
var daemons = map[string]bool{
	"etcd": true, "kube-apiserver": true, "kube-controller": true, "kube-scheduler": true,
	"kubelet": true, "containerd": true, "containerd-shim": true, "podbin": true,
	"dockerd": true, "docker-proxy": true, "skewtest-csi-dr": true, "csi-attacher": true,
}

// TakeFootprint reads the footprint of local runs under runRoot
// (DefaultRunRoot when empty).
func TakeFootprint(ctx context.Context, runRoot string) Footprint {
	if runRoot == "" {
		runRoot = DefaultRunRoot
	}
	var f Footprint
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		comm, err := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		if daemons[name] || strings.HasPrefix(name, "containerd-shim") {
			if stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat")); err == nil {
				// Zombies are dead: their parent has yet to reap them.
				if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
					continue
				}
			}
			f.Processes = append(f.Processes, fmt.Sprintf("%s(%s)", name, p.Name()))
		}
	}
	for _, m := range mountsUnder(runRoot) {
		f.Mounts = append(f.Mounts, m.MountPoint)
	}
	if entries, err := os.ReadDir(runRoot); err == nil {
		for _, e := range entries {
			f.RunDirs = append(f.RunDirs, filepath.Join(runRoot, e.Name()))
		}
	}
	hier, _ := filepath.Glob("/sys/fs/cgroup/*/skewtest-*")
	top, _ := filepath.Glob("/sys/fs/cgroup/skewtest-*")
	f.Cgroups = append(hier, top...)
	for _, c := range iptablesChains(ctx) {
		if strings.Contains(c, "|KUBE-") || strings.Contains(c, "|DOCKER") || strings.Contains(c, "|CNI-") {
			f.Chains = append(f.Chains, c)
		}
	}
	// Docker sets the FORWARD policy to DROP; a run must restore it.
	f.Chains = append(f.Chains, builtinPolicies(ctx)...)
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		if strings.HasPrefix(l.Name(), "skw") || l.Name() == "docker0" || strings.HasPrefix(l.Name(), "br-") || strings.HasPrefix(l.Name(), "veth") {
			f.Links = append(f.Links, l.Name())
		} else if master, err := os.Readlink(filepath.Join("/sys/class/net", l.Name(), "master")); err == nil && strings.HasPrefix(filepath.Base(master), "skw") {
			f.Links = append(f.Links, l.Name())
		}
	}
	if entries, err := os.ReadDir("/var/log/containers"); err == nil {
		for _, e := range entries {
			path := filepath.Join("/var/log/containers", e.Name())
			if dest, err := os.Readlink(path); err == nil && strings.HasPrefix(dest, runRoot+"/") {
				f.LogLinks = append(f.LogLinks, path)
			}
		}
	}
	for _, pattern := range []string{"/var/lib/cni/results/skewtest-*", "/var/lib/cni/networks/skewtest-*"} {
		m, _ := filepath.Glob(pattern)
		f.CNIEntries = append(f.CNIEntries, m...)
	}
	_ = filepath.WalkDir(hostKubeletRoot, func(path string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			f.HostKubeletFiles = append(f.HostKubeletFiles, path)
		}
		return nil
	})
	if loops, err := loopdev.BackedUnder(runRoot); err == nil {
		for _, d := range loops {
			f.LoopDevices = append(f.LoopDevices, d.Path+" "+d.BackingFile)
		}
	}
	for _, l := range [][]string{f.Processes, f.Mounts, f.RunDirs, f.Cgroups, f.Chains, f.Links, f.LogLinks, f.CNIEntries, f.HostKubeletFiles, f.LoopDevices} {
		sort.Strings(l)
	}
	return f
}

// Added lists what after has that f has not, one line per item ("mount
// /var/lib/skewtest/..."); empty means nothing was left behind. Processes
// are compared by name, since pids differ.
func (f Footprint) Added(after Footprint) []string {
	var out []string
	diff := func(kind string, before, after []string, key func(string) string) {
		count := map[string]int{}
		for _, b := range before {
			count[key(b)]++
		}
		for _, a := range after {
			if count[key(a)] > 0 {
				count[key(a)]--
				continue
			}
			out = append(out, kind+" "+a)
		}
	}
	id := func(s string) string { return s }
	name := func(s string) string {
		if i := strings.IndexByte(s, '('); i >= 0 {
			return s[:i]
		}
		return s
	}
	diff("process", f.Processes, after.Processes, name)
	diff("mount", f.Mounts, after.Mounts, id)
	diff("run dir", f.RunDirs, after.RunDirs, id)
	diff("cgroup", f.Cgroups, after.Cgroups, id)
	diff("iptables chain", f.Chains, freshTablesDropped(f.Chains, after.Chains), id)
	diff("link", f.Links, after.Links, id)
	diff("log link", f.LogLinks, after.LogLinks, id)
	diff("cni entry", f.CNIEntries, after.CNIEntries, id)
	diff("host kubelet file", f.HostKubeletFiles, after.HostKubeletFiles, id)
	diff("loop device", f.LoopDevices, after.LoopDevices, id)
	return out
}

// freshTablesDropped is after without the default (ACCEPT) policies of
// tables that before does not have at all: the kernel makes a table, with
// its built-in chains, the first time anything uses it (the kubelet's
// chains in mangle and nat on a freshly booted host), and keeps it after
// the run's chains are gone. Such a table holds nothing of the run.
func freshTablesDropped(before, after []string) []string {
	tables := map[string]bool{}
	for _, b := range before {
		if i := strings.LastIndexByte(b, '|'); i > 0 {
			tables[b[:i]] = true
		}
	}
	var out []string
	for _, a := range after {
		i := strings.LastIndexByte(a, '|')
		if i > 0 && !tables[a[:i]] && strings.HasSuffix(a, " policy ACCEPT") {
			continue
		}
		out = append(out, a)
	}
	return out
}

// Count is the number of items, for progress output.
func (f Footprint) Count() int {
	return len(f.Processes) + len(f.Mounts) + len(f.RunDirs) + len(f.Cgroups) + len(f.Chains) + len(f.Links) + len(f.LogLinks) + len(f.CNIEntries) + len(f.HostKubeletFiles) + len(f.LoopDevices)
}

// builtinPolicies lists the policies of the built-in chains, such as
// "iptables|filter|FORWARD policy DROP".
func builtinPolicies(ctx context.Context) []string {
	var out []string
	for _, tool := range []string{"iptables", "ip6tables"} {
		b, err := exec.CommandContext(ctx, tool+"-save").Output()
		if err != nil {
			continue
		}
		table := ""
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":"):
				if f := strings.Fields(line[1:]); len(f) >= 2 && f[1] != "-" {
					out = append(out, fmt.Sprintf("%s|%s|%s policy %s", tool, table, f[0], f[1]))
				}
			}
		}
	}
	return out
}
