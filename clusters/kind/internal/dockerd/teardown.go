package dockerd

// This file tears a daemon down (for Stop, or for Clean from its state
// file alone) and restores what it changed on the host.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec" // this host's ip tool and the daemon's own processes, during its teardown
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/sysctl"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

// Clean does what Stop does for the daemon whose directory is dir, from
// its state file alone: for a harness that was killed. A missing dir is not
// an error. Without a state file (Start failed before writing it), host
// changes cannot be told apart and only the directory's processes, mounts
// and cgroups are cleaned.
func Clean(ctx context.Context, dir string) error {
	return clean(ctx, dir, slog.Default())
}

func clean(ctx context.Context, dir string, log *slog.Logger) error {
	dir, err := checkDir(dir)
	if err != nil {
		return err
	}
	if ours, err := cleanRunning(ctx, dir); ours {
		return err
	}
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	st, err := readState(dir)
	var damaged error
	switch {
	case errors.Is(err, os.ErrNotExist):
		log.Warn("no dockerd state file: iptables, links and host directories are left as they are", "dir", dir)
		st = &state{Dir: dir, CgroupParent: cgroupParentFor(dir)}
	case err != nil:
		// What was recorded of the host is lost: clean what can be told
		// apart without it (the processes whose command lines name dir,
		// the cgroups named after it, the mounts under it), restore
		// nothing host-wide, and keep dir.
		damaged = err
		log.Warn("the dockerd state file cannot be read: cleaning only the processes, mounts and cgroups of the directory, and keeping it", "dir", dir, "err", err)
		st = &state{Dir: dir, CgroupParent: cgroupParentFor(dir)}
	}
	if st.CgroupParent == "" {
		st.CgroupParent = cgroupParentFor(dir)
	}
	err = (&teardown{dir: dir, st: st, log: log, keep: damaged != nil}).run(ctx)
	if damaged != nil {
		return errors.Join(fmt.Errorf("dockerd: clean %s without its state: %w; iptables, links, kernel settings and host directories were not restored; the directory is kept: look at it, then remove it by hand", dir, damaged), err)
	}
	return err
}

// cleanRunning stops the Daemon of dir if this process started it.
func cleanRunning(ctx context.Context, dir string) (bool, error) {
	v, ok := running.Load(dir)
	if !ok {
		return false, nil
	}
	return true, v.(*Daemon).Stop(ctx)
}

// teardown undoes a daemon.
type teardown struct {
	dir       string
	st        *state
	log       *slog.Logger
	child     *exec.Cmd     // dockerd when this process started it
	childDone chan struct{} // closed when child was reaped
	sockets   []string      // shim sockets in /run/containerd of killed shims
	// keep keeps dir whatever happens: its state could not be read.
	keep bool
	// seed, when set, is where to keep the daemon's images once it has
	// stopped (Daemon.KeepSeed).
	seed string
}

