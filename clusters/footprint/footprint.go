// Package footprint takes stock of everything on a host that skewtest's
// clusters (the local provider's daemons, the kind provider's private
// dockerd and its nodes) can make or change, so that a test or CI can
// prove a run left the host as it found it: take one before, one after, and
// Diff them. It knows no provider; every provider's teardown tests use it,
// and so does `skewtest footprint save|compare` in .ci/run.
package footprint

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
	"sigs.k8s.io/skewtest/clusters/internal/iptables"
	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/clusters/internal/sysctl"
	"sigs.k8s.io/skewtest/clusters/loopdev"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

// Footprint is one look at the host. Every list is sorted.
type Footprint struct {
	// Processes are live daemons of the kinds runs start, "name(pid)"
	// (kubelet, containerd, dockerd, ...), one entry per process, except
	// those of another Go test binary that still runs (ofAnotherGoTest).
	Processes []string `json:"processes"`
	// Mounts are the mount points of this mount namespace, "path (type)",
	// one entry per mount, except those of Go tests' temporary directories.
	Mounts []string `json:"mounts"`
	// LoopDevices are attached loop devices, "loop3 /backing/file",
	// except those over a file in a Go test's temporary directory.
	LoopDevices []string `json:"loopDevices"`
	// Cgroups are skewtest's cgroups in any hierarchy, v1 or v2.
	Cgroups []string `json:"cgroups"`
	// Iptables are every chain with its policy and every rule of every
	// table, "iptables|filter|:FORWARD ACCEPT", "iptables|nat|-A ...".
	Iptables []string `json:"iptables"`
	// Links are the network interfaces.
	Links []string `json:"links"`
	// Sysctls are the kernel settings runs change (sysctl.Keys), "key=value".
	Sysctls []string `json:"sysctls"`
	// RunDirs are the run directories under RunRoot.
	RunDirs []string `json:"runDirs"`
	// Files are the files and directories under Paths.
	Files []string `json:"files"`
}

// RunRoot is where the local and kind providers make one directory per
// run by default (local.DefaultRunRoot); only its entries are listed, not
// what a run has inside.
const RunRoot = "/var/lib/skewtest"

// Paths are the host directories outside any run directory that runs, or
// the daemons they start, write to: the kubelet's default root (its device
// plugin socket and checkpoint whatever --root-dir is), the CNI result and
// IPAM caches, the kubelet's log links, the runtimes' shim sockets and
// network namespaces (/var/run is /run), and Docker's.
var Paths = []string{
	"/var/lib/kubelet",
	"/var/lib/cni",
	"/var/log/containers",
	"/var/log/pods",
	"/run/containerd",
	"/run/docker",
	"/run/netns",
	"/opt/containerd",
	"/etc/cni/net.d",
	"/etc/docker",
}

// Daemons are the process names runs start (/proc/PID/comm, at most 15
// characters).
var Daemons = []string{
	"etcd", "kube-apiserver", "kube-controller", "kube-scheduler", "kubelet",
	"containerd", "containerd-shim", "podbin",
	"dockerd", "docker-proxy", "skewtest-csi-dr", "skewtest-runc-s", "kube-proxy", "runc",
}

// CgroupPrefix starts the name of every cgroup runs make.
const CgroupPrefix = "skewtest-"

// goTestTemp matches the temporary directories of Go tests (t.TempDir:
// $TMPDIR/TestName123/001): whatever a test mounts or attaches there is
// its own, and skewtest's runs never put anything there.
func goTestTemp(path string) bool {
	rel, err := filepath.Rel(os.TempDir(), path)
	return err == nil && strings.HasPrefix(rel, "Test")
}

