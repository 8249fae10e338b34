// Package sshdtest runs a real OpenSSH sshd on 127.0.0.1 for tests, with
// its own host key, client key, authorized_keys and known_hosts in a temp
// directory. The test's cleanup stops it and its per-connection children.
package sshdtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec" // starts the test sshd as a child process it stops
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/internal/hostports"
	"sigs.k8s.io/skewtest/clusters/internal/procfs"
)

// SSHD is the sshd binary the tests run.
const SSHD = "/usr/sbin/sshd"

// Server is a running sshd.
type Server struct {
	Dir            string
	Host           string // 127.0.0.1
	Port           int
	Addr           string // Host:Port
	User           string // the current user, whom the client key logs in as
	ClientKeyFile  string // an unencrypted ed25519 key in authorized_keys
	ClientKey      ssh.Signer
	KnownHostsFile string // holds the host key for [127.0.0.1]:Port
	HostKey        ssh.PublicKey
	// BinDir comes first in the PATH of every session, so a test can put
	// stand-ins for node tools (systemctl) there.
	BinDir string

	cmd    *exec.Cmd
	exited chan struct{}
	stderr *lockedBuffer
}

// Start starts sshd, skipping the test if it is not installed. Each of
// extra is a line added to its sshd_config.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	if _, err := os.Stat(SSHD); err != nil {
		t.Skipf("%s not found (install openssh-server): %v", SSHD, err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	// sshd's privilege separation needs its empty directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil && os.Geteuid() == 0 {
		t.Fatal(err)
	}
	becomeSubreaper()
	dir := t.TempDir()
	s := &Server{Dir: dir, Host: "127.0.0.1", User: u.Username}

	hostKeyFile := filepath.Join(dir, "ssh_host_ed25519_key")
	if s.HostKey, _, err = WriteKey(hostKeyFile); err != nil {
		t.Fatal(err)
	}
	s.ClientKeyFile = filepath.Join(dir, "id_ed25519")
	var clientPub ssh.PublicKey
	if clientPub, s.ClientKey, err = WriteKey(s.ClientKeyFile); err != nil {
		t.Fatal(err)
	}
	authorizedKeys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorizedKeys, ssh.MarshalAuthorizedKey(clientPub), 0o600); err != nil {
		t.Fatal(err)
	}

	s.BinDir = filepath.Join(dir, "bin")
	if err := os.MkdirAll(s.BinDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		cfgFile := filepath.Join(dir, "sshd_config")
		// HOME is the server's directory: bash started by sshd reads
		// ~/.bashrc, and what the test user keeps there is not the
		// node's. This machine's root runs pyenv's init there, twenty
		// processes per command: 15 CPU-seconds of this package's tests.
		cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
PrintMotd no
PrintLastLog no
LogLevel VERBOSE
SetEnv PATH=%s:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=%s
`, port, hostKeyFile, authorizedKeys, filepath.Join(dir, "sshd.pid"), s.BinDir, dir) + strings.Join(extra, "\n")
		if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if lastErr = s.start(cfgFile, port); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("start sshd: %v", lastErr)
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("sshd log:\n%s", s.stderr.String())
		}
	})

	s.KnownHostsFile = filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, s.HostKey) + "\n"
	if err := os.WriteFile(s.KnownHostsFile, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// start runs sshd on port and waits until it accepts connections.
func (s *Server) start(cfgFile string, port int) error {
	s.stderr = &lockedBuffer{}
	cmd := exec.Command(SSHD, "-D", "-e", "-f", cfgFile)
	cmd.Stdout = s.stderr
	cmd.Stderr = s.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("sshd exited: %s", s.stderr.String())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			return fmt.Errorf("sshd not listening on %s after 10s: %v\n%s", addr, err, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.cmd, s.Port, s.Addr = cmd, port, addr
	s.exited = exited
	return nil
}

// stop kills sshd's descendants, deepest first so each is reaped by its
// parent, then sshd itself. sshd processes orphaned meanwhile (a
// connection's process may exit before its child) come to this process,
// the subreaper, which reaps them: PID 1 of a container may never do it.
func (s *Server) stop() {
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		desc := descendants(pid)
		orphans := reapOrphans(pid)
		if len(desc) == 0 && orphans == 0 {
			break
		}
		for p, hasChildren := range desc {
			if !hasChildren && !zombie(p) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
	}
	for end := time.Now().Add(2 * time.Second); reapOrphans(0) > 0 && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	s.cmd = nil
}

var subreaper sync.Once

// becomeSubreaper makes orphaned descendants of this process its children.
func becomeSubreaper() {
	subreaper.Do(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
}

// reapOrphans reaps (or kills, to reap later) the sshd processes that are
// children of this process, other than master; it returns how many it saw.
func reapOrphans(master int) int {
	self := os.Getpid()
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == master {
			continue
		}
		if pp, ok := ppid(p); !ok || pp != self {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if !strings.HasPrefix(string(comm), "sshd") {
			continue
		}
		n++
		if zombie(p) {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(p, &ws, unix.WNOHANG, nil)
		} else {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	return n
}

// descendants maps each descendant of pid to whether it has children.
func descendants(pid int) map[int]bool {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := ppid(p); ok {
			parent[p] = pp
		}
	}
	out := map[int]bool{}
	var under func(p int) bool
	under = func(p int) bool {
		for i := 0; i < 64 && p > 1; i++ {
			p = parent[p]
			if p == pid {
				return true
			}
		}
		return false
	}
	for p := range parent {
		if under(p) {
			if _, ok := out[p]; !ok {
				out[p] = false
			}
			if pp := parent[p]; pp != pid {
				out[pp] = true
			}
		}
	}
	return out
}

func ppid(pid int) (int, bool) {
	st, err := procfs.ReadStat(pid)
	return st.PPID, err == nil
}

func zombie(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && st.Dead()
}

// WriteKey writes a new unencrypted ed25519 private key to path (0600) and
// returns its public key and signer.
func WriteKey(path string) (ssh.PublicKey, ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return signer.PublicKey(), signer, nil
}

func freePort() (int, error) {
	ports, err := hostports.Free(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// ClosedPort returns a 127.0.0.1 port nothing listens on (racy, as any).
func ClosedPort() (int, error) { return freePort() }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// WriteKubeconfig writes a kubeconfig whose current context "test" points
// at server (e.g. https://127.0.0.1:PORT) with a dummy token.
func WriteKubeconfig(path, server string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: test
  user:
    token: dummy
contexts:
- name: test
  context:
    cluster: test
    user: test
current-context: test
`, server)
	return os.WriteFile(path, []byte(cfg), 0o600)
}
