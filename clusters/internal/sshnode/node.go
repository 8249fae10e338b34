// Package sshnode is a machine reached over SSH as a nodes.Node's command
// runner (exec.Cmder): one connection per machine, dialled on first use
// and again after it breaks, host keys always checked against known_hosts,
// commands run through the login shell under sudo -n for a user other
// than root, and cancelled commands killed on the machine. The existing
// provider's nodes, the kops provider's worker and the vm provider's
// guests are all one of these.
package sshnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"sigs.k8s.io/skewtest/clusters/exec"
)

// Defaults of Config.
const (
	DefaultPort    = 22
	DefaultTimeout = 10 * time.Second
)

// Config is how machines are reached.
type Config struct {
	// User to log in as; default the current user. When it is not root,
	// commands run under sudo -n, which must not ask for a password.
	User string
	// Port is sshd's port, for addresses without one; default 22.
	Port int
	// KeyFile is an unencrypted private key. Empty means the keys of the
	// ssh-agent at $SSH_AUTH_SOCK.
	KeyFile string
	// KnownHostsFile holds the machines' host keys; default
	// ~/.ssh/known_hosts. Host keys are always checked.
	KnownHostsFile string
	// Timeout bounds dialling and the SSH handshake; default 10s.
	Timeout time.Duration
	// DialHint ends the explanation of a failed dial: the caller's own
	// settings that change where it dials.
	DialHint string
}

// NewDialer fills in c's defaults and loads its key and known_hosts.
func NewDialer(c *Config, log *slog.Logger) (*Dialer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if c.User == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("no SSH user given (SSH_USER) and the current user is unknown: %w", err)
		}
		c.User = u.Username
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.Port < 1 || c.Port > 65535 {
		return nil, fmt.Errorf("SSH port %d out of range", c.Port)
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.KnownHostsFile == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("no SSH known_hosts file given (SSH_KNOWN_HOSTS) and no home directory: %w", err)
		}
		c.KnownHostsFile = filepath.Join(home, ".ssh", "known_hosts")
	}
	hostKeys, err := knownhosts.New(c.KnownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("SSH known_hosts %s: %w (host keys are always checked: add each node's, after verifying it, with ssh-keyscan -p PORT HOST >> %s)", c.KnownHostsFile, err, c.KnownHostsFile)
	}
	d := &Dialer{
		user:           c.User,
		port:           c.Port,
		keyFile:        c.KeyFile,
		knownHostsFile: c.KnownHostsFile,
		hostKeys:       hostKeys,
		timeout:        c.Timeout,
		dialHint:       c.DialHint,
		log:            log,
	}
	if c.KeyFile != "" {
		pem, err := os.ReadFile(c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("SSH key: %w", err)
		}
		d.signer, err = ssh.ParsePrivateKey(pem)
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, fmt.Errorf("SSH key %s is encrypted: load it into ssh-agent (ssh-add %s) and give no key file (SSH_KEY)", c.KeyFile, c.KeyFile)
		}
		if err != nil {
			return nil, fmt.Errorf("SSH key %s: %w", c.KeyFile, err)
		}
	} else {
		d.agentSock = os.Getenv("SSH_AUTH_SOCK")
		if d.agentSock == "" {
			return nil, errors.New("no SSH credentials: give a key file (SSH_KEY; SSH.KeyFile), or run ssh-agent with the key added (SSH_AUTH_SOCK is empty)")
		}
	}
	return d, nil
}

// User is the user the dialer logs in as.
func (d *Dialer) User() string { return d.user }

// HostPort is address with the dialer's port added when it has none.
func (d *Dialer) HostPort(address string) string {
	if _, _, err := net.SplitHostPort(address); err == nil {
		return address
	}
	return net.JoinHostPort(strings.Trim(address, "[]"), strconv.Itoa(d.port))
}

// Node is one machine reached over SSH. It implements exec.Cmder.
type Node struct {
	name string
	addr string
	sudo bool
	conn *conn
	log  *slog.Logger
}

var _ exec.Cmder = (*Node)(nil)

// New is the machine name at address (host, or host:port) through d.
// Nothing is dialled until its first command.
func New(d *Dialer, name, address string) *Node {
	addr := d.HostPort(address)
	return &Node{name: name, addr: addr, sudo: d.user != "root", conn: newConn(d, name, addr), log: d.log}
}

// String is the machine's name.
func (n *Node) String() string { return n.name }

// Address is the host:port its connection goes to.
func (n *Node) Address() string { return n.addr }

// User is the SSH user; Sudo says whether commands run under sudo -n.
func (n *Node) User() string { return n.conn.d.user }
func (n *Node) Sudo() bool   { return n.sudo }

// Command implements exec.Cmder: argv runs on the machine over a new SSH
// session. Cancelling ctx kills the command's processes there and closes
// the session.
func (n *Node) Command(ctx context.Context, name string, args ...string) exec.Cmd {
	return &sshCmd{n: n, ctx: ctx, argv: append([]string{name}, args...)}
}

// Close closes the connection; a later command dials again.
func (n *Node) Close() error { return n.conn.Close() }
