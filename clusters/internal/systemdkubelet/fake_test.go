package systemdkubelet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"sigs.k8s.io/skewtest/clusters/exec"
)

// fakeSystemd is a fake node, named as one: there is no systemd on this
// host to drive. systemctl, journalctl and the health probe are simulated
// by a small unit state machine; every other command (the file scripts,
// sha256sum, chmod, mv, rm, test) runs for real on this host, on paths in
// a test's temporary directory, so the files the driver leaves are real.
//
// The simulated kubelet's behaviour comes from the content of the binary
// the unit runs: a binary containing "crash" exits at once and is
// restarted by Restart=always on every state read; any other binary runs
// and, after healthyAfter probes, answers its health endpoint.
type fakeSystemd struct {
	mu           sync.Mutex
	binary       string // the unit's ExecStart path on this host
	active       bool
	pid          int
	restarts     int
	stopLag      int // state reads that still show the process after stop
	healthyAfter int // probes that fail after each start
	probes       int
	noProber     bool // neither curl, wget nor bash on the node
	startErr     string
	journal      string
	nextPID      int
}

func newFakeSystemd(binary string) *fakeSystemd {
	return &fakeSystemd{binary: binary, active: true, pid: 100, nextPID: 101, journal: "I0101 kubelet.go:1] started\nE0101 kubelet.go:2] flag provided but not defined: --foo"}
}

func (f *fakeSystemd) String() string { return "node-a" }

func (f *fakeSystemd) Command(ctx context.Context, name string, args ...string) exec.Cmd {
	return &fakeCmd{f: f, ctx: ctx, argv: append([]string{name}, args...)}
}

type fakeCmd struct {
	f              *fakeSystemd
	ctx            context.Context
	argv           []string
	stdin          io.Reader
	stdout, stderr io.Writer
	env            []string
}

func (c *fakeCmd) SetEnv(env ...string) exec.Cmd  { c.env = env; return c }
func (c *fakeCmd) SetStdin(r io.Reader) exec.Cmd  { c.stdin = r; return c }
func (c *fakeCmd) SetStdout(w io.Writer) exec.Cmd { c.stdout = w; return c }
func (c *fakeCmd) SetStderr(w io.Writer) exec.Cmd { c.stderr = w; return c }

type exitErr int

func (e exitErr) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
func (e exitErr) ExitCode() int { return int(e) }

func (c *fakeCmd) Run() error {
	out, errOut, code, real := c.f.simulate(c.argv)
	if real {
		cmd := exec.Local{}.Command(c.ctx, c.argv[0], c.argv[1:]...)
		if c.stdin != nil {
			cmd.SetStdin(c.stdin)
		}
		if c.stdout != nil {
			cmd.SetStdout(c.stdout)
		}
		if c.stderr != nil {
			cmd.SetStderr(c.stderr)
		}
		return cmd.Run()
	}
	if c.stdout != nil {
		io.WriteString(c.stdout, out)
	}
	if c.stderr != nil {
		io.WriteString(c.stderr, errOut)
	}
	if code != 0 {
		return exitErr(code)
	}
	return nil
}

func (f *fakeSystemd) crashes() bool {
	b, _ := os.ReadFile(f.binary)
	return bytes.Contains(b, []byte("crash"))
}

// simulate answers the commands a node's systemd would; real says the
// command is not simulated and runs on this host.
func (f *fakeSystemd) simulate(argv []string) (stdout, stderr string, code int, real bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case argv[0] == "systemctl" && len(argv) == 3 && argv[1] == "stop":
		f.active = false
		if f.stopLag == 0 {
			f.pid = 0
		}
		return "", "", 0, false
	case argv[0] == "systemctl" && len(argv) == 3 && argv[1] == "start":
		if f.startErr != "" {
			return "", f.startErr, 1, false
		}
		if !f.active {
			f.active, f.pid, f.probes = true, f.nextPID, 0
			f.nextPID++
		}
		return "", "", 0, false
	case argv[0] == "systemctl" && len(argv) == 3 && argv[1] == "reset-failed":
		if f.active {
			return "", "Failed to reset failed state of unit kubelet.service: Unit kubelet.service not failed.", 1, false
		}
		return "", "", 0, false
	case argv[0] == "systemctl" && len(argv) == 4 && argv[1] == "show":
		state, sub := "inactive", "dead"
		switch {
		case f.active && f.crashes():
			f.restarts++
			state, sub = "activating", "auto-restart"
		case f.active:
			state, sub = "active", "running"
		case f.pid != 0:
			state, sub = "deactivating", "stop-sigterm"
			f.stopLag--
			if f.stopLag <= 0 {
				f.pid = 0
			}
		}
		return fmt.Sprintf("ActiveState=%s\nSubState=%s\nMainPID=%d\nNRestarts=%d\n", state, sub, f.pid, f.restarts), "", 0, false
	case argv[0] == "journalctl":
		return f.journal + "\n", "", 0, false
	case argv[0] == "sh" && len(argv) > 2 && strings.Contains(argv[2], "command -v curl"):
		if f.noProber {
			return "", "neither curl, wget nor bash on the node\n", 127, false
		}
		f.probes++
		if f.active && !f.crashes() && f.probes > f.healthyAfter {
			return "ok", "", 0, false
		}
		return "", "curl: (7) Failed to connect", 7, false
	case argv[0] == "systemctl" || argv[0] == "journalctl":
		return "", "unexpected " + strings.Join(argv, " "), 99, false
	}
	return "", "", 0, true
}
