// Package dockerd runs a private Docker daemon for the kind provider:
// Debian's docker.io (dockerd 20.10 with the containerd it starts itself),
// with everything of it under one directory (data-root, exec-root, socket,
// pid file, logs), optionally with the capability shim as its default OCI
// runtime (see package capshim) so that `docker run --privileged` works on
// hosts whose bounding set lacks CAP_SYS_RESOURCE.
//
// Docker changes the host beyond its directories: iptables chains and
// rules (filter and nat), the FORWARD policy, bridges (docker0, br-*),
// veths, IP forwarding, cgroups, and a few directories (/run/docker,
// /run/containerd, /opt/containerd). Start records the host's state before
// dockerd runs into <Dir>/state.json; Stop, or Clean from the state file
// alone after the harness was killed, takes all of it back.
//
// Only one such daemon runs on a host at a time (bridges and iptables
// chains are host-wide): Start waits for a host-wide lock that the daemon
// holds until Stop.
package dockerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
	"sigs.k8s.io/skewtest/clusters/internal/statefile"
	"sigs.k8s.io/skewtest/clusters/internal/sysctl"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

const (
	// DockerdPath is Debian's dockerd (package docker.io).
	DockerdPath = "/usr/sbin/dockerd"
	// DockerCLI is Debian's docker client, of the daemon's version. A newer
	// client (e.g. /usr/local/bin/docker 28) negotiates the API down to the
	// daemon's 1.41 and works too.
	DockerCLI = "/usr/bin/docker"
	// RuntimeName is the name under which the shim is registered with
	// dockerd (--add-runtime) when Config.Shim is set.
	RuntimeName = "skewtest"

	lockPath  = "/run/lock/skewtest-dockerd.lock"
	stateName = "state.json"
	// maxDirLen keeps the longest socket dockerd's containerd makes in Dir
	// (exec/containerd/containerd.sock.ttrpc) within sun_path's 108 bytes.
	maxDirLen = 64
)

// hostPaths are directories outside Dir that dockerd (/run/docker/plugins)
// and its containerd (/run/containerd/s for the shims' sockets,
// /opt/containerd) create when they are missing.
var hostPaths = []string{"/run/docker", "/run/containerd", "/opt/containerd"}

// Config configures a daemon.
type Config struct {
	// Dir holds everything of this daemon: data-root, exec-root, socket,
	// pid file, logs, state. It must be absolute and at most 64 bytes long
	// (unix socket paths). Stop removes it.
	Dir string
	// Shim is the path of skewtest-runc-shim, made dockerd's default
	// runtime; empty runs plain runc (hosts that have CAP_SYS_RESOURCE).
	Shim string
	// Logger gets progress and cleanup messages; nil discards them.
	Logger *slog.Logger
}

// Daemon is a running private dockerd.
type Daemon struct {
	dir  string
	log  *slog.Logger
	st   *state
	cmd  *exec.Cmd
	done chan struct{} // closed when dockerd was reaped

	mu      sync.Mutex
	lock    *os.File
	stopped bool
}

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
}

// Start starts dockerd in cfg.Dir and waits until it answers. If Dir holds
// the state of an earlier daemon that was not stopped, that one is cleaned
// up first. When Start fails it cleans up after itself.
func Start(ctx context.Context, cfg Config) (*Daemon, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := checkDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if len(dir) > maxDirLen {
		return nil, fmt.Errorf("dockerd: Dir %s is longer than %d bytes: its unix sockets would not fit", dir, maxDirLen)
	}
	shim := cfg.Shim
	if shim != "" {
		if shim, err = filepath.Abs(shim); err != nil {
			return nil, err
		}
		if fi, err := os.Stat(shim); err != nil {
			return nil, fmt.Errorf("dockerd: shim: %w", err)
		} else if fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("dockerd: shim %s is not executable", shim)
		}
	}
	if !Installed() {
		return nil, fmt.Errorf("dockerd: %s, %s or its containerd/runc missing: install Debian's docker.io (Install)", DockerdPath, DockerCLI)
	}
	lock, err := acquireLock(ctx, log)
	if err != nil {
		return nil, err
	}
	d := &Daemon{dir: dir, log: log, lock: lock}
	if _, err := os.Stat(filepath.Join(dir, stateName)); err == nil {
		log.Warn("cleaning up an earlier daemon that was not stopped", "dir", dir)
		if err := clean(ctx, dir, log); err != nil {
			lock.Close()
			return nil, fmt.Errorf("dockerd: clean up the earlier daemon in %s: %w", dir, err)
		}
	}
	running.Store(dir, d)
	if err := d.start(ctx, shim); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		defer cancel()
		if cerr := d.Stop(cctx); cerr != nil {
			err = fmt.Errorf("%w; cleaning up: %v (run Clean(%q))", err, cerr, dir)
		}
		d.releaseLock()
		return nil, err
	}
	return d, nil
}

