package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Mount is where Linux mounts cgroups: the cgroup2 hierarchy itself on a
// unified host; a tmpfs with one directory per v1 hierarchy (and, on a
// hybrid host, cgroup2 at unified/) otherwise.
const Mount = "/sys/fs/cgroup"

// Mode is the host's cgroup layout.
type Mode string

const (
	// Unified is cgroup v2 alone, mounted at /sys/fs/cgroup.
	Unified Mode = "unified"
	// Hybrid is cgroup v1 controllers with cgroup2 at
	// /sys/fs/cgroup/unified (systemd's hybrid layout), controllers in v1.
	Hybrid Mode = "hybrid"
	// Legacy is cgroup v1 alone.
	Legacy Mode = "legacy"
)

// String is how reports name the mode.
func (m Mode) String() string {
	switch m {
	case Unified:
		return "v2 (unified)"
	case Hybrid:
		return "v1 (hybrid: cgroup2 at " + Mount + "/unified)"
	case Legacy:
		return "v1 (legacy)"
	}
	return "unknown"
}

// Filesystem type names as `stat -f -c %T` prints them.
const (
	fsCgroup2 = "cgroup2fs"
	fsCgroup1 = "cgroupfs"
	fsTmpfs   = "tmpfs"
)

// ModeFromFSTypes tells the mode from the filesystem types (as `stat -f -c
// %T` names them) of /sys/fs/cgroup and of /sys/fs/cgroup/unified ("" or
// "-" when that does not exist).
func ModeFromFSTypes(top, unified string) (Mode, error) {
	switch {
	case top == fsCgroup2:
		return Unified, nil
	case unified == fsCgroup2:
		return Hybrid, nil
	case top == fsTmpfs || top == fsCgroup1:
		return Legacy, nil
	}
	return "", fmt.Errorf("no cgroup filesystem at %s (it is %q): mount cgroup2 there (mount -t cgroup2 none %s)", Mount, top, Mount)
}

// DetectMode tells this host's cgroup mode.
func DetectMode() (Mode, error) { return detectMode(Mount) }

func detectMode(mount string) (Mode, error) {
	top, err := fsType(mount)
	if err != nil {
		return "", fmt.Errorf("cgroup mode: %w", err)
	}
	unified, _ := fsType(filepath.Join(mount, "unified"))
	return ModeFromFSTypes(top, unified)
}

func fsType(path string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "", fmt.Errorf("statfs %s: %w", path, err)
	}
	switch int64(st.Type) {
	case unix.CGROUP2_SUPER_MAGIC:
		return fsCgroup2, nil
	case unix.CGROUP_SUPER_MAGIC:
		return fsCgroup1, nil
	case unix.TMPFS_MAGIC:
		return fsTmpfs, nil
	}
	return fmt.Sprintf("0x%x", st.Type), nil
}

// Init is the host's init system: what PID 1 is.
type Init struct {
	// Systemd is set when systemd is PID 1: /run/systemd/system exists
	// (systemd's own test, sd_booted) or PID 1 is named systemd.
	Systemd bool
	// PID1 is PID 1's command name (/proc/1/comm).
	PID1 string
}

// String is how reports name the init system.
func (i Init) String() string {
	switch {
	case i.Systemd:
		return "systemd"
	case i.PID1 == "":
		return "unknown"
	}
	return "not systemd (PID 1: " + i.PID1 + ")"
}

// InitFrom tells the init system from whether /run/systemd/system exists
// and PID 1's command name.
func InitFrom(runSystemdSystem bool, pid1 string) Init {
	pid1 = strings.TrimSpace(pid1)
	return Init{Systemd: runSystemdSystem || pid1 == "systemd", PID1: pid1}
}

// DetectInit tells this host's init system.
func DetectInit() Init { return detectInit("/") }

func detectInit(root string) Init {
	comm, _ := os.ReadFile(filepath.Join(root, "proc", "1", "comm"))
	fi, err := os.Stat(filepath.Join(root, "run", "systemd", "system"))
	return InitFrom(err == nil && fi.IsDir(), string(comm))
}

// Host is what a run needs to know of a host's cgroups.
type Host struct {
	Mode Mode
	Init Init
}

// Detect tells this host's cgroup mode and init system.
func Detect() (Host, error) {
	m, err := DetectMode()
	if err != nil {
		return Host{}, err
	}
	return Host{Mode: m, Init: DetectInit()}, nil
}

// ProbeCommand is a shell command that prints what ParseProbe needs to
// tell a node's cgroup mode and init system, for nodes reached through a
// command (kind's docker exec, SSH): the filesystem types of
// /sys/fs/cgroup and /sys/fs/cgroup/unified, whether /run/systemd/system
// exists, and PID 1's name, one a line.
const ProbeCommand = `stat -f -c %T /sys/fs/cgroup; stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null || echo -; ` +
	`if [ -d /run/systemd/system ]; then echo systemd-booted; else echo -; fi; cat /proc/1/comm`

// ParseProbe reads ProbeCommand's output.
func ParseProbe(out string) (Host, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		return Host{}, errors.New("cgroup probe: want 4 lines (cgroup fs type, unified fs type, systemd-booted, PID 1), got " + fmt.Sprintf("%q", out))
	}
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	m, err := ModeFromFSTypes(lines[0], lines[1])
	if err != nil {
		return Host{}, err
	}
	return Host{Mode: m, Init: InitFrom(lines[2] == "systemd-booted", lines[3])}, nil
}
