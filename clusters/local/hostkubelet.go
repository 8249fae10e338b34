package local

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/hostlock"
)

// checkHostKubelet refuses a run on a host whose own kubelet serves sock
// (deviceManagerSocket). The run's kubelets keep their device manager in
// mount namespaces of their own (mountns.go), but they share with the
// host's kubelet what every kubelet writes outside its root, whatever its
// --root-dir: container log links in /var/log/containers and, before
// 1.30, pod logs in /var/log/pods, which teardown takes back as the run's
// own (podlogs.go). A socket nobody answers on is stale and harmless; one
// served by a kubelet of a skewtest run under runRoot (a kept cluster) is
// skewtest's own.
func checkHostKubelet(sock, runRoot string) error {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return nil
	}
	c.Close()
	pids := socketOwners(sock)
	var theirs []string
	for _, pid := range pids {
		comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
		b, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if strings.TrimSpace(string(comm)) == "kubelet" && isRunKubelet(argv, runRoot) {
			continue
		}
		theirs = append(theirs, fmt.Sprintf("pid %s: %s", pid, strings.Join(argv, " ")))
	}
	if len(pids) > 0 && len(theirs) == 0 {
		return nil
	}
	owner := "a process of another mount or network namespace, not a skewtest run's kubelet"
	if len(theirs) > 0 {
		owner = "a kubelet or process this host runs (" + strings.Join(theirs, "; ") + ")"
	}
	return fmt.Errorf("%w: local provider: %s is served by %s; the run's kubelets would share its /var/log/pods and /var/log/containers, from which teardown removes what the run's kubelets wrote. "+
		"Run the local provider on a host without a kubelet of its own (a VM, a CI machine), or use PROVIDER=existing against that node",
		hostlock.ErrHostInUse, sock, owner)
}

// isRunKubelet tells whether a kubelet's command line gives it a --root-dir
// under runRoot, as every kubelet of a local run has.
func isRunKubelet(argv []string, runRoot string) bool {
	for i, a := range argv {
		v, ok := strings.CutPrefix(a, "--root-dir=")
		if !ok && a == "--root-dir" && i+1 < len(argv) {
			v, ok = argv[i+1], true
		}
		if ok && strings.HasPrefix(filepath.Clean(v), filepath.Clean(runRoot)+"/") {
			return true
		}
	}
	return false
}

// socketOwners returns the pids of the processes that hold the listening
// unix socket bound at path open: its inode from /proc/net/unix, then the
// processes with a descriptor on it.
func socketOwners(path string) []string {
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return nil
	}
	inodes := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		// Num RefCount Protocol Flags Type St Inode Path
		f := strings.Fields(l)
		if len(f) >= 8 && f[7] == path {
			inodes["socket:["+f[6]+"]"] = true
		}
	}
	var pids []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if dest, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err == nil && inodes[dest] {
				pids = append(pids, p.Name())
				break
			}
		}
	}
	return pids
}
