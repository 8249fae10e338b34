package local

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

// containerdRunDir is where every containerd puts its shims' sockets
// (<dir>/s), whatever its own state directory; Clean removes it when the
// run made it and nothing else uses it. A variable so that tests point it
// at a directory of their own.
var containerdRunDir = "/run/containerd"

// Files of this host that containerdRunDirInUse reads; variables for the
// same reason.
var (
	selfMountinfo = "/proc/self/mountinfo"
	unixSockets   = "/proc/self/net/unix"
)

// socketDialTimeout bounds each connection attempt to a socket found
// under containerdRunDir.
const socketDialTimeout = time.Second

// containerdRunDirInUse tells why Clean must leave dir (the host's
// /run/containerd, which the run's state says the run made) alone, or ""
// when nothing but the run's dead leftovers is in it. It is asked after
// the run's processes were killed, so anything live there is someone
// else's: a system containerd started after the run (a reboot, a Docker
// install), or the private dockerd of a kind run.
func containerdRunDirInUse(dir string, st state) string {
	if st.BootID != "" && st.BootID != bootID() {
		// /run is a tmpfs: the run's directory went with the reboot.
		return "the run was made before the host last booted, so what is there now was made since, by someone else"
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err.Error()
	}
	if !fi.IsDir() {
		return fmt.Sprintf("it is not a directory (%s)", fi.Mode().Type())
	}
	mounts, err := mountinfo.ParseFile(selfMountinfo)
	if err != nil {
		return fmt.Sprintf("cannot tell what is mounted under it: %v", err)
	}
	if under := mountinfo.Under(mounts, dir); len(under) > 0 {
		return fmt.Sprintf("%d mounts are under it (first: %s)", len(under), under[0].MountPoint)
	}
	if s, err := listeningSocketUnder(dir); err != nil {
		return fmt.Sprintf("cannot tell whether its sockets are live: %v", err)
	} else if s != "" {
		return fmt.Sprintf("%s accepts connections: a process that is not the run's serves it", s)
	}
	if s, err := boundSocketUnder(dir); err != nil {
		return fmt.Sprintf("cannot tell whether its sockets are live: %v", err)
	} else if s != "" {
		return fmt.Sprintf("a process holds the socket %s", s)
	}
	if h := holderUnder(dir); h != "" {
		return h
	}
	return ""
}

// listeningSocketUnder returns the first socket under dir that accepts a
// connection. It does not cross into other file systems: the caller has
// made sure nothing is mounted under dir.
func listeningSocketUnder(dir string) (string, error) {
	var live string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.Type()&fs.ModeSocket == 0 {
			return nil
		}
		c, err := net.DialTimeout("unix", p, socketDialTimeout)
		if err != nil {
			// ECONNREFUSED: a socket file whose process is gone.
			return nil
		}
		c.Close()
		live = p
		return fs.SkipAll
	})
	return live, err
}

// boundSocketUnder returns a path under dir that a unix socket still open
// in this network namespace is bound to: some process holds it, whether
// or not it accepts connections.
func boundSocketUnder(dir string) (string, error) {
	b, err := os.ReadFile(unixSockets)
	if err != nil {
		return "", err
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > 0 {
		lines = lines[1:] // Num RefCount Protocol Flags Type St Inode Path
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		p := filepath.Clean(strings.Join(f[7:], " "))
		if strings.HasPrefix(p, "/") && mountinfo.IsUnder(p, filepath.Clean(dir)) {
			return p, nil
		}
	}
	return "", nil
}

// holderUnder names a process other than this one that has a file under
// dir open, or its working directory there; "" if none.
func holderUnder(dir string) string {
	dir = filepath.Clean(dir)
	for _, pid := range procfs.OtherPIDs() {
		base := filepath.Join("/proc", strconv.Itoa(pid))
		if cwd, err := os.Readlink(filepath.Join(base, "cwd")); err == nil && mountinfo.IsUnder(cwd, dir) {
			return fmt.Sprintf("process %d (%s) works in %s", pid, comm(pid), cwd)
		}
		fds, _ := os.ReadDir(filepath.Join(base, "fd"))
		for _, fd := range fds {
			if t, err := os.Readlink(filepath.Join(base, "fd", fd.Name())); err == nil && mountinfo.IsUnder(t, dir) {
				return fmt.Sprintf("process %d (%s) has %s open", pid, comm(pid), t)
			}
		}
	}
	return ""
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// bootID identifies this boot of the kernel; "" if unknown.
func bootID() string { return procfs.BootID() }
