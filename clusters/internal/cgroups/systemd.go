package cgroups

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec" // systemd-run and systemctl of this host, which owns the cgroups
	"strings"
)

// Where systemd is PID 1 it owns the cgroup v2 hierarchy: its rules for
// cgroup delegation forbid making cgroups anywhere systemd has not handed
// over, the top included, since systemd creates, moves into and prunes the
// cgroups of its units and would meet ours. A run therefore asks systemd
// for a transient scope unit with Delegate=yes and makes its cgroups inside
// it: systemd accounts the scope as one unit, never touches its subtree,
// and enables for it every controller it delegates (cpu, cpuset, io,
// memory, pids). A scope, not a service, because the run starts its
// daemons itself; a scope needs one process when it is made, which
// ScopeCommand provides.

// ScopeSlice is the slice run scopes live in, as systemd-run's own default
// for system units; naming it makes the scope's cgroup known in advance.
const ScopeSlice = "system.slice"

// ScopeUnit is the name of the scope unit for a run named name.
func ScopeUnit(name string) string { return name + ".scope" }

// ScopeCgroup is the cgroup (under Mount) systemd gives the scope unit.
func ScopeCgroup(unit string) string { return "/" + ScopeSlice + "/" + unit }

// ScopeCommand is the command that makes the transient scope unit with
// Delegate=yes and keeps it: systemd-run registers its own process as the
// scope's, then becomes `sleep infinity`. systemd stops the scope once no
// process is left anywhere in its subtree, and --collect unloads it even
// if it ended killed.
func ScopeCommand(unit, description string) []string {
	return []string{"systemd-run", "--scope", "--quiet", "--collect",
		"--unit=" + unit, "--slice=" + ScopeSlice, "--property=Delegate=yes",
		"--description=" + description, "--", "sleep", "infinity"}
}

// StopScope stops the scope unit if it is still loaded (a scope whose
// processes are all gone stops by itself), and forgets a failed one. It is
// for teardown, after Kill: what it would kill is gone.
func StopScope(ctx context.Context, unit string) error {
	out, err := exec.CommandContext(ctx, "systemctl", "stop", unit).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "not loaded") {
		return fmt.Errorf("systemctl stop %s: %v: %s", unit, err, strings.TrimSpace(string(out)))
	}
	_ = exec.CommandContext(ctx, "systemctl", "reset-failed", unit).Run()
	return nil
}

// CgroupOf is the cgroup v2 path of process pid ("/system.slice/x.scope"),
// from /proc/<pid>/cgroup.
func CgroupOf(pid int) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("/proc/%d/cgroup has no cgroup v2 line", pid)
}
