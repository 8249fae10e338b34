// Package systemdkubelet is skewtest's one way to drive a kubelet that runs
// as a systemd unit on a node: stop it, swap its binary (and, if a version
// needs it, its flag or config file), start it, wait for it, and put the
// node's own kubelet back. The kind, existing and kops providers all use
// it; they differ only in the Layout they pass and the exec.Cmder that
// reaches the node (docker exec, SSH).
//
// Every step is a command run through the Cmder, so a recorder sees the
// exact commands (see the package's tests), and the node needs only a
// POSIX shell, coreutils (cat, cp, mv, rm, chmod, sha256sum), systemctl,
// journalctl, and curl or wget for the kubelet's health endpoint.
package systemdkubelet

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/exec"
)

// Suffixes of the files the driver leaves beside a file it replaces.
const (
	// NewSuffix names an upload in progress; it is renamed over the
	// target once its sha256 is checked on the node.
	NewSuffix = ".skewtest-new"
	// OrigSuffix names the node's own file, kept by the first swap and
	// put back by Restore. A later swap never replaces it.
	OrigSuffix = ".skewtest-orig"
)

// Defaults for Driver's zero fields.
const (
	// DefaultPollInterval is how often the unit's state is read while
	// waiting; each read is one command on the node (an SSH session, a
	// docker exec).
	DefaultPollInterval = 250 * time.Millisecond
	// DefaultTimeout bounds each wait (for the unit to stop, for the
	// kubelet to answer its health endpoint) when ctx has no sooner
	// deadline. Sized for a kubelet starting under TCG emulation, where
	// its start is 10-18 times slower than on hardware.
	DefaultTimeout = 3 * time.Minute
	// DefaultHealthzURL is the kubelet's default healthzBindAddress and
	// healthzPort.
	DefaultHealthzURL = "http://127.0.0.1:10248/healthz"
	// journalLines is how many of the unit's last log lines an error
	// carries.
	journalLines = 25
)

// Layout is where a node keeps its kubelet.
type Layout struct {
	// Unit is the systemd unit, e.g. "kubelet" or "kubelet.service".
	Unit string
	// Binary is the path the unit's ExecStart runs (a regular file or a
	// symlink); Swap replaces it.
	Binary string
	// EnvironmentFile is the unit's EnvironmentFile holding the kubelet's
	// flags (kops: /etc/sysconfig/kubelet), if any.
	EnvironmentFile string
	// Config is the kubelet's --config file (kops:
	// /var/lib/kubelet/kubelet.conf), if any.
	Config string
	// RootDir is the kubelet's --root-dir.
	RootDir string
	// HealthzURL is polled on the node after a start; empty means
	// DefaultHealthzURL.
	HealthzURL string
}

// Validate checks that the paths are absolute and the unit is named.
func (l Layout) Validate() error {
	if l.Unit == "" || strings.ContainsAny(l.Unit, " /\t\n") {
		return fmt.Errorf("kubelet unit %q: want a systemd unit name such as kubelet", l.Unit)
	}
	for _, p := range []struct{ name, path string }{
		{"binary", l.Binary}, {"root dir", l.RootDir}, {"environment file", l.EnvironmentFile}, {"config", l.Config},
	} {
		if (p.path != "" || p.name == "binary" || p.name == "root dir") && !strings.HasPrefix(p.path, "/") {
			return fmt.Errorf("kubelet %s %q: want an absolute path", p.name, p.path)
		}
	}
	if l.HealthzURL != "" {
		if u, err := url.Parse(l.HealthzURL); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("kubelet health URL %q: want the kubelet's healthz endpoint as the node reaches it, e.g. %s", l.HealthzURL, DefaultHealthzURL)
		}
	}
	return nil
}