// ofAnotherGoTest tells whether process pid descends from a Go test binary
// (an executable named *.test) other than this process, which meets such
// a binary first when pid is its own. go test runs packages side by side:
// one package's daemons (a podbin, a runc shim) are not a leak of the test
// that compares footprints in another. A process a test binary leaves is
// reparented when the binary exits, and counted again.
func ofAnotherGoTest(pid int) bool {
	self := os.Getpid()
	// The bound only stops a walk that meets a cycle of reused pids.
	for range 64 {
		if pid <= 1 || pid == self {
			return false
		}
		if exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe")); err == nil && strings.HasSuffix(exe, ".test") {
			return true
		}
		st, err := procfs.ReadStat(pid)
		if err != nil {
			return false
		}
		pid = st.PPID
	}
	return false
}

// Take looks at the host. What it cannot read (no iptables, no loop
// devices) is left empty: that is the same before and after.
func Take(ctx context.Context) Footprint {
	var f Footprint
	daemons := map[string]bool{}
	for _, d := range Daemons {
		daemons[d] = true
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		comm, err := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		if !daemons[name] {
			continue
		}
		// Zombies are dead: their parent has yet to reap them.
		if pid, err := strconv.Atoi(p.Name()); err == nil {
			if st, err := procfs.ReadStat(pid); err == nil && st.Dead() {
				continue
			}
			if ofAnotherGoTest(pid) {
				continue
			}
		}
		f.Processes = append(f.Processes, fmt.Sprintf("%s(%s)", name, p.Name()))
	}
	mountPoints := map[string]bool{}
	if mounts, err := mountinfo.ParseFile("/proc/self/mountinfo"); err == nil {
		for _, m := range mounts {
			mountPoints[m.MountPoint] = true
			if !goTestTemp(m.MountPoint) {
				f.Mounts = append(f.Mounts, fmt.Sprintf("%s (%s)", m.MountPoint, m.FSType))
			}
		}
	}
	f.LoopDevices = loopDevices("/sys/block")
	if hs, err := cgroups.Mounted("/proc/self/mountinfo"); err == nil {
		f.Cgroups = cgroups.Owned(hs, CgroupPrefix)
	}
	for _, tool := range iptables.Tools {
		rs, err := iptables.Save(ctx, tool)
		if err != nil {
			continue
		}
		for _, name := range rs.Order {
			t := rs.Tables[name]
			for _, c := range t.Chains {
				f.Iptables = append(f.Iptables, fmt.Sprintf("%s|%s|:%s %s", tool, name, c, t.Policies[c]))
			}
			for _, r := range t.Rules {
				f.Iptables = append(f.Iptables, tool+"|"+name+"|"+r)
			}
		}
	}
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		f.Links = append(f.Links, l.Name())
	}
	for k, v := range sysctl.Read(sysctl.Keys) {
		f.Sysctls = append(f.Sysctls, k+"="+v)
	}
	if entries, err := os.ReadDir(RunRoot); err == nil {
		for _, e := range entries {
			f.RunDirs = append(f.RunDirs, filepath.Join(RunRoot, e.Name()))
		}
	}
	for _, root := range Paths {
		_ = filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			// Mounts are counted as mounts; their content is not ours.
			if e.IsDir() && path != root && mountPoints[path] {
				return filepath.SkipDir
			}
			f.Files = append(f.Files, path)
			return nil
		})
	}
	for _, l := range [][]string{f.Processes, f.Mounts, f.LoopDevices, f.Cgroups, f.Iptables, f.Links, f.Sysctls, f.RunDirs, f.Files} {
		sort.Strings(l)
	}
	return f
}

// loopDevices lists the attached loop devices under sysBlock (/sys/block)
// with their backing files, "loop3 /backing/file".
func loopDevices(sysBlock string) []string {
	devs, _ := loopdev.ListIn(sysBlock)
	out := make([]string, 0, len(devs))
	for _, d := range devs {
		f := d.BackingFile
		if goTestTemp(f) {
			continue
		}
		if d.Deleted {
			f += " (deleted)"
		}
		out = append(out, filepath.Base(d.Path)+" "+f)
	}
	return out
}

