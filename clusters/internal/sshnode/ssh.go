package sshnode

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"sigs.k8s.io/skewtest/clusters/exec"
)

// maxSessions bounds the concurrent sessions on one node's connection,
// below OpenSSH's default MaxSessions (10), so parallel steps queue instead
// of being refused.
const maxSessions = 8

// sessionRefusedWait is how long a session the server refuses (sshd at
// its MaxSessions) is retried, starting sessionRefusedPause apart and
// backing off, before the refusal is the command's error.
const (
	sessionRefusedWait  = 10 * time.Second
	sessionRefusedPause = 10 * time.Millisecond
)

// cancelGrace is how long Run waits, after killing a cancelled command,
// for the session to close before returning anyway.
const cancelGrace = 5 * time.Second

// Dialer is what the connections to a set of machines share: user,
// credentials, host key checking and timeout.
type Dialer struct {
	user           string
	signer         ssh.Signer // from SSHConfig.KeyFile; nil means ssh-agent
	keyFile        string
	agentSock      string
	knownHostsFile string
	port           int
	hostKeys       ssh.HostKeyCallback
	timeout        time.Duration
	dialHint       string
	log            *slog.Logger
}

// hostKeyError is a host key check that failed, explained.
type hostKeyError struct{ msg string }

func (e *hostKeyError) Error() string { return e.msg }

// authDesc says which credentials were offered, for errors.
func (d *Dialer) authDesc() string {
	if d.signer != nil {
		return "key " + d.keyFile
	}
	return "the keys of ssh-agent at SSH_AUTH_SOCK=" + d.agentSock
}

// auth returns the auth methods for one handshake and a func releasing
// what they hold (the agent connection).
func (d *Dialer) auth() ([]ssh.AuthMethod, func(), error) {
	if d.signer != nil {
		return []ssh.AuthMethod{ssh.PublicKeys(d.signer)}, func() {}, nil
	}
	conn, err := net.Dial("unix", d.agentSock)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to ssh-agent at SSH_AUTH_SOCK=%s: %w (start an agent and ssh-add the key, or give a key file: SSH_KEY)", d.agentSock, err)
	}
	ag := agent.NewClient(conn)
	return []ssh.AuthMethod{ssh.PublicKeysCallback(ag.Signers)}, func() { conn.Close() }, nil
}

// dial opens an authenticated SSH connection to node at addr (host:port).
func (d *Dialer) dial(ctx context.Context, node, addr string) (*ssh.Client, error) {
	nd := net.Dialer{Timeout: d.timeout}
	conn, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		hint := ""
		if d.dialHint != "" {
			hint = "; " + d.dialHint
		}
		return nil, fmt.Errorf("ssh to node %s at %s: %w (check that sshd runs on the node and that this address and port are reachable from here%s)", node, addr, err, hint)
	}
	auth, release, err := d.auth()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh to node %s at %s: %w", node, addr, err)
	}
	defer release()

	var mu sync.Mutex
	var hkErr error
	algos := d.hostKeyAlgorithms(addr, conn.RemoteAddr())
	cfg := &ssh.ClientConfig{
		User: d.user,
		Auth: auth,
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			if err := d.hostKeys(hostname, remote, key); err != nil {
				e := d.explainHostKey(node, hostname, key, err)
				mu.Lock()
				hkErr = e
				mu.Unlock()
				return e
			}
			return nil
		},
		HostKeyAlgorithms: algos,
		Timeout:           d.timeout,
	}
	// The handshake is bounded by the timeout and by ctx.
	_ = conn.SetDeadline(time.Now().Add(d.timeout))
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	stop()
	if err != nil {
		conn.Close()
		mu.Lock()
		e := hkErr
		mu.Unlock()
		var he *hostKeyError
		switch {
		case errors.As(err, &he):
			return nil, he
		case e != nil:
			return nil, e
		case ctx.Err() != nil:
			return nil, fmt.Errorf("ssh to node %s at %s: %w", node, addr, context.Cause(ctx))
		case algos != nil && strings.Contains(err.Error(), "no common algorithm for host key"):
			return nil, &hostKeyError{fmt.Sprintf("host key of node %s at %s: known_hosts %s has only %s keys for it, which the node does not offer: the node was reinstalled or the connection is intercepted; after checking, replace the entry: ssh-keygen -f %s -R %s && %s (%v)",
				node, addr, d.knownHostsFile, strings.Join(algos, "/"), exec.ShellQuote(d.knownHostsFile), exec.ShellQuote(knownhosts.Normalize(addr)), d.keyscan(addr), err)}
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, fmt.Errorf("ssh to node %s at %s as user %q: authentication with %s failed (add its public key to ~%s/.ssh/authorized_keys on the node, or set the SSH user and key: SSH_USER, SSH_KEY): %w",
				node, addr, d.user, d.authDesc(), d.user, err)
		default:
			return nil, fmt.Errorf("ssh to node %s at %s as user %q: %w", node, addr, d.user, err)
		}
	}
	_ = conn.SetDeadline(time.Time{})
	d.log.Debug("ssh connected", "node", node, "addr", addr, "user", d.user)
	return ssh.NewClient(c, chans, reqs), nil
}

