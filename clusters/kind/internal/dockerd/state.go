package dockerd

// This file keeps a daemon's state file, <Dir>/state.json: what Start
// records of the host before dockerd runs, written and read back.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/clusters/internal/statefile"
	"sigs.k8s.io/skewtest/clusters/internal/sysctl"
)

// state is what Start records in <Dir>/state.json.
type state struct {
	Dir          string `json:"dir"`
	CgroupParent string `json:"cgroupParent"`
	// Recorded is true once the host's state below was recorded: Clean
	// restores iptables, links and host paths only then.
	Recorded bool `json:"recorded"`
	// Iptables holds the output of iptables-save and ip6tables-save before
	// dockerd started.
	Iptables map[string]string `json:"iptables,omitempty"`
	// Links are the network interfaces before dockerd started.
	Links []string `json:"links,omitempty"`
	// HostPaths tells which of hostPaths existed before.
	HostPaths map[string]bool `json:"hostPaths,omitempty"`
	// Sysctls are the kernel settings (sysctl.Keys) before: dockerd turns
	// IP forwarding on (and the FORWARD policy to DROP) and bridge netfilter
	// on, and the privileged kind nodes' kubelets and kube-proxies change
	// the host's kernel.*, vm.* and conntrack settings.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// IPForward is net.ipv4.ip_forward before, in state files written
	// before Sysctls.
	IPForward    string `json:"ipForward,omitempty"`
	DockerdPID   int    `json:"dockerdPID,omitempty"`
	DockerdStart uint64 `json:"dockerdStart,omitempty"`
	// BootID is the kernel's boot when the host's state was recorded:
	// after a reboot, what the run changed in the kernel (iptables, links,
	// settings, cgroups) went with that boot, and nothing is written back
	// over what is there now. Empty in older state files.
	BootID string `json:"bootID,omitempty"`
}

// rebooted reports whether the host booted again since st was recorded.
func (st *state) rebooted() bool { return st.BootID != "" && st.BootID != procfs.BootID() }

// writeState replaces dir's state file in one rename, after fsync
// (statefile), so that a kill or a power loss leaves the old state or the
// new, never half of one.
func writeState(dir string, st *state) error {
	if err := statefile.Write(dir, stateName, st, 0o644); err != nil {
		return fmt.Errorf("dockerd: %w", err)
	}
	return nil
}

// readState reads dir's state file. A missing file's error satisfies
// errors.Is(err, os.ErrNotExist).
func readState(dir string) (*state, error) {
	var st state
	if err := statefile.Read(dir, stateName, &st); err != nil {
		return nil, fmt.Errorf("dockerd: %w", err)
	}
	return &st, nil
}

// CheckState tells whether dir holds the state of a private dockerd that
// Start made there: nil when its state file parses and names dir. An
// error satisfying errors.Is(err, os.ErrNotExist) when there is none;
// ErrDamagedState when there is one that does not parse (Clean then
// cleans what it can find without it and keeps dir).
func CheckState(dir string) error {
	dir, err := checkDir(dir)
	if err != nil {
		return err
	}
	st, err := readState(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return err
	case err != nil:
		return fmt.Errorf("%w: %w", ErrDamagedState, err)
	case filepath.Clean(st.Dir) != dir:
		return fmt.Errorf("dockerd: %s is the state of a daemon in %q, not of one in %s", filepath.Join(dir, stateName), st.Dir, dir)
	}
	return nil
}

// ErrDamagedState is a daemon's state file that is there but cannot be
// read.
var ErrDamagedState = errors.New("dockerd: damaged state")

// record fills in the host's state before dockerd starts.
func record(ctx context.Context, st *state) error {
	var err error
	if st.Iptables, err = saveIptables(ctx); err != nil {
		return err
	}
	if st.Links, err = linkNames(ctx); err != nil {
		return err
	}
	st.HostPaths = map[string]bool{}
	for _, p := range hostPaths {
		_, err := os.Lstat(p)
		st.HostPaths[p] = err == nil
	}
	st.Sysctls = sysctl.Read(sysctl.Keys)
	st.BootID = procfs.BootID()
	st.Recorded = true
	return nil
}

func linkNames(ctx context.Context) ([]string, error) {
	ls, err := links(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Name
	}
	return names, nil
}
