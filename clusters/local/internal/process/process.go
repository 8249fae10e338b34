// Package process runs the long-lived daemons of a local cluster (etcd, the
// control plane, containerd, the kubelet) as children of the harness, each
// with its own log file and a pid file so a later `skewtest clean` can find
// them after the harness itself was killed.
package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec" // the cluster's daemons, each in its own process group, outliving the call
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
	"sigs.k8s.io/skewtest/clusters/internal/procfs"
)

// startMarker begins the line Start writes into a log before each start.
const startMarker = "==== skewtest:"

// Process is one started daemon.
type Process struct {
	Name    string
	LogFile string
	PIDFile string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// Start runs argv with output appended to logFile and writes pidFile. The
// process gets its own process group so that stopping it stops its
// children too, and it is not tied to ctx: daemons outlive the call that
// started them and are stopped with Stop.
func Start(name, logFile, pidFile string, argv []string, env []string) (*Process, error) {
	return StartIn("", name, logFile, pidFile, argv, env)
}

// StartIn is Start with the process made in the cgroup v2 directory
// cgroupDir (clone3's CLONE_INTO_CGROUP, Linux 5.7+), so that it and
// everything it forks live there from their first instruction; on an older
// kernel it is moved there at once. "" starts it in the caller's cgroup.
func StartIn(cgroupDir, name, logFile, pidFile string, argv []string, env []string) (*Process, error) {
	for _, f := range []string{logFile, pidFile} {
		if f == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, err
		}
	}
	lf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log for %s: %w", name, err)
	}
	fmt.Fprintf(lf, startMarker+" %s starting at %s: %s\n", name, time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	if pidFile != "" {
		// The shell that becomes the daemon records it first (see
		// recordThenExec); a missing binary is still an error of Start.
		if _, err := exec.LookPath(argv[0]); err != nil {
			lf.Close()
			return nil, fmt.Errorf("start %s (%s): %w", name, argv[0], err)
		}
		argv = append([]string{"/bin/sh", "-c", recordThenExec, pidFile}, argv...)
	}
	cmd, err := startIn(cgroupDir, func() *exec.Cmd {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = lf, lf
		cmd.Env = append(os.Environ(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	})
	if err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, argv[0], err)
	}
	p := &Process{Name: name, LogFile: logFile, PIDFile: pidFile, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		lf.Close()
		close(p.done)
	}()
	if pidFile != "" {
		// Without its pid file a killed harness could not clean it up.
		// The process wrote its pid there before it became the daemon;
		// once it has, add its start time and the boot's ID, so that
		// KillPIDFile never kills a process that got the pid after a
		// reboot or a wrap-around.
		if err := p.waitRecorded(); err != nil {
			_ = p.Stop(time.Second)
			return nil, fmt.Errorf("record pid of %s: %w", name, err)
		}
		rec := strconv.Itoa(cmd.Process.Pid)
		if st, err := procfs.ReadStat(cmd.Process.Pid); err == nil {
			rec += " " + strconv.FormatUint(st.StartTime, 10) + " " + bootID()
		}
		if err := os.WriteFile(pidFile, []byte(rec+"\n"), 0o644); err != nil {
			_ = p.Stop(time.Second)
			return nil, fmt.Errorf("record pid of %s: %w", name, err)
		}
	}
	return p, nil
}

// recordThenExec is how a daemon with a pid file starts: the shell that
// becomes it writes its pid ($$, which exec keeps) into the pid file ($0)
// and only then execs the daemon in its place. A harness killed at any
// instant of a start therefore leaves no daemon without its pid file for
// `skewtest clean`; and a shell whose pid file cannot be written, because
// clean already removed the run directory, exits instead of starting it.
const recordThenExec = `echo $$ > "$0" || exit 125; exec "$@"`

// recordWait bounds how long Start waits for the started shell to write
// its pid file, a few milliseconds on an idle host.
const recordWait = 10 * time.Second

// waitRecorded waits until the process has written its pid into its pid
// file (recordThenExec), or has exited without doing so.
func (p *Process) waitRecorded() error {
	want := strconv.Itoa(p.PID())
	deadline := time.Now().Add(recordWait)
	for {
		if b, err := os.ReadFile(p.PIDFile); err == nil && strings.TrimSpace(string(b)) == want {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("it exited before writing %s: %v; %s", p.PIDFile, p.err, TailFile(p.LogFile, 5))
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not hold pid %s after %s", p.PIDFile, want, recordWait)
		}
	}
}