// Diff names every difference between before and after, one line each:
// "added mount /var/lib/skewtest/x (tmpfs)", "removed link eth1",
// "changed sysctl kernel.panic: 1 -> 10". Empty means the host is as it
// was. Processes compare by name and count, since pids differ; the line
// names the pid.
//
// Two differences are not ones. A kernel setting that appears: its module
// was loaded (nf_conntrack by the first conntrack rule, br_netfilter by
// dockerd), and unloading it is no run's to do. And a table iptables-save
// did not print before that now holds nothing but built-in chains at
// ACCEPT: the kernel makes a table, with those chains, the first time
// anything looks at it (a run's kubelet on a freshly booted host), and
// keeps it after the run's chains are gone; it holds nothing of the run.
func Diff(before, after Footprint) []string {
	var out []string
	listBy := func(kind string, b, a []string, key func(string) string) {
		count := map[string]int{}
		for _, x := range b {
			count[key(x)]++
		}
		for _, x := range a {
			if count[key(x)] > 0 {
				count[key(x)]--
				continue
			}
			out = append(out, "added "+kind+" "+x)
		}
		for _, x := range b {
			if count[key(x)] > 0 {
				count[key(x)]--
				out = append(out, "removed "+kind+" "+x)
			}
		}
	}
	list := func(kind string, b, a []string) { listBy(kind, b, a, func(s string) string { return s }) }
	// Pids differ from one process to the next: by name and count.
	listBy("process", before.Processes, after.Processes, func(s string) string {
		name, _, _ := strings.Cut(s, "(")
		return name
	})
	list("mount", before.Mounts, after.Mounts)
	list("loop device", before.LoopDevices, after.LoopDevices)
	list("cgroup", before.Cgroups, after.Cgroups)
	list("iptables", before.Iptables, freshTablesDropped(before.Iptables, after.Iptables))
	list("link", before.Links, after.Links)
	out = append(out, diffSysctls(before.Sysctls, after.Sysctls)...)
	list("run dir", before.RunDirs, after.RunDirs)
	list("file", before.Files, after.Files)
	return out
}

func diffSysctls(before, after []string) []string {
	b, a := map[string]string{}, map[string]string{}
	var keys []string
	for _, kv := range before {
		k, v, _ := strings.Cut(kv, "=")
		b[k] = v
		keys = append(keys, k)
	}
	for _, kv := range after {
		k, v, _ := strings.Cut(kv, "=")
		a[k] = v
		if _, ok := b[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		was, hadIt := b[k]
		now, hasIt := a[k]
		switch {
		case !hadIt:
			// Its module (nf_conntrack, br_netfilter) was loaded during
			// the run: the kernel's doing, which no run can take back
			// while others may use the module.
		case !hasIt:
			out = append(out, fmt.Sprintf("removed sysctl %s (was %s; a kernel module was unloaded)", k, was))
		case was != now:
			out = append(out, fmt.Sprintf("changed sysctl %s: %s -> %s", k, was, now))
		}
	}
	return out
}

// freshTablesDropped is after without the tables that before does not
// have at all and that hold only built-in chains at ACCEPT (see Diff).
func freshTablesDropped(before, after []string) []string {
	tableOf := func(line string) string {
		i := strings.Index(line, "|")
		j := strings.Index(line[i+1:], "|")
		if i < 0 || j < 0 {
			return line
		}
		return line[:i+1+j]
	}
	had := map[string]bool{}
	for _, l := range before {
		had[tableOf(l)] = true
	}
	empty := map[string]bool{}
	for _, l := range after {
		if t := tableOf(l); !had[t] {
			if _, ok := empty[t]; !ok {
				empty[t] = true
			}
			if !strings.HasSuffix(l, " "+iptables.BuiltinPolicy) || !strings.HasPrefix(l[len(t)+1:], ":") {
				empty[t] = false
			}
		}
	}
	var out []string
	for _, l := range after {
		if !empty[tableOf(l)] {
			out = append(out, l)
		}
	}
	return out
}

// Save writes f to file as JSON.
func Save(file string, f Footprint) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}

// Load reads a footprint Save wrote.
func Load(file string) (Footprint, error) {
	var f Footprint
	b, err := os.ReadFile(file)
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("footprint %s: %w", file, err)
	}
	return f, nil
}