// explainHostKey turns a known_hosts failure into an error that says what
// to do about it.
func (d *Dialer) explainHostKey(node, hostport string, key ssh.PublicKey, err error) error {
	scan := d.keyscan(hostport)
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case errors.As(err, &re):
		return &hostKeyError{fmt.Sprintf("host key of node %s at %s is revoked in known_hosts %s (%s:%d); refusing to connect",
			node, hostport, d.knownHostsFile, re.Revoked.Filename, re.Revoked.Line)}
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return &hostKeyError{fmt.Sprintf("host key of node %s at %s (%s %s) is not in known_hosts %s; check it out of band, then add it with: %s",
			node, hostport, key.Type(), ssh.FingerprintSHA256(key), d.knownHostsFile, scan)}
	case errors.As(err, &ke):
		var where []string
		for _, w := range ke.Want {
			where = append(where, fmt.Sprintf("%s:%d (%s)", w.Filename, w.Line, w.Key.Type()))
		}
		return &hostKeyError{fmt.Sprintf("host key of node %s at %s (%s %s) does NOT match known_hosts %s [%s]: the node was reinstalled or the connection is intercepted; after checking, replace the entry: ssh-keygen -f %s -R %s && %s",
			node, hostport, key.Type(), ssh.FingerprintSHA256(key), d.knownHostsFile, strings.Join(where, ", "),
			exec.ShellQuote(d.knownHostsFile), exec.ShellQuote(knownhosts.Normalize(hostport)), scan)}
	default:
		return &hostKeyError{fmt.Sprintf("host key of node %s at %s: checking known_hosts %s: %v", node, hostport, d.knownHostsFile, err)}
	}
}

// keyscan is the command adding hostport's keys to known_hosts.
func (d *Dialer) keyscan(hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, "22"
	}
	return fmt.Sprintf("ssh-keyscan -p %s %s >> %s", port, exec.ShellQuote(host), exec.ShellQuote(d.knownHostsFile))
}

// probeKey is a key no known_hosts holds; checking it reveals the keys
// known for a host.
var probeKey = func() ssh.PublicKey {
	k, err := ssh.NewPublicKey(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public())
	if err != nil {
		panic(err)
	}
	return k
}()

// hostKeyAlgorithms returns the key types known_hosts has for hostport, so
// the server is asked for a key that can be checked (otherwise it may offer
// a type known_hosts lacks, which looks like a changed key). nil lets the
// library choose, for hosts known_hosts does not list.
func (d *Dialer) hostKeyAlgorithms(hostport string, remote net.Addr) []string {
	var ke *knownhosts.KeyError
	if err := d.hostKeys(hostport, remote, probeKey); !errors.As(err, &ke) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	add := func(as ...string) {
		for _, a := range as {
			if !seen[a] {
				seen[a] = true
				algos = append(algos, a)
			}
		}
	}
	for _, w := range ke.Want {
		switch t := w.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			add(ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			add(t)
		}
	}
	return algos
}

// conn is one node's shared SSH connection, dialled on first use and again
// after it breaks.
type conn struct {
	d          *Dialer
	node, addr string
	sem        chan struct{}

	mu     sync.Mutex
	client *ssh.Client
}

func newConn(d *Dialer, node, addr string) *conn {
	return &conn{d: d, node: node, addr: addr, sem: make(chan struct{}, maxSessions)}
}