func (t *teardown) run(ctx context.Context) error {
	var errs []error
	sock := filepath.Join(t.dir, "docker.sock")
	if ping(ctx, sock) {
		if err := removeAll(ctx, sock, t.log); err != nil {
			// Not fatal: killing the processes below does the same.
			t.log.Warn("removing containers and networks through the API failed", "err", err)
		}
	}
	if err := t.stopDockerd(); err != nil {
		errs = append(errs, err)
	}
	survivors := t.killLeftovers()
	if len(survivors) > 0 {
		errs = append(errs, fmt.Errorf("processes of %s survived SIGKILL: %v", t.dir, survivors))
	}
	mountsLeft := mountinfo.UnmountUnder(t.dir)
	if mountsLeft != nil {
		errs = append(errs, mountsLeft)
	}
	if t.seed != "" && len(errs) == 0 {
		// dockerd has stopped and its data-root is no mount of its own
		// any more: its images' files can be hard-linked from it.
		keepSeed(ctx, t.log, dataRootOf(t.dir), t.seed)
	}
	rebooted := t.st.rebooted()
	if rebooted {
		t.log.Warn("the host rebooted since the daemon started: its iptables chains, links, kernel settings and cgroups went with that boot; what is there now is left alone, only its files are removed", "dir", t.dir, "bootID", t.st.BootID)
	} else if err := removeCgroups(t.st.CgroupParent); err != nil {
		errs = append(errs, err)
	}
	if t.st.Recorded && rebooted {
		// The host directories the daemon made may hold what a Docker
		// started since keeps there: named, not removed.
		if made := t.madeHostPaths(); len(made) > 0 {
			t.log.Warn("host directories the daemon made are left: whoever runs since the reboot may use them", "paths", made)
		}
	} else if t.st.Recorded {
		if err := t.restoreIptables(ctx, t.st.Iptables); err != nil {
			errs = append(errs, err)
		}
		if err := t.restoreSysctls(); err != nil {
			errs = append(errs, err)
		}
		if err := t.deleteLinks(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := t.removeHostPaths(); err != nil {
			errs = append(errs, err)
		}
	}
	// Never remove the directory while something may still be mounted in
	// it or use it, nor, after any step failed, the state that Stop or
	// Clean needs to finish the job.
	switch {
	case t.keep:
	case len(errs) == 0:
		if err := os.RemoveAll(t.dir); err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, fmt.Errorf("kept %s and its state for Stop or Clean to finish", t.dir))
	}
	if err := joinErrs(errs); err != nil {
		return fmt.Errorf("dockerd: stop %s: %w", t.dir, err)
	}
	if t.keep {
		t.log.Info("dockerd's processes, mounts and cgroups cleaned; directory kept", "dir", t.dir)
		return nil
	}
	t.log.Info("dockerd stopped and cleaned up", "dir", t.dir)
	return nil
}

// stopDockerd stops dockerd with SIGTERM (it then stops its containerd),
// SIGKILL after 30 s, and then whatever it had started that is still
// running (containerd, docker-proxy).
func (t *teardown) stopDockerd() error {
	var d proc
	found := false
	if t.child != nil {
		d, found = readProc(t.child.Process.Pid)
	} else if t.st.DockerdPID > 0 {
		d, found = readProc(t.st.DockerdPID)
		found = found && d.start == t.st.DockerdStart
	} else {
		// No pid recorded (no state, or one that cannot be read): the
		// dockerd whose command line names dir, so that it too gets
		// its SIGTERM grace to stop its containers.
		d, found = dockerdOf(t.dir)
	}
	if !found || !alive(d) || !ownedBy(d, t.dir) {
		// Gone, or the pid now belongs to someone else: leftovers are
		// found by their command lines below.
		t.waitChild()
		return nil
	}
	children := withDescendants(allProcs(), map[int]bool{d.pid: true})
	t.log.Info("stopping dockerd", "pid", d.pid)
	if left := signalAndWait([]proc{d}, syscall.SIGTERM, 30*time.Second); len(left) > 0 {
		t.log.Warn("dockerd did not exit on SIGTERM within 30s; killing it", "pid", d.pid)
		if left := signalAndWait(left, syscall.SIGKILL, 10*time.Second); len(left) > 0 {
			return fmt.Errorf("dockerd %v survived SIGKILL", left)
		}
	}
	t.waitChild()
	if left := stopProcs(children, 10*time.Second); len(left) > 0 {
		return fmt.Errorf("children of dockerd survived SIGKILL: %v", left)
	}
	return nil
}

// waitChild waits a little for the reaper goroutine of a child dockerd.
func (t *teardown) waitChild() {
	if t.childDone == nil {
		return
	}
	select {
	case <-t.childDone:
	case <-time.After(5 * time.Second):
	}
}

// killLeftovers stops every process that is one of daemonPrograms started
// for dir, every process in the daemon's cgroups (the containers'), and
// their descendants. It returns those that survived.
func (t *teardown) killLeftovers() []proc {
	var left []proc
	for round := 0; round < 3; round++ {
		procs := allProcs()
		roots := map[int]bool{}
		for _, p := range procs {
			if ownedBy(p, t.dir) {
				roots[p.pid] = true
			}
		}
		for _, pid := range cgroupProcs(t.st.CgroupParent) {
			roots[pid] = true
		}
		targets := withDescendants(procs, roots)
		if len(targets) == 0 {
			return nil
		}
		for _, p := range targets {
			t.log.Info("stopping leftover process", "proc", p.String())
			for _, s := range socketPaths(socketInodes(p.pid)) {
				if strings.HasPrefix(s, "/run/containerd/s/") {
					t.sockets = append(t.sockets, s)
				}
			}
		}
		left = stopProcs(targets, 5*time.Second)
	}
	return left
}

