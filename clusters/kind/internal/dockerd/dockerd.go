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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec" // dockerd, a daemon in its own process group that outlives the call
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/internal/lines"
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

	// lockPath lets one private dockerd run at a time, beside the host
	// lock in root's own directory.
	lockPath  = hostlock.RootDir + "/dockerd.lock"
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
	// Seed, when set and there, is a directory SaveSeed wrote: the
	// daemon's data-root starts as a copy of it (its images' files hard
	// links), so that images are not imported again. It must be on Dir's
	// file system; when it cannot be planted the daemon starts empty.
	Seed string
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
	// keepSeed is where Stop keeps the daemon's images (KeepSeed).
	keepSeed string
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
	if err := d.start(ctx, shim, cfg.Seed); err != nil {
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

func (d *Daemon) start(ctx context.Context, shim, seed string) error {
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
	dataRoot := dataRootOf(dir)
	if seed != "" {
		d.plant(ctx, seed, dataRoot)
	}
	args := []string{
		"--config-file", filepath.Join(dir, "daemon.json"),
		"-H", d.Host(),
		"--data-root", dataRoot,
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

// dataRootOf is the data-root of the daemon whose directory is dir.
func dataRootOf(dir string) string { return filepath.Join(dir, "data") }

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
	t := &teardown{dir: d.dir, st: st, log: d.log, child: d.cmd, childDone: d.done, seed: d.keepSeed}
	if err := t.run(ctx); err != nil {
		return err
	}
	d.stopped = true
	d.releaseLock()
	return nil
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
	return lines.Last(string(b), n)
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

func joinErrs(errs []error) error { return errors.Join(errs...) }
