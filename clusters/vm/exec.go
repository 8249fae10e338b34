package vm

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/sshnode"
)

// Instance is a running guest. It is what another component needs to
// reach it (the SSH address, key and known_hosts, the user, the shares),
// and it is an exec.Cmder.
type Instance struct {
	Name string `json:"name"`
	// Dir is the instance's directory on the host (overlay, keys, state).
	Dir string `json:"dir"`
	// PID is qemu's, also its process group's.
	PID int `json:"pid"`
	// SSHAddress is host:port on loopback, forwarded to the guest's sshd.
	SSHAddress string `json:"sshAddress"`
	// Forwards maps each guest port of Config.Forwards to the host:port on
	// loopback that reaches it.
	Forwards map[int]string `json:"forwards,omitempty"`
	// KeyFile and KnownHostsFile are the client key the guest accepts and
	// the guest's host key for SSHAddress.
	KeyFile        string  `json:"keyFile"`
	KnownHostsFile string  `json:"knownHostsFile"`
	User           string  `json:"user"`
	Shares         []Share `json:"shares"`
	// Env is set for every command Command runs.
	Env       []string `json:"env,omitempty"`
	SerialLog string   `json:"serialLog"`
	Overlay   string   `json:"overlay"`
	Accel     Accel    `json:"accel"`
	// BootSeconds is how long the boot took until SSH answered.
	BootSeconds float64 `json:"bootSeconds"`

	log *slog.Logger
	// exited is closed when qemu exits, when this process started it.
	exited chan struct{}

	mu   sync.Mutex
	node *sshnode.Node
}

var _ exec.Cmder = (*Instance)(nil)

// Command implements exec.Cmder: argv runs in the guest as root over SSH,
// with the guest's host key checked (clusters/internal/sshnode).
func (i *Instance) Command(ctx context.Context, name string, args ...string) exec.Cmd {
	n, err := i.Node()
	if err != nil {
		return errCmd{err}
	}
	c := n.Command(ctx, name, args...)
	if len(i.Env) > 0 {
		c = c.SetEnv(i.Env...)
	}
	return c
}

// Node is the guest reached over SSH.
func (i *Instance) Node() (*sshnode.Node, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.node != nil {
		return i.node, nil
	}
	d, err := sshnode.NewDialer(&sshnode.Config{User: i.User, KeyFile: i.KeyFile, KnownHostsFile: i.KnownHostsFile, Timeout: sshTimeout}, i.logger())
	if err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	i.node = sshnode.New(d, Hostname, i.SSHAddress)
	return i.node, nil
}

func (i *Instance) logger() *slog.Logger {
	if i.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return i.log
}

// errCmd is a command that cannot run (no SSH credentials): Run says why.
type errCmd struct{ err error }

func (c errCmd) Run() error                     { return c.err }
func (c errCmd) SetEnv(...string) exec.Cmd      { return c }
func (c errCmd) SetStdin(r io.Reader) exec.Cmd  { return c }
func (c errCmd) SetStdout(w io.Writer) exec.Cmd { return c }
func (c errCmd) SetStderr(w io.Writer) exec.Cmd { return c }