// PID of the process.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited, and its error.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Done is closed when the process exits.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM to the process group, waits up to grace, then
// SIGKILLs it. It returns once the process is gone.
func (p *Process) Stop(grace time.Duration) error {
	if exited, _ := p.Exited(); exited {
		p.removePIDFile()
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, p.cmd.Process.Pid)
		}
	}
	p.removePIDFile()
	return nil
}

// Kill SIGKILLs the process group at once, as a crash or the OOM killer
// would, and returns once the process is gone.
func (p *Process) Kill() error {
	if exited, _ := p.Exited(); !exited {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, p.cmd.Process.Pid)
		}
	}
	p.removePIDFile()
	return nil
}

func (p *Process) removePIDFile() {
	if p.PIDFile != "" {
		os.Remove(p.PIDFile)
	}
}

// WaitReady polls ready every interval until it returns nil, the process
// exits, or ctx ends; either error carries the tail of the process's log,
// which says why far more often than the last check does.
func (p *Process) WaitReady(ctx context.Context, interval time.Duration, ready func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		// A check cut short by ctx's own end says nothing of the
		// process; the one before it does.
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready (%v); last log lines from %s:\n%s", p.Name, p.err, p.LogFile, TailFile(p.LogFile, tailLines))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last check: %v); last log lines from %s:\n%s", p.Name, ctx.Err(), last, p.LogFile, TailFile(p.LogFile, tailLines))
		case <-t.C:
		}
	}
}

// tailLines is how much of a process's log an error quotes.
const tailLines = 15

// TailFile returns the last n lines of a file, for error messages,
// without the "==== skewtest:" lines Start writes (the command line is in
// the file for whoever needs it).
func TailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.HasPrefix(l, startMarker) {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// KillPIDFile kills (SIGKILL) the process group recorded in pidFile, if it
// is still the process Start started, and removes the file. For cleanup
// after a harness that died without stopping its children. A pid whose
// start time or boot differs from the recorded ones belongs to someone
// else now (the host rebooted, or pids wrapped around) and is left alone;
// a file without them (written before they were recorded) is trusted only
// if it was written since this boot.
func KillPIDFile(pidFile string) error {
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	f := strings.Fields(string(b))
	pid := 0
	if len(f) > 0 {
		pid, _ = strconv.Atoi(f[0])
	}
	if pid <= 1 || !sameProcess(pidFile, pid, f[1:]) {
		os.Remove(pidFile)
		return nil
	}
	if err := KillAndWait(pid, 10*time.Second); err != nil {
		return err
	}
	return os.Remove(pidFile)
}

// sameProcess tells whether pid is still the process a pid file with the
// given fields after the pid (start time, boot ID) describes.
func sameProcess(pidFile string, pid int, rec []string) bool {
	if len(rec) >= 2 {
		st, err := procfs.ReadStat(pid)
		return err == nil && strconv.FormatUint(st.StartTime, 10) == rec[0] && rec[1] == bootID()
	}
	fi, err := os.Stat(pidFile)
	boot, berr := bootTime()
	return err == nil && berr == nil && !fi.ModTime().Before(boot)
}

// bootID identifies this boot of the kernel.
func bootID() string { return procfs.BootID() }

// bootTime is when the host booted (btime in /proc/stat).
func bootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(sec, 0), nil
		}
	}
	return time.Time{}, errors.New("/proc/stat: no btime")
}

// KillAndWait SIGKILLs pid's process group and pid, and waits for pid to
// disappear.
func KillAndWait(pid int, timeout time.Duration) error {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !procfs.Alive(pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("pid %d still alive %s after SIGKILL", pid, timeout)
}

// startIn starts the command newCmd makes in the cgroup v2 directory dir,
// or where the caller is when dir is "".
func startIn(dir string, newCmd func() *exec.Cmd) (*exec.Cmd, error) {
	cmd := newCmd()
	if dir == "" {
		return cmd, cmd.Start()
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	defer syscall.Close(fd)
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	err = cmd.Start()
	if err == nil || !(errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.E2BIG)) {
		return cmd, err
	}
	// A kernel without CLONE_INTO_CGROUP: start, then move.
	cmd = newCmd()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if err := (cgroups.Tree{Dir: dir}).Move("", cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return cmd, nil
}
