package existing

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/existing/internal/sshdtest"
	"sigs.k8s.io/skewtest/clusters/internal/filetest"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/workloads"
)

// restoreRig is a test sshd whose PATH has a fake systemd node, a fake API
// server whose node w1 follows that node's unit, and a provider config
// with a state directory.
type restoreRig struct {
	srv   *sshdtest.Server
	fn    *fakeNode
	api   *fakeAPIServer
	cfg   Config
	cache string
	// own is the content of the node's own kubelet.
	own string
}

func newRestoreRig(t *testing.T) *restoreRig {
	t.Helper()
	r := &restoreRig{srv: sshdtest.Start(t), api: &fakeAPIServer{}, cache: t.TempDir(), own: "kubelet v1.37.2"}
	r.fn = newFakeNode(t, r.srv, r.own)
	url := r.api.start(t)
	r.api.setNodes(apiNode("w1", true, "127.0.0.1", nil))
	r.api.backBy("w1", r.fn)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := sshdtest.WriteKubeconfig(kc, url); err != nil {
		t.Fatal(err)
	}
	r.cfg = Config{
		Kubeconfig:     kc,
		KubeletBinary:  r.fn.Binary,
		KubeletRootDir: r.fn.Root,
		RunID:          "run-1",
		StateDir:       filepath.Join(t.TempDir(), "existing-run-1"),
		Logger:         slog.New(slog.NewTextHandler(t.Output(), nil)),
		SSH: SSHConfig{
			User: r.srv.User, Port: r.srv.Port, KeyFile: r.srv.ClientKeyFile, KnownHostsFile: r.srv.KnownHostsFile, Timeout: 5 * time.Second,
		},
	}
	return r
}

// context bounds a test on the rig: a safety net sized for the SSH
// sessions of a whole hop and restore on a loaded machine (4 s each at
// load 25), not a speed check.
// up makes the provider from the rig's settings, brings it up and returns
// it with its test nodes.
func (r *restoreRig) up(ctx context.Context, t *testing.T) (*provider, []nodes.Node) {
	t.Helper()
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
	return p, ns
}

func (r *restoreRig) context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// assertRestored checks that w1 runs its own kubelet again, Ready through
// the API server, with nothing of the run left.
func (r *restoreRig) assertRestored(t *testing.T) {
	t.Helper()
	filetest.AssertContent(t, r.fn.Binary, r.own, 0o755)
	filetest.AssertMissing(t, r.fn.Binary+systemdkubelet.OrigSuffix)
	filetest.AssertMissing(t, r.fn.Binary+systemdkubelet.NewSuffix)
	filetest.AssertMissing(t, r.fn.Root+systemdkubelet.StateSuffix)
	if v := r.fn.running(); v != "v1.37.2" {
		t.Errorf("the node runs kubelet %q, want its own v1.37.2", v)
	}
	filetest.AssertMissing(t, r.cfg.StateDir)
}

// A hop that fails after the swap (here: the run just stops there) is
// undone by Down: the node's own kubelet runs again and the node is Ready.
func TestDownRestoresAfterAFailedHop(t *testing.T) {
	for _, tt := range []struct {
		name string
		swap bool
	}{{"stopped and swapped", true}, {"stopped only", false}} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRestoreRig(t)
			ctx := r.context(t)
			p, ns := r.up(ctx, t)
			n := ns[0]
			if err := n.StopKubelet(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := readState(r.cfg.StateDir)
			if err != nil {
				t.Fatalf("no state after the first stop: %v", err)
			}
			if len(st.Nodes) != 1 || st.Nodes[0].Name != "w1" || st.Nodes[0].OriginalSHA256 != binSHA(t, r.fn.Binary) || st.Nodes[0].OriginalVersion != "v1.37.2" {
				t.Errorf("state before the swap = %+v", st.Nodes)
			}
			if tt.swap {
				if err := n.SwapKubelet(ctx, newBinary(t, r.cache, "v1.36.3", "kubelet v1.36.3")); err != nil {
					t.Fatal(err)
				}
			}
			if r.fn.running() != "" {
				t.Fatalf("the unit runs %q mid-hop", r.fn.running())
			}
			if err := p.Down(ctx); err != nil {
				t.Fatalf("Down: %v", err)
			}
			r.assertRestored(t)
		})
	}
}