// Files are the files besides the binary that Swap may replace and Restore
// puts back.
func (l Layout) Files() []string {
	var out []string
	for _, f := range []string{l.EnvironmentFile, l.Config} {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Driver drives one node's kubelet unit. Its methods are the verbs, one
// per file: Stop, Swap, Start, Restore; Original reads what Restore will
// put back, so a caller can record it before the first Swap.
type Driver struct {
	// Node runs the commands; a fmt.Stringer names the node in errors.
	Node   exec.Cmder
	Layout Layout
	// PollInterval and Timeout default to DefaultPollInterval and
	// DefaultTimeout.
	PollInterval time.Duration
	Timeout      time.Duration
	Log          *slog.Logger
}

func (d *Driver) String() string {
	if s, ok := d.Node.(fmt.Stringer); ok && s.String() != "" {
		return s.String()
	}
	return "node"
}

func (d *Driver) log() *slog.Logger {
	if d.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Log
}

func (d *Driver) poll() time.Duration {
	if d.PollInterval > 0 {
		return d.PollInterval
	}
	return DefaultPollInterval
}

func (d *Driver) timeout() time.Duration {
	if d.Timeout > 0 {
		return d.Timeout
	}
	return DefaultTimeout
}

func (d *Driver) healthzURL() string {
	if d.Layout.HealthzURL != "" {
		return d.Layout.HealthzURL
	}
	return DefaultHealthzURL
}

// run runs argv on the node; the error is an *exec.RunError naming it.
func (d *Driver) run(ctx context.Context, argv ...string) (exec.Result, error) {
	return exec.Output(ctx, d.Node, argv...)
}

// sh runs a shell script with args as $1, $2, ... so no path is ever
// spliced into the script's text.
func (d *Driver) sh(ctx context.Context, script string, args ...string) (exec.Result, error) {
	return d.run(ctx, append([]string{"sh", "-c", script, "sh"}, args...)...)
}

// UnitState is what systemd says about the unit.
type UnitState struct {
	ActiveState string // active, activating, deactivating, inactive, failed, ...
	SubState    string // running, auto-restart, dead, ...
	MainPID     int    // 0 when no process runs
	NRestarts   int    // automatic restarts since the unit was last started by hand
}

func (s UnitState) String() string {
	return fmt.Sprintf("%s/%s, main PID %d, %d restarts", s.ActiveState, s.SubState, s.MainPID, s.NRestarts)
}

// showArgv is the one command that reads the unit's state.
func (d *Driver) showArgv() []string {
	return []string{"systemctl", "show", "--property=ActiveState,SubState,MainPID,NRestarts", d.Layout.Unit}
}

// State reads the unit's state with one systemctl show.
func (d *Driver) State(ctx context.Context) (UnitState, error) {
	res, err := d.run(ctx, d.showArgv()...)
	if err != nil {
		return UnitState{}, err
	}
	var s UnitState
	seen := 0
	for _, line := range strings.Split(res.Stdout, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "ActiveState":
			s.ActiveState, seen = v, seen+1
		case "SubState":
			s.SubState = v
		case "MainPID":
			s.MainPID, _ = strconv.Atoi(v)
		case "NRestarts":
			s.NRestarts, _ = strconv.Atoi(v)
		}
	}
	if seen == 0 {
		return UnitState{}, fmt.Errorf("%s printed no ActiveState: %q", exec.JoinArgv(res.Argv), res.Stdout)
	}
	return s, nil
}

// Journal is the unit's last n log lines, for errors; what it cannot read
// it says.
func (d *Driver) Journal(ctx context.Context, n int) string {
	res, err := d.run(context.WithoutCancel(ctx), "journalctl", "-u", d.Layout.Unit, "--no-pager", "-o", "cat", "-n", strconv.Itoa(n))
	if err != nil {
		return fmt.Sprintf("(could not read the journal: %v)", err)
	}
	return strings.TrimRight(res.Stdout, "\n")
}

// LogsArgv is the command that prints the unit's log from since on, for
// log dumps; a zero since prints it whole. On a node someone else owns the
// journal before the run is theirs, not the run's evidence.
func (d *Driver) LogsArgv(since time.Time) []string {
	argv := []string{"journalctl", "-u", d.Layout.Unit, "--no-pager"}
	if !since.IsZero() {
		// systemd.time(7): seconds since the epoch after an @, whatever
		// the node's time zone.
		argv = append(argv, "--since", "@"+strconv.FormatInt(since.Unix(), 10))
	}
	return argv
}

// sha256On is the sha256 of path on the node, by sha256sum.
func (d *Driver) sha256On(ctx context.Context, path string) (string, error) {
	res, err := d.run(ctx, "sha256sum", path)
	if err != nil {
		return "", err
	}
	sum, _, _ := strings.Cut(strings.TrimSpace(res.Stdout), " ")
	if len(sum) != 64 {
		return "", fmt.Errorf("%s printed %q, not a sha256", exec.JoinArgv(res.Argv), res.Stdout)
	}
	return strings.ToLower(sum), nil
}

// lines are the non-empty lines a node's script printed, one path or
// change a line.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