func (c *conn) get(ctx context.Context) (*ssh.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		return c.client, nil
	}
	cl, err := c.d.dial(ctx, c.node, c.addr)
	if err != nil {
		return nil, err
	}
	c.client = cl
	return cl, nil
}

// drop forgets cl if it is still the current client.
func (c *conn) drop(cl *ssh.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == cl {
		c.client = nil
	}
	cl.Close()
}

// session opens a session, redialling once if the connection broke, and
// waiting while the server refuses it for MaxSessions (sessionRefusedWait).
func (c *conn) session(ctx context.Context) (*ssh.Session, error) {
	cl, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	redialled := false
	deadline := time.Now().Add(sessionRefusedWait)
	pause := sessionRefusedPause
	for {
		s, err := cl.NewSession()
		if err == nil {
			return s, nil
		}
		var oce *ssh.OpenChannelError
		switch {
		case errors.As(err, &oce) && oce.Reason == ssh.ConnectionFailed && time.Now().Before(deadline):
			// sshd's answer at MaxSessions. It counts a session until it
			// has processed the close, so one opened just after another of
			// ours closed can meet the limit although fewer than
			// maxSessions are open.
			c.d.log.Debug("ssh session refused, retrying", "node", c.node, "addr", c.addr, "err", err)
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return nil, fmt.Errorf("ssh to node %s at %s: open session: %w", c.node, c.addr, context.Cause(ctx))
			}
			pause = min(2*pause, 20*sessionRefusedPause)
		case errors.As(err, &oce) || redialled:
			// The server is there but refused the session, or the
			// connection broke again right after it was made.
			return nil, fmt.Errorf("ssh to node %s at %s: open session: %w", c.node, c.addr, err)
		default:
			c.d.log.Debug("ssh connection lost, redialling", "node", c.node, "addr", c.addr, "err", err)
			c.drop(cl)
			if cl, err = c.get(ctx); err != nil {
				return nil, err
			}
			redialled = true
		}
	}
}

// Close closes the connection; the next command dials again.
func (c *conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		return nil
	}
	err := c.client.Close()
	c.client = nil
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// remoteCommand is the line sshd hands to the login shell (which must be a
// POSIX shell): argv quoted, env passed through env(1) because sshd refuses
// most Setenv requests, and sudo -n in front when the user is not root.
func remoteCommand(sudo bool, env, argv []string) string {
	var parts []string
	if sudo {
		parts = append(parts, "sudo", "-n")
	}
	if len(env) > 0 {
		parts = append(parts, "env")
		parts = append(parts, env...)
	}
	parts = append(parts, argv...)
	return exec.JoinArgv(parts)
}

// exitError is a command that ran on the node and exited non-zero.
type exitError struct {
	err *ssh.ExitError
}

func (e *exitError) Error() string {
	if e.err.Signal() != "" {
		return fmt.Sprintf("signal: %s (exit status %d)", e.err.Signal(), e.err.ExitStatus())
	}
	return fmt.Sprintf("exit status %d", e.err.ExitStatus())
}

// ExitCode is the remote exit status; for a command killed by a signal,
// 128 plus the signal's number, as a shell reports it.
func (e *exitError) ExitCode() int { return e.err.ExitStatus() }
func (e *exitError) Unwrap() error { return e.err }

// sshCmd is one command on a node.
type sshCmd struct {
	n              *Node
	ctx            context.Context
	argv, env      []string
	stdin          io.Reader
	stdout, stderr io.Writer
}

func (c *sshCmd) SetEnv(env ...string) exec.Cmd  { c.env = append(c.env, env...); return c }
func (c *sshCmd) SetStdin(r io.Reader) exec.Cmd  { c.stdin = r; return c }
func (c *sshCmd) SetStdout(w io.Writer) exec.Cmd { c.stdout = w; return c }
func (c *sshCmd) SetStderr(w io.Writer) exec.Cmd { c.stderr = w; return c }