// Down does not pretend: a node whose own kubelet cannot be put back is an
// error naming it and the state directory, which stays for a clean.
func TestDownReportsAFailedRestore(t *testing.T) {
	r := newRestoreRig(t)
	ctx := r.context(t)
	p, err := newProvider(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	ns, _ := p.TestNodes(ctx)
	if err := ns[0].StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ns[0].SwapKubelet(ctx, newBinary(t, r.cache, "v1.36.3", "kubelet v1.36.3")); err != nil {
		t.Fatal(err)
	}
	// Someone replaces the kept original.
	filetest.Write(t, r.fn.Binary+systemdkubelet.OrigSuffix, "kubelet v9.9.9 tampered", 0o755)
	err = p.Down(ctx)
	if err == nil || !strings.Contains(err.Error(), "w1") || !strings.Contains(err.Error(), "skewtest clean "+r.cfg.StateDir) {
		t.Fatalf("Down = %v", err)
	}
	if _, err := readState(r.cfg.StateDir); err != nil {
		t.Errorf("the state is gone after a failed restore: %v", err)
	}
}

const helperEnv = "SKEWTEST_EXISTING_KILL_HELPER"

// The killed harness ran two scenarios (a batch's jobs), each in a
// namespace it made, and had recorded a third it was about to make when
// someone else's of that name appeared.
const (
	killedNamespace  = "skewtest-run-1-1-killed"
	killedNamespace2 = "skewtest-run-1-2-killed"
	foreignNamespace = "skewtest-run-1-3-foreign"
)

// TestKilledMidHopThenClean kills a harness with SIGKILL between the swap
// and the start of a hop, then runs `skewtest clean`'s code on the state
// directory it left, which must put the node's own kubelet back, running
// and Ready through the API server, and then remove the namespace the
// run's scenarios made in the cluster, each by its own record, and
// nothing else: not the owner's, nor one of a recorded name that does not
// carry the run's label.
func TestKilledMidHopThenClean(t *testing.T) {
	r := newRestoreRig(t)
	for _, ns := range []string{killedNamespace, killedNamespace2} {
		r.api.addNamespace(ns, workloads.Labels(r.cfg.RunID))
	}
	r.api.addNamespace(foreignNamespace, nil)
	r.api.addNamespace("owners", nil)
	ctx := r.context(t)
	bin := newBinary(t, r.cache, "v1.36.3", "kubelet v1.36.3")
	c := r.cfg
	hc := helperConfig{Kubeconfig: c.Kubeconfig, KubeletBinary: c.KubeletBinary, KubeletRootDir: c.KubeletRootDir, RunID: c.RunID, StateDir: c.StateDir,
		User: c.SSH.User, Port: c.SSH.Port, KeyFile: c.SSH.KeyFile, KnownHostsFile: c.SSH.KnownHostsFile,
		Binary: bin.Path, SHA256: bin.SHA256}
	cfg, err := json.Marshal(hc)
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.CommandContext(ctx, os.Args[0], "-test.run=^TestKillHelper$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(cfg))
	cmd.Stderr = t.Output()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killWhenSwapped(t, cmd, out)

	// What the killed run left: the swapped binary, the unit stopped, the
	// original kept, and the state naming it.
	filetest.AssertContent(t, r.fn.Binary, "kubelet v1.36.3", 0o755)
	filetest.AssertContent(t, r.fn.Binary+systemdkubelet.OrigSuffix, "kubelet v1.37.2", 0o755)
	if r.fn.running() != "" {
		t.Errorf("the unit runs %q after the kill", r.fn.running())
	}
	st, err := readState(r.cfg.StateDir)
	if err != nil || len(st.Nodes) != 1 || st.Nodes[0].OriginalVersion != "v1.37.2" {
		t.Fatalf("state after the kill = %+v, %v", st, err)
	}
	if len(st.Workloads) != 3 {
		t.Fatalf("the state after the kill records the workloads %+v, want one per scenario", st.Workloads)
	}

	r.fn.calls()
	if err := Descriptor.Clean(ctx, r.cfg.StateDir); err != nil {
		t.Fatalf("clean: %v", err)
	}
	r.assertRestored(t)
	if calls := r.fn.calls(); !strings.Contains(calls, "stop kubelet") || !strings.Contains(calls, "start kubelet") {
		t.Errorf("clean's systemctl calls:\n%s", calls)
	}
	if got := r.api.deletedNamespaces(); !slices.Equal(got, []string{killedNamespace, killedNamespace2}) {
		t.Errorf("clean deleted the namespaces %q, want only the run's %s and %s", got, killedNamespace, killedNamespace2)
	}
	if _, err := os.Stat(r.cfg.StateDir); !os.IsNotExist(err) {
		t.Errorf("the state directory after clean: %v", err)
	}
	// A second clean finds nothing to do.
	if err := Descriptor.Clean(ctx, r.cfg.StateDir); err != nil {
		t.Errorf("second clean: %v", err)
	}
}

// helperConfig is what the killed harness is told: the provider's
// settings and the kubelet to swap in.
type helperConfig struct {
	Kubeconfig, KubeletBinary, KubeletRootDir string
	RunID, StateDir                           string
	User, KeyFile, KnownHostsFile             string
	Port                                      int
	Binary, SHA256                            string
}

// TestKillHelper is the harness TestKilledMidHopThenClean kills; it does
// nothing unless that test runs it.
func TestKillHelper(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		return
	}
	var hc helperConfig
	if err := json.Unmarshal([]byte(raw), &hc); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := newProvider(Config{
		Kubeconfig: hc.Kubeconfig, KubeletBinary: hc.KubeletBinary, KubeletRootDir: hc.KubeletRootDir, RunID: hc.RunID, StateDir: hc.StateDir,
		SSH:    SSHConfig{User: hc.User, Port: hc.Port, KeyFile: hc.KeyFile, KnownHostsFile: hc.KnownHostsFile},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
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
	// Two scenarios deployed their workloads in namespaces they made; a
	// third recorded its namespace and was killed before its create.
	for _, ns := range []string{killedNamespace, killedNamespace2, foreignNamespace} {
		if err := p.RecordWorkload(workloads.Record{Run: hc.RunID, Namespace: ns, OwnsNamespace: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ns[0].StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ns[0].SwapKubelet(ctx, newBinaryAt(hc.Binary, hc.SHA256)); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("SWAPPED\n")
	time.Sleep(time.Hour) // until killed
}

func newBinaryAt(path, sum string) binaries.Binary {
	return binaries.Binary{Component: "kubelet", Version: "v1.36.3", Path: path, SHA256: sum}
}

// killWhenSwapped waits for the helper run cmd to print SWAPPED on out
// (its kubelet swapped mid-hop), SIGKILLs it there, and requires that it
// died of the signal, as a harness killed mid-hop would.
func killWhenSwapped(t *testing.T, cmd *osexec.Cmd, out io.Reader) {
	t.Helper()
	sc := bufio.NewScanner(out)
	swapped := false
	for sc.Scan() {
		t.Logf("helper: %s", sc.Text())
		if sc.Text() == "SWAPPED" {
			swapped = true
			break
		}
	}
	if !swapped {
		cmd.Wait()
		t.Fatal("the helper never swapped")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	var ee *osexec.ExitError
	if !errors.As(werr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want SIGKILL", werr)
	}
}
