package existing

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/existing/internal/sshdtest"
	"sigs.k8s.io/skewtest/clusters/internal/filetest"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/registry"
)

var (
	_ registry.Provider = (*provider)(nil)
	_ nodes.Node        = (*Node)(nil)
)

// closedAPIServer returns a kubeconfig pointing at a port nothing listens on.
func closedAPIServer(t *testing.T) (path, server string) {
	t.Helper()
	port, err := sshdtest.ClosedPort()
	if err != nil {
		t.Fatal(err)
	}
	server = "https://127.0.0.1:" + strconv.Itoa(port)
	path = filepath.Join(t.TempDir(), "kubeconfig")
	if err := sshdtest.WriteKubeconfig(path, server); err != nil {
		t.Fatal(err)
	}
	return path, server
}

// sshProvider makes a provider logging in to srv with its client key.
func sshProvider(t *testing.T, srv *sshdtest.Server, mutate func(*Config)) *provider {
	t.Helper()
	kc, _ := closedAPIServer(t)
	cfg := Config{
		Kubeconfig: kc,
		SSH: SSHConfig{
			User:           srv.User,
			Port:           srv.Port,
			KeyFile:        srv.ClientKeyFile,
			KnownHostsFile: srv.KnownHostsFile,
			Timeout:        5 * time.Second,
		},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := newProvider(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Down(context.Background()); err != nil {
			t.Errorf("Down: %v", err)
		}
	})
	return p
}