// restoreSysctls writes back the kernel settings that differ from before
// dockerd (and the kind nodes it ran) changed them.
func (t *teardown) restoreSysctls() error {
	saved := t.st.Sysctls
	if len(saved) == 0 && t.st.IPForward != "" {
		saved = map[string]string{"net.ipv4.ip_forward": t.st.IPForward}
	}
	return sysctl.RestoreLogged(saved, t.log)
}

// link is one entry of `ip -j link show`.
type link struct {
	Name   string `json:"ifname"`
	Master string `json:"master"`
}

func links(ctx context.Context) ([]link, error) {
	out, err := exec.CommandContext(ctx, "ip", "-j", "link", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip -j link show: %w%s", err, stderrOf(err))
	}
	var ls []link
	if err := json.Unmarshal(out, &ls); err != nil {
		return nil, fmt.Errorf("ip -j link show: %w", err)
	}
	return ls, nil
}

// deleteLinks deletes the bridges docker created (docker0, br-*) that were
// not there before, and veths still enslaved to them.
func (t *teardown) deleteLinks(ctx context.Context) error {
	ls, err := links(ctx)
	if err != nil {
		return err
	}
	had := map[string]bool{}
	for _, n := range t.st.Links {
		had[n] = true
	}
	bridges := newBridges(ls, had)
	var veths, brs []string
	for _, l := range ls {
		switch {
		case bridges[l.Name]:
			brs = append(brs, l.Name)
		case !had[l.Name] && bridges[l.Master]:
			veths = append(veths, l.Name)
		}
	}
	var errs []error
	for _, n := range append(veths, brs...) {
		t.log.Info("deleting link", "name", n)
		if out, err := exec.CommandContext(ctx, "ip", "link", "delete", n).CombinedOutput(); err != nil &&
			!strings.Contains(string(out), "Cannot find device") {
			errs = append(errs, fmt.Errorf("ip link delete %s: %w: %s", n, err, strings.TrimSpace(string(out))))
		}
	}
	return joinErrs(errs)
}

// newBridges returns docker's bridges (docker0, br-*) among ls that are
// not in had.
func newBridges(ls []link, had map[string]bool) map[string]bool {
	bridges := map[string]bool{}
	for _, l := range ls {
		if !had[l.Name] && isDockerInterface(l.Name) {
			bridges[l.Name] = true
		}
	}
	return bridges
}

// newBridges returns docker's bridges that were not there before.
func (t *teardown) newBridges(ctx context.Context) (map[string]bool, error) {
	ls, err := links(ctx)
	if err != nil {
		return nil, err
	}
	had := map[string]bool{}
	for _, n := range t.st.Links {
		had[n] = true
	}
	return newBridges(ls, had), nil
}

// madeHostPaths are the hostPaths that did not exist before the daemon and
// exist now.
func (t *teardown) madeHostPaths() []string {
	var made []string
	for _, p := range hostPaths {
		if existed, known := t.st.HostPaths[p]; !known || existed {
			continue
		}
		if _, err := os.Lstat(p); err == nil {
			made = append(made, p)
		}
	}
	return made
}

// removeHostPaths removes the sockets of killed shims and those of
// hostPaths that did not exist before, if they hold nothing but empty
// directories.
func (t *teardown) removeHostPaths() error {
	for _, s := range t.sockets {
		if fi, err := os.Lstat(s); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(s)
		}
	}
	var errs []error
	for _, p := range t.madeHostPaths() {
		var dirs []string
		_ = filepath.WalkDir(p, func(q string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, q)
			}
			return nil
		})
		sort.SliceStable(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
		for _, d := range dirs {
			_ = os.Remove(d) // fails on a non-empty directory, as it should
		}
		if _, err := os.Lstat(p); err == nil {
			errs = append(errs, fmt.Errorf("%s did not exist before dockerd and is not empty now; left as is", p))
		}
	}
	return joinErrs(errs)
}