// Run runs the command. A non-zero exit is an error implementing
// exec.ExitCoder; failing to connect, a lost connection or a cancelled ctx
// are errors without an exit code (exec.ExitCode gives -1).
func (c *sshCmd) Run() error {
	line := remoteCommand(c.n.sudo, c.env, c.argv)
	fail := func(err error) error {
		return fmt.Errorf("run %s on %s: %w", line, c.n.name, err)
	}
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return fail(context.Cause(ctx))
	}
	select {
	case c.n.conn.sem <- struct{}{}:
		defer func() { <-c.n.conn.sem }()
	case <-ctx.Done():
		return fail(context.Cause(ctx))
	}
	sess, err := c.n.conn.session(ctx)
	if err != nil {
		return err
	}
	defer sess.Close()
	c.n.log.Debug("ssh run", "node", c.n.name, "cmd", line)

	// Writes stop when Run returns, even if an abandoned session still
	// copies output, so callers may read their buffers.
	var gates []*gateWriter
	if c.stdout != nil {
		g := &gateWriter{w: c.stdout}
		gates = append(gates, g)
		sess.Stdout = g
	}
	if c.stderr != nil {
		g := &gateWriter{w: c.stderr}
		gates = append(gates, g)
		sess.Stderr = g
	}
	defer func() {
		for _, g := range gates {
			g.close()
		}
	}()
	var in *stdinReader
	var stdinPipe io.WriteCloser
	if c.stdin != nil {
		in = &stdinReader{r: c.stdin}
		if stdinPipe, err = sess.StdinPipe(); err != nil {
			return fail(err)
		}
	}
	// A cancellable command carries a marker in its environment, which
	// its processes inherit, so cancel can find and kill them: sshd
	// refuses the signal request for root logins, and closing the channel
	// does not end the command.
	env, marker := c.env, ""
	if ctx.Done() != nil {
		marker = runMarkerVar + "=" + rand.Text()
		env = append(slices.Clip(env), marker)
	}
	if err := sess.Start(remoteCommand(c.n.sudo, env, c.argv)); err != nil {
		return fail(err)
	}
	if in != nil {
		// Not waited for: a reader that never ends must not hold Run
		// after the command exits. Errors writing (the command stopped
		// reading) are ignored, as os/exec ignores EPIPE.
		go func() {
			_, _ = io.Copy(stdinPipe, in)
			stdinPipe.Close()
		}()
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = sess.Signal(ssh.SIGKILL) // works for non-root users
		c.n.killMarked(ctx, marker)
		sess.Close()
		select {
		case <-done:
		case <-time.After(cancelGrace):
		}
		return fail(context.Cause(ctx))
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		return &exitError{err: ee}
	}
	if err != nil {
		var me *ssh.ExitMissingError
		if errors.As(err, &me) {
			return fail(fmt.Errorf("connection to %s lost or command killed: %w", c.n.addr, err))
		}
		return fail(err)
	}
	if in != nil {
		if rerr := in.err(); rerr != nil {
			return fail(fmt.Errorf("read stdin: %w", rerr))
		}
	}
	return nil
}

// runMarkerVar is the environment variable marking a cancellable
// command's processes.
const runMarkerVar = "SKEWTEST_RUN"

// killScript SIGKILLs every process whose environment holds the line $1,
// a few rounds in case one forked meanwhile.
const killScript = `i=0
while [ $i -lt 5 ]; do
  i=$((i+1))
  ps=$(grep -lzxF -- "$1" /proc/[0-9]*/environ 2>/dev/null)
  [ -n "$ps" ] || break
  for f in $ps; do p=${f#/proc/}; kill -KILL "${p%/environ}" 2>/dev/null; done
done
true`

// killMarked kills the processes of a cancelled command, over a session of
// its own (outside the session limit, which the cancelled command holds).
func (n *Node) killMarked(ctx context.Context, marker string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
	defer cancel()
	err := func() error {
		sess, err := n.conn.session(kctx)
		if err != nil {
			return err
		}
		defer sess.Close()
		stop := context.AfterFunc(kctx, func() { sess.Close() })
		defer stop()
		return sess.Run(remoteCommand(n.sudo, nil, []string{"sh", "-c", killScript, "sh", marker}))
	}()
	if err != nil {
		n.log.Warn("kill cancelled command", "node", n.name, "err", err)
	}
}

// gateWriter passes writes on until closed, then drops them.
type gateWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return len(p), nil
	}
	return g.w.Write(p)
}

func (g *gateWriter) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// stdinReader records the error reading the caller's stdin, as opposed to
// writing it to the node.
type stdinReader struct {
	r    io.Reader
	mu   sync.Mutex
	rerr error
}

func (s *stdinReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.mu.Lock()
		s.rerr = err
		s.mu.Unlock()
	}
	return n, err
}

func (s *stdinReader) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rerr
}