func (d *Daemon) start(ctx context.Context, shim string) error {
	dir := d.dir
	d.st = &state{Dir: dir, CgroupParent: cgroupParentFor(dir)}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("dockerd: %w", err)
	}
	// Written before recording, so that Clean finds the directory's
	// processes and cgroups even if recording fails half-way.
	if err := writeState(dir, d.st); err != nil {
		return err
	}
	if err := record(ctx, d.st); err != nil {
		return fmt.Errorf("dockerd: record the host's state: %w", err)
	}
	if err := writeState(dir, d.st); err != nil {
		return err
	}
	// A config file of its own, so that a host's /etc/docker/daemon.json
	// does not apply. Without deprecated-key-path (a config file key only)
	// dockerd 20.10 writes /etc/docker/key.json.
	conf, err := json.Marshal(map[string]string{"deprecated-key-path": filepath.Join(dir, "key.json")})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), append(conf, '\n'), 0o644); err != nil {
		return fmt.Errorf("dockerd: %w", err)
	}
	args := []string{
		"--config-file", filepath.Join(dir, "daemon.json"),
		"-H", d.Host(),
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "dockerd.pid"),
		// Containers' cgroups in a tree of this daemon's, removed by Stop.
		"--cgroup-parent", d.st.CgroupParent,
	}
	if shim != "" {
		args = append(args, "--add-runtime", RuntimeName+"="+shim, "--default-runtime", RuntimeName)
	}
	logPath := filepath.Join(dir, "dockerd.log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("dockerd: %w", err)
	}
	defer lf.Close()
	// Not tied to ctx: the daemon outlives Start and is stopped by Stop.
	cmd := exec.Command(DockerdPath, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = withSbinPath(os.Environ())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d.log.Info("starting dockerd", "dir", dir, "shim", shim)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("dockerd: start %s: %w", DockerdPath, err)
	}
	d.cmd = cmd
	d.done = make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(d.done)
	}()
	d.st.DockerdPID = cmd.Process.Pid
	if p, ok := readProc(cmd.Process.Pid); ok {
		d.st.DockerdStart = p.start
	}
	if err := writeState(dir, d.st); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	for {
		if ping(ctx, d.socket()) {
			d.log.Info("dockerd is up", "dir", dir, "after", time.Since(t0).Round(time.Millisecond))
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("dockerd exited during start (%v); end of %s:\n%s", waitErr, logPath, tail(logPath, 30))
		case <-ctx.Done():
			return fmt.Errorf("dockerd did not answer on %s within %s: %w; end of %s:\n%s", d.socket(), time.Since(t0).Round(time.Second), ctx.Err(), logPath, tail(logPath, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Dir returns the daemon's directory.
func (d *Daemon) Dir() string { return d.dir }

func (d *Daemon) socket() string { return filepath.Join(d.dir, "docker.sock") }

// Host returns the daemon's address for DOCKER_HOST: unix://<Dir>/docker.sock.
func (d *Daemon) Host() string { return "unix://" + d.socket() }

// Env returns the environment entries that point docker clients at the
// daemon: DOCKER_HOST.
func (d *Daemon) Env() []string { return []string{"DOCKER_HOST=" + d.Host()} }

// Stop removes all containers and networks, stops dockerd, its containerd
// and the containerd shims, unmounts everything under Dir, removes the
// daemon's cgroups, takes back docker's iptables chains and rules, FORWARD
// policy, IP forwarding, bridges and host directories, and removes Dir.
// It is idempotent; on error it can be called again, or Clean(Dir) later.
func (d *Daemon) Stop(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return nil
	}
	st := d.st
	if st == nil { // failed before anything was recorded
		st = &state{Dir: d.dir, CgroupParent: cgroupParentFor(d.dir)}
	}
	t := &teardown{dir: d.dir, st: st, log: d.log, child: d.cmd, childDone: d.done}
	if err := t.run(ctx); err != nil {
		return err
	}
	d.stopped = true
	d.releaseLock()
	return nil
}

func (d *Daemon) releaseLock() {
	if d.lock != nil {
		d.lock.Close()
		d.lock = nil
	}
	running.Delete(d.dir)
}

// running maps the Dir of each Daemon this process started to it. The
// host-wide lock is a flock held by this process's open file: if Clean
// were called here for a daemon this process still holds (a kept cluster
// cleaned by the same process), only that Daemon can release it.
var running sync.Map

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

// checkDir cleans dir and refuses what cannot be a daemon's directory.
func checkDir(dir string) (string, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return "", fmt.Errorf("dockerd: Dir %q must be an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	if strings.Count(dir, "/") < 2 && len(dir) < 8 { // "/", "/tmp", "/run"...
		return "", fmt.Errorf("dockerd: Dir %q is too close to /", dir)
	}
	return dir, nil
}

// cgroupParentFor returns the cgroup under which dir's daemon puts its
// containers: one of its own, so that Stop finds their processes and
// removes the cgroups.
func cgroupParentFor(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "/skewtest-dockerd-" + hex.EncodeToString(sum[:6])
}

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
	st.Recorded = true
	return nil
}

// acquireLock takes the host-wide lock, waiting while another process
// holds it, until ctx ends.
func acquireLock(ctx context.Context, log *slog.Logger) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dockerd: %w", err)
	}
	logged := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("dockerd: lock %s: %w", lockPath, err)
		}
		if !logged {
			holder, _ := os.ReadFile(lockPath)
			log.Info("waiting for another skewtest dockerd to stop", "lock", lockPath, "holder", strings.TrimSpace(string(holder)))
			logged = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("dockerd: another skewtest dockerd holds %s: %w", lockPath, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
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
	if err := removeCgroups(t.st.CgroupParent); err != nil {
		errs = append(errs, err)
	}
	if t.st.Recorded {
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

// cgroupRoots returns <hierarchy>/<parent> for every cgroup hierarchy
// mounted in this mount namespace (one per v1 controller, and v2).
func cgroupRoots(parent string) []string {
	if parent == "" || parent == "/" {
		return nil
	}
	hs, err := cgroups.Mounted("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	roots := make([]string, 0, len(hs))
	for _, h := range hs {
		roots = append(roots, filepath.Join(h.MountPoint, parent))
	}
	return roots
}

// cgroupDirs returns the cgroups at and below root, deepest first.
func cgroupDirs(root string) []string {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.SliceStable(dirs, func(i, j int) bool {
		return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/")
	})
	return dirs
}

// cgroupProcs returns the pids in the daemon's cgroups.
func cgroupProcs(parent string) []int {
	var pids []int
	for _, root := range cgroupRoots(parent) {
		for _, d := range cgroupDirs(root) {
			b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
		}
	}
	return pids
}

// removeCgroups removes the daemon's cgroup trees.
func removeCgroups(parent string) error {
	var left []string
	for _, root := range cgroupRoots(parent) {
		for try := 0; ; try++ {
			left = left[:0:0]
			for _, d := range cgroupDirs(root) {
				if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
					left = append(left, d)
				}
			}
			if len(left) == 0 || try == 20 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(left) > 0 {
			return fmt.Errorf("cannot remove cgroups %s", strings.Join(left, ", "))
		}
	}
	return nil
}

// restoreSysctls writes back the kernel settings that differ from before
// dockerd (and the kind nodes it ran) changed them.
func (t *teardown) restoreSysctls() error {
	saved := t.st.Sysctls
	if len(saved) == 0 && t.st.IPForward != "" {
		saved = map[string]string{"net.ipv4.ip_forward": t.st.IPForward}
	}
	changed, err := sysctl.Restore(saved)
	for _, c := range changed {
		t.log.Info("kernel setting restored", "change", c)
	}
	return err
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
	for _, p := range hostPaths {
		existed, known := t.st.HostPaths[p]
		if !known || existed {
			continue
		}
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			continue
		}
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

// httpClient talks to the daemon's API over its unix socket.
func httpClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

func apiDo(ctx context.Context, sock, method, path string, timeout time.Duration, out any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, nil)
	if err != nil {
		return err
	}
	c := httpClient(sock)
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}

// ping reports whether the daemon answers GET /_ping.
func ping(ctx context.Context, sock string) bool {
	if _, err := os.Stat(sock); err != nil {
		return false
	}
	return apiDo(ctx, sock, http.MethodGet, "/_ping", 2*time.Second, nil) == nil
}

// removeAll removes all containers (docker rm -f -v) and the networks
// that are not docker's own, so that dockerd tears down their bridges,
// rules and mounts itself.
func removeAll(ctx context.Context, sock string, log *slog.Logger) error {
	var errs []error
	var containers []struct {
		ID    string   `json:"Id"`
		Names []string `json:"Names"`
	}
	if err := apiDo(ctx, sock, http.MethodGet, "/containers/json?all=1", 30*time.Second, &containers); err != nil {
		return err
	}
	for _, c := range containers {
		log.Info("removing container", "id", c.ID[:min(12, len(c.ID))], "names", c.Names)
		if err := apiDo(ctx, sock, http.MethodDelete, "/containers/"+url.PathEscape(c.ID)+"?force=1&v=1", 2*time.Minute, nil); err != nil {
			errs = append(errs, err)
		}
	}
	var networks []struct {
		ID   string `json:"Id"`
		Name string `json:"Name"`
	}
	if err := apiDo(ctx, sock, http.MethodGet, "/networks", 30*time.Second, &networks); err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, n := range networks {
		switch n.Name {
		case "bridge", "host", "none":
			continue
		}
		log.Info("removing network", "name", n.Name)
		if err := apiDo(ctx, sock, http.MethodDelete, "/networks/"+url.PathEscape(n.ID), time.Minute, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Installed reports whether Debian's docker.io (dockerd, the docker CLI,
// containerd and runc) is installed.
func Installed() bool {
	for _, p := range []string{DockerdPath, DockerCLI, "/usr/bin/containerd", "/usr/bin/containerd-shim-runc-v2", "/usr/sbin/runc"} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// Install installs Debian's docker.io with apt-get unless it is installed.
// Its package scripts try to start the service; without systemd nothing
// starts.
func Install(ctx context.Context) error {
	if Installed() {
		return nil
	}
	install := func() error {
		cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "--no-install-recommends", "docker.io")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get install docker.io: %w\n%s", err, tailText(string(out), 20))
		}
		return nil
	}
	if err := install(); err != nil {
		if out, uerr := exec.CommandContext(ctx, "apt-get", "update").CombinedOutput(); uerr != nil {
			return fmt.Errorf("%w; apt-get update: %v\n%s", err, uerr, tailText(string(out), 20))
		}
		if err := install(); err != nil {
			return err
		}
	}
	if !Installed() {
		return fmt.Errorf("docker.io installed but %s, %s, containerd or runc still missing", DockerdPath, DockerCLI)
	}
	return nil
}

// withSbinPath makes sure PATH has the sbin directories, where dockerd
// finds iptables, and the bin ones, where it finds containerd.
func withSbinPath(env []string) []string {
	const want = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	out := make([]string, 0, len(env)+1)
	found := false
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			found = true
			e = "PATH=" + v + ":" + want
		}
		out = append(out, e)
	}
	if !found {
		out = append(out, "PATH="+want)
	}
	return out
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tailText(string(b), n)
}

func tailText(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

func joinErrs(errs []error) error { return errors.Join(errs...) }