// testContext bounds a test against a real sshd. It is a safety net, not a
// speed check: at load 15 one minute was not enough for TestCommand's 20
// parallel sessions.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	kc, _ := closedAPIServer(t)
	key := filepath.Join(dir, "id")
	if _, _, err := sshdtest.WriteKey(key); err != nil {
		t.Fatal(err)
	}
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ok := func() Config {
		return Config{Kubeconfig: kc, SSH: SSHConfig{KeyFile: key, KnownHostsFile: kh}}
	}
	missing := filepath.Join(dir, "no-such-kubeconfig")
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   []string
	}{
		{"no kubeconfig", func(c *Config) { c.Kubeconfig = "" }, []string{"Kubeconfig is required"}},
		{"missing kubeconfig", func(c *Config) { c.Kubeconfig = missing }, []string{missing}},
		{"unknown context", func(c *Config) { c.Context = "nope" }, []string{kc, `no context "nope"`, "test"}},
		{"missing key", func(c *Config) { c.SSH.KeyFile = filepath.Join(dir, "nokey") }, []string{filepath.Join(dir, "nokey")}},
		{"missing known_hosts", func(c *Config) { c.SSH.KnownHostsFile = filepath.Join(dir, "nokh") }, []string{filepath.Join(dir, "nokh"), "ssh-keyscan"}},
		{"no credentials", func(c *Config) { c.SSH.KeyFile = ""; t.Setenv("SSH_AUTH_SOCK", "") }, []string{"SSH.KeyFile", "SSH_AUTH_SOCK"}},
		{"relative binary", func(c *Config) { c.KubeletBinary = "kubelet" }, []string{"absolute"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok()
			tc.mutate(&cfg)
			_, err := newProvider(cfg)
			if err == nil {
				t.Fatal("New succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := newProvider(ok()); err != nil {
		t.Fatalf("valid config: %v", err)
	}
}

func TestUpUnreachableAPIServer(t *testing.T) {
	dir := t.TempDir()
	kc, server := closedAPIServer(t)
	key := filepath.Join(dir, "id")
	if _, _, err := sshdtest.WriteKey(key); err != nil {
		t.Fatal(err)
	}
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(Config{Kubeconfig: kc, SSH: SSHConfig{KeyFile: key, KnownHostsFile: kh}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	err = p.Up(ctx)
	t.Logf("Up: %v", err)
	want := fmt.Sprintf("API server %s from kubeconfig %s unreachable", server, kc)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Up = %v, want an error containing %q", err, want)
	}
	up, err := p.IsUp(ctx)
	if up || err != nil {
		t.Errorf("IsUp = %v, %v; want false, nil", up, err)
	}
	if _, err := p.ServerVersion(ctx); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ServerVersion = %v, want %q", err, want)
	}
	if p.KubeconfigPath() != kc || p.Name() != "existing" {
		t.Errorf("KubeconfigPath, Name = %q, %q", p.KubeconfigPath(), p.Name())
	}
	rc, err := p.RESTConfig()
	if err != nil || rc.Host != server {
		t.Errorf("RESTConfig = %v, %v; want host %s", rc, err, server)
	}
	if err := p.Down(ctx); err != nil {
		t.Errorf("Down: %v", err)
	}
}

func TestCommand(t *testing.T) {
	srv := sshdtest.Start(t)
	p := sshProvider(t, srv, nil)
	n := p.Node("node-a", srv.Addr)
	ctx := testContext(t)

	t.Run("exit code and output", func(t *testing.T) {
		res, err := exec.Output(ctx, n, "sh", "-c", "echo hi; echo err >&2; exit 3")
		var re *exec.RunError
		if !errors.As(err, &re) {
			t.Fatalf("err = %v (%T), want *exec.RunError", err, err)
		}
		if res.Stdout != "hi\n" || res.Stderr != "err\n" || res.ExitCode != 3 || exec.ExitCode(err) != 3 {
			t.Errorf("got stdout %q stderr %q code %d (%d), want hi, err, 3", res.Stdout, res.Stderr, res.ExitCode, exec.ExitCode(err))
		}
		if res.Node != "node-a" || !strings.Contains(err.Error(), "exited 3") {
			t.Errorf("node %q, error %q", res.Node, err)
		}
	})

	t.Run("argv quoting", func(t *testing.T) {
		args := []string{"a b", "it's", "$HOME", `"q"`, "", "semi;colon", "*"}
		res, err := exec.Output(ctx, n, append([]string{"printf", `%s|`}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Join(args, "|") + "|"; res.Stdout != want {
			t.Errorf("stdout %q, want %q", res.Stdout, want)
		}
	})

	t.Run("env", func(t *testing.T) {
		var out bytes.Buffer
		err := n.Command(ctx, "sh", "-c", `printf '%s/%s' "$FOO" "$BAR"`).SetEnv("FOO=bar baz", "BAR=it's").SetStdout(&out).Run()
		if err != nil {
			t.Fatal(err)
		}
		if out.String() != "bar baz/it's" {
			t.Errorf("stdout %q", out.String())
		}
	})

	t.Run("stdin", func(t *testing.T) {
		data := make([]byte, 3<<20)
		if _, err := rand.Read(data); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := n.Command(ctx, "cat").SetStdin(bytes.NewReader(data)).SetStdout(&out).Run(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), data) {
			t.Errorf("cat returned %d bytes, sent %d (or they differ)", out.Len(), len(data))
		}
		// A command that does not read its stdin still succeeds.
		if err := n.Command(ctx, "true").SetStdin(bytes.NewReader(data)).Run(); err != nil {
			t.Errorf("true with unread stdin: %v", err)
		}
	})

	t.Run("cancel kills the command", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			done <- n.Command(cctx, "sh", "-c", `echo $$ > "$1"; exec sleep 30`, "sh", pidFile).Run()
		}()
		pid := waitPID(t, pidFile)
		cancel()
		var err error
		select {
		case err = <-done:
		case <-time.After(15 * time.Second):
			t.Fatal("Run did not return 15s after cancel")
		}
		t.Logf("returned %v after start: %v", time.Since(start), err)
		if !errors.Is(err, context.Canceled) || exec.ExitCode(err) != -1 {
			t.Errorf("err = %v (code %d), want context.Canceled and code -1", err, exec.ExitCode(err))
		}
		// sshd sent SIGKILL to the command's process group.
		deadline := time.Now().Add(10 * time.Second)
		for processAlive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("remote sleep (pid %d) still runs after cancel", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The connection is still usable.
		if _, err := exec.Output(ctx, n, "true"); err != nil {
			t.Errorf("command after cancel: %v", err)
		}
	})

	t.Run("cancelled before run", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := n.Command(cctx, "true").Run()
		if !errors.Is(err, context.Canceled) || exec.ExitCode(err) != -1 {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("reconnects after Down", func(t *testing.T) {
		if err := p.Down(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := exec.Output(ctx, n, "true"); err != nil {
			t.Errorf("command after Down: %v", err)
		}
	})

	t.Run("parallel", func(t *testing.T) {
		errs := make(chan error, 20)
		for i := range 20 {
			go func() {
				res, err := exec.Output(ctx, n, "echo", strconv.Itoa(i))
				if err == nil && res.Stdout != strconv.Itoa(i)+"\n" {
					err = fmt.Errorf("stdout %q", res.Stdout)
				}
				errs <- err
			}()
		}
		for range 20 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}

func waitPID(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("remote command did not write %s", file)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || !bytes.HasPrefix(bytes.TrimSpace(b[i+1:]), []byte("Z"))
}

func TestUnknownHostKey(t *testing.T) {
	srv := sshdtest.Start(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p := sshProvider(t, srv, func(c *Config) { c.SSH.KnownHostsFile = empty })
	err := connectFails(t, p.Node("node-a", srv.Addr), "connected to an unknown host", "node-a", srv.Addr, "not in known_hosts "+empty, fmt.Sprintf("ssh-keyscan -p %d 127.0.0.1 >> %s", srv.Port, empty))
	if exec.ExitCode(err) != -1 {
		t.Errorf("exit code %d, want -1", exec.ExitCode(err))
	}
}

func TestChangedHostKey(t *testing.T) {
	srv := sshdtest.Start(t)
	dir := t.TempDir()
	other, _, err := sshdtest.WriteKey(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	kh := writeKnownHost(t, dir, srv.Port, other)
	p := sshProvider(t, srv, func(c *Config) { c.SSH.KnownHostsFile = kh })
	connectFails(t, p.Node("node-a", srv.Addr), "connected despite a changed host key", "does NOT match", kh, "ssh-keygen", "ssh-keyscan")
}

func TestWrongKey(t *testing.T) {
	srv := sshdtest.Start(t)
	wrong := filepath.Join(t.TempDir(), "wrong")
	if _, _, err := sshdtest.WriteKey(wrong); err != nil {
		t.Fatal(err)
	}
	p := sshProvider(t, srv, func(c *Config) { c.SSH.KeyFile = wrong })
	connectFails(t, p.Node("node-a", srv.Addr), "logged in with a key not in authorized_keys", "node-a", srv.Addr, fmt.Sprintf("user %q", srv.User), "authentication", wrong, "authorized_keys")
}

func TestAgentAuth(t *testing.T) {
	srv := sshdtest.Start(t)
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: mustParseKey(t, srv.ClientKeyFile)}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _ = agent.ServeAgent(keyring, c); c.Close() }()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
	p := sshProvider(t, srv, func(c *Config) { c.SSH.KeyFile = "" })
	res, err := exec.Output(testContext(t), p.Node("node-a", srv.Addr), "echo", "via agent")
	if err != nil || res.Stdout != "via agent\n" {
		t.Fatalf("got %q, %v", res.Stdout, err)
	}
}

func TestUnreachablePort(t *testing.T) {
	srv := sshdtest.Start(t) // for its keys; the node points elsewhere
	port, err := sshdtest.ClosedPort()
	if err != nil {
		t.Fatal(err)
	}
	p := sshProvider(t, srv, func(c *Config) { c.SSH.Port = port })
	n := p.Node("node-b", "127.0.0.1")
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if n.Address() != addr {
		t.Errorf("Address = %q, want %q", n.Address(), addr)
	}
	err = connectFails(t, n, "connected to a closed port", "node-b", addr, "SSH.Address")
	if exec.ExitCode(err) != -1 {
		t.Errorf("exit code %d, want -1", exec.ExitCode(err))
	}
}

func TestSwapRestoreKubelet(t *testing.T) {
	r := newRestoreRig(t)
	ctx := r.context(t)
	fn, dir := r.fn, r.cache
	p, err := newProvider(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	ns, err := p.TestNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := ns[0]

	v1 := newBinary(t, dir, "v1.35.0", "kubelet v1.35.0")
	v2 := newBinary(t, dir, "v1.36.0", "kubelet v1.36.0\n"+strings.Repeat("x", 2<<20))

	if err := n.StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.SwapKubelet(ctx, v1); err != nil {
		t.Fatal(err)
	}
	filetest.AssertContent(t, fn.Binary, "kubelet v1.35.0", 0o755)
	filetest.AssertContent(t, fn.Binary+systemdkubelet.OrigSuffix, "kubelet v1.37.2", 0o755)
	filetest.AssertMissing(t, fn.Binary+systemdkubelet.NewSuffix)
	if err := n.StartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	if fn.running() != "v1.35.0" {
		t.Errorf("running %q after the start, want v1.35.0", fn.running())
	}

	if err := n.StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.SwapKubelet(ctx, v2); err != nil {
		t.Fatal(err)
	}
	filetest.AssertContent(t, fn.Binary+systemdkubelet.OrigSuffix, "kubelet v1.37.2", 0o755)

	bad := v1
	bad.SHA256 = strings.Repeat("0", 64)
	err = n.SwapKubelet(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "sha256") || !strings.Contains(err.Error(), "w1") {
		t.Errorf("swap with wrong sha256 = %v", err)
	}
	filetest.AssertMissing(t, fn.Binary+systemdkubelet.NewSuffix)

	// A kubelet that exits at once is reported with its journal.
	crash := newBinary(t, dir, "v1.34.0", "kubelet v1.34.0 crash")
	if err := n.SwapKubelet(ctx, crash); err != nil {
		t.Fatal(err)
	}
	err = n.StartKubelet(ctx)
	if err == nil || !strings.Contains(err.Error(), "systemd restarted it") || !strings.Contains(err.Error(), "flag provided but not defined") {
		t.Errorf("start of a crashing kubelet = %v", err)
	}

	if err := p.Down(ctx); err != nil {
		t.Fatal(err)
	}
	r.assertRestored(t)
}

func newBinary(t *testing.T, dir, version, content string) binaries.Binary {
	t.Helper()
	path := filepath.Join(dir, version)
	filetest.Write(t, path, content, 0o644)
	return binaries.Binary{Component: "kubelet", Version: version, Path: path, SHA256: binSHA(t, path)}
}

func binSHA(t *testing.T, path string) string {
	t.Helper()
	sum, err := binaries.FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// connectFails runs `true` on n, which must fail (why says why it should)
// with an error that mentions each of wants; it returns that error.
func connectFails(t *testing.T, n exec.Cmder, why string, wants ...string) error {
	t.Helper()
	_, err := exec.Output(testContext(t), n, "true")
	if err == nil {
		t.Fatal(why)
	}
	t.Logf("error: %v", err)
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	return err
}

// writeKnownHost writes dir/known_hosts naming key as the host key of the
// test sshd on 127.0.0.1:port.
func writeKnownHost(t *testing.T, dir string, port int, key ssh.PublicKey) string {
	t.Helper()
	kh := filepath.Join(dir, "known_hosts")
	line := fmt.Sprintf("[127.0.0.1]:%d %s", port, strings.TrimSpace(string(marshal(key))))
	if err := os.WriteFile(kh, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return kh
}

func marshal(k ssh.PublicKey) []byte { return ssh.MarshalAuthorizedKey(k) }

func mustParseKey(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestHostKeyTypeNotOffered(t *testing.T) {
	srv := sshdtest.Start(t)
	dir := t.TempDir()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	kh := writeKnownHost(t, dir, srv.Port, pub)
	p := sshProvider(t, srv, func(c *Config) { c.SSH.KnownHostsFile = kh })
	connectFails(t, p.Node("node-a", srv.Addr), "connected although known_hosts has only an RSA key the node lacks", "node-a", kh, "ssh-keygen", "rsa")
}

func apiNode(name string, ready bool, ip string, labels map[string]string) corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Test", Message: "set by test"}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		},
	}
}

func TestUpWithFakeAPIServer(t *testing.T) {
	srv := sshdtest.Start(t)
	api := &fakeAPIServer{}
	url := api.start(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := sshdtest.WriteKubeconfig(kc, url); err != nil {
		t.Fatal(err)
	}
	closed, err := sshdtest.ClosedPort()
	if err != nil {
		t.Fatal(err)
	}
	newFakeNode(t, srv, "kubelet v1.36.3")
	newP := func(mutate func(*Config)) *provider {
		return sshProvider(t, srv, func(c *Config) {
			c.Kubeconfig = kc
			if mutate != nil {
				mutate(c)
			}
		})
	}
	ctx := testContext(t)
	cp := apiNode("cp", true, "127.0.0.1", map[string]string{"node-role.kubernetes.io/control-plane": ""})

	t.Run("workers by default, address from InternalIP", func(t *testing.T) {
		api.setNodes(cp, apiNode("w1", true, "127.0.0.1", nil))
		p := newP(nil)
		if err := p.Up(ctx); err != nil {
			t.Fatalf("Up: %v", err)
		}
		v, err := p.ServerVersion(ctx)
		if err != nil || v.String() != "1.36.3" {
			t.Errorf("ServerVersion = %v, %v", v, err)
		}
		if up, err := p.IsUp(ctx); !up || err != nil {
			t.Errorf("IsUp = %v, %v", up, err)
		}
		ns, err := p.TestNodes(ctx)
		if err != nil || len(ns) != 1 || ns[0].String() != "w1" {
			t.Fatalf("TestNodes = %v, %v; want [w1]", ns, err)
		}
		if a := ns[0].(*Node).Address(); a != srv.Addr {
			t.Errorf("w1 address %q, want %q", a, srv.Addr)
		}
		if ns[0].KubeletRootDir() != defaultKubeletRootDir {
			t.Errorf("KubeletRootDir = %q", ns[0].KubeletRootDir())
		}
		out := t.TempDir()
		if err := p.DumpClusterLogs(ctx, out); err != nil {
			t.Errorf("DumpClusterLogs: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(out, "w1", "kubelet.log")); err != nil || !strings.Contains(string(b), "journal of kubelet") {
			t.Errorf("w1 kubelet.log = %q, %v", b, err)
		}
	})

	t.Run("not ready", func(t *testing.T) {
		api.setNodes(cp, apiNode("w1", false, "127.0.0.1", nil))
		err := newP(nil).Up(ctx)
		t.Logf("Up: %v", err)
		if err == nil || !strings.Contains(err.Error(), "node w1 is not Ready") {
			t.Errorf("Up = %v", err)
		}
	})

	t.Run("named nodes, Address, one unreachable", func(t *testing.T) {
		api.setNodes(cp, apiNode("w1", true, "10.255.0.1", nil), apiNode("w2", true, "10.255.0.2", nil))
		p := newP(func(c *Config) {
			c.Nodes = []string{"w2", "cp"}
			c.SSH.Address = func(name string) string {
				switch name {
				case "cp":
					return srv.Addr
				case "w2":
					return "127.0.0.1:" + strconv.Itoa(closed)
				}
				return ""
			}
		})
		err := p.Up(ctx)
		t.Logf("Up: %v", err)
		if err == nil || !strings.Contains(err.Error(), "node w2 at 127.0.0.1:"+strconv.Itoa(closed)) || strings.Contains(err.Error(), " on cp") {
			t.Errorf("Up = %v, want an error for w2 only", err)
		}
	})

	t.Run("unknown named node", func(t *testing.T) {
		api.setNodes(cp, apiNode("w1", true, "127.0.0.1", nil))
		err := newP(func(c *Config) { c.Nodes = []string{"ghost"} }).Up(ctx)
		if err == nil || !strings.Contains(err.Error(), "ghost") {
			t.Errorf("Up = %v", err)
		}
	})
}

// TestSessionsQueueAtTheServersLimit: a node whose sshd allows fewer
// sessions per connection than skewtest opens at once (MaxSessions 2, as
// hardened configurations have it) still runs every one of many parallel
// commands: a session the server refuses is retried, not a failed step.
// The default MaxSessions (10) meets the same refusal when sessions close
// and open quickly, since sshd counts a session until it has processed
// its close.
func TestSessionsQueueAtTheServersLimit(t *testing.T) {
	srv := sshdtest.Start(t, "MaxSessions 2")
	ctx := t.Context()
	p := sshProvider(t, srv, nil)
	n := p.Node("node-a", srv.Addr)
	const commands = 24
	errs := make(chan error, commands)
	for i := range commands {
		go func() {
			res, err := exec.Output(ctx, n, "echo", strconv.Itoa(i))
			if err == nil && res.Stdout != strconv.Itoa(i)+"\n" {
				err = fmt.Errorf("stdout %q", res.Stdout)
			}
			errs <- err
		}()
	}
	for range commands {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
