package kops

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/sshnode"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/timeouts"
)

var (
	_ nodes.Node           = (*Node)(nil)
	_ nodes.WithNotes      = (*Node)(nil)
	_ nodes.WithKubeletLog = (*Node)(nil)
)

// kubeletNode is the worker's kubelet as the provider drives it: a
// nodes.Node plus reading and putting back the node's own kubelet and
// reading which kubelet the unit really runs. Over SSH it is sshKubelet;
// tests of the EBS evidence put a fake behind it.
type kubeletNode interface {
	nodes.Node
	nodes.WithKubeletLog
	Original(ctx context.Context) (systemdkubelet.Original, error)
	Restore(ctx context.Context, sha256 string) error
	Running(ctx context.Context) (runningKubelet, error)
	// FindRootDir learns the kubelet's --root-dir from the running
	// kubelet, for KubeletRootDir.
	FindRootDir(ctx context.Context) error
}

// runningKubelet is the kubelet process the unit runs, as the node reports it.
type runningKubelet struct {
	PID    int
	SHA256 string // of /proc/<pid>/exe
	BootID string
}

// sshKubelet is a kops worker reached over SSH (clusters/internal/
// sshnode), its kubelet driven by the shared systemd driver with Layout.
type sshKubelet struct {
	*sshnode.Node
	d *systemdkubelet.Driver
}

// newSSHKubelet is the worker n with its kubelet laid out as Layout; the
// kubelet's waits stretch by factor, the run's timeout factor, as every
// provider's do (a node in an emulated guest starts its kubelet 10-18
// times slower).
func newSSHKubelet(n *sshnode.Node, log *slog.Logger, factor time.Duration) sshKubelet {
	return sshKubelet{Node: n, d: &systemdkubelet.Driver{Node: n, Layout: layout, Log: log,
		Timeout: timeouts.Scale(systemdkubelet.DefaultTimeout, factor)}}
}

func (s sshKubelet) KubeletRootDir() string                         { return s.d.Layout.RootDir }
func (s sshKubelet) StopKubelet(ctx context.Context) error          { return s.d.Stop(ctx) }
func (s sshKubelet) StartKubelet(ctx context.Context) error         { return s.d.Start(ctx) }
func (s sshKubelet) KubeletLog(ctx context.Context) (string, error) { return s.d.RunLog(ctx) }
func (s sshKubelet) SwapKubelet(ctx context.Context, bin binaries.Binary) error {
	return s.d.Swap(ctx, bin)
}

func (s sshKubelet) Original(ctx context.Context) (systemdkubelet.Original, error) {
	return s.d.Original(ctx)
}

func (s sshKubelet) Restore(ctx context.Context, sha string) error { return s.d.Restore(ctx, sha) }

// FindRootDir sets the layout's root directory to the --root-dir the
// unit's running kubelet was given, when it was given one: kops's nodeup
// leaves the default, /var/lib/kubelet, but where the kubelet keeps its
// pods is the running process's to say, not the layout's to assume.
func (s sshKubelet) FindRootDir(ctx context.Context) error {
	st, err := s.d.State(ctx)
	if err != nil || st.MainPID == 0 {
		return err
	}
	res, err := exec.Output(ctx, s, "cat", "/proc/"+strconv.Itoa(st.MainPID)+"/cmdline")
	if err != nil {
		return fmt.Errorf("read the kubelet's command line on %s: %w", s, err)
	}
	if dir := rootDirFlag(res.Stdout); dir != "" {
		s.d.Layout.RootDir = dir
	}
	return nil
}

// rootDirFlag is --root-dir's value in a NUL-separated command line.
func rootDirFlag(cmdline string) string {
	args := strings.Split(cmdline, "\x00")
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--root-dir="); ok {
			return v
		}
		if a == "--root-dir" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// runningScript prints the boot ID and the sha256 of the executable of
// PID $1.
const runningScript = `cat /proc/sys/kernel/random/boot_id && sha256sum "/proc/$1/exe"`

func (s sshKubelet) Running(ctx context.Context) (runningKubelet, error) {
	st, err := s.d.State(ctx)
	if err != nil {
		return runningKubelet{}, err
	}
	if st.MainPID == 0 {
		return runningKubelet{}, fmt.Errorf("kubelet unit on %s runs no process (%s)", s, st)
	}
	res, err := exec.Output(ctx, s, "sh", "-c", runningScript, "sh", strconv.Itoa(st.MainPID))
	if err != nil {
		return runningKubelet{}, err
	}
	lines := strings.Fields(res.Stdout)
	if len(lines) < 2 || len(lines[1]) != 64 {
		return runningKubelet{}, fmt.Errorf("read the running kubelet on %s: unexpected output %q", s, res.Stdout)
	}
	return runningKubelet{PID: st.MainPID, BootID: lines[0], SHA256: lines[1]}, nil
}

// Node is the kops cluster's worker. It implements nodes.Node through the
// shared systemd kubelet driver over SSH, and adds what AWS shows: the
// EBS attachments of the run's volumes before and after each hop (in the
// step's notes), and after each start a check that the unit runs the
// kubelet the harness installed (kops-configuration.service re-runs nodeup
// at boot, which puts kops's own kubelet back).
type Node struct {
	p        *provider
	k        kubeletNode
	instance workerInstance

	mu sync.Mutex
	// orig is the node's own kubelet, read before the first change.
	orig *systemdkubelet.Original
	// want is the sha256 of the kubelet the harness installed last.
	want   string
	bootID string
	notes  []string
	// before is the EBS snapshot taken at the last stop.
	before *ebsState
}

func newNode(p *provider, k kubeletNode, w workerInstance) *Node {
	return &Node{p: p, k: k, instance: w}
}

func (n *Node) String() string         { return n.k.String() }
func (n *Node) KubeletRootDir() string { return n.k.KubeletRootDir() }

// Command runs argv on the worker over SSH.
func (n *Node) Command(ctx context.Context, name string, args ...string) exec.Cmd {
	return n.k.Command(ctx, name, args...)
}

// KubeletLog is the journal of the kubelet unit's current invocation.
func (n *Node) KubeletLog(ctx context.Context) (string, error) { return n.k.KubeletLog(ctx) }

// Notes returns and clears the EBS evidence and reboot facts of the last
// start.
func (n *Node) Notes() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.notes
	n.notes = nil
	return out
}

func (n *Node) note(format string, args ...any) {
	n.mu.Lock()
	n.notes = append(n.notes, fmt.Sprintf(format, args...))
	n.mu.Unlock()
}

// StopKubelet records the node's own kubelet (first time only) and the
// run's EBS attachments, then stops the unit.
func (n *Node) StopKubelet(ctx context.Context) error {
	if err := n.recordOriginal(ctx); err != nil {
		return err
	}
	snap, err := n.p.ebsSnapshot(ctx, n.instance.ID, "before the kubelet stops")
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.before = &snap
	n.mu.Unlock()
	n.note("%s", snap)
	if r, err := n.k.Running(ctx); err == nil {
		n.mu.Lock()
		n.bootID = r.BootID
		n.mu.Unlock()
	}
	return n.k.StopKubelet(ctx)
}

func (n *Node) recordOriginal(ctx context.Context) error {
	n.mu.Lock()
	done := n.orig != nil
	n.mu.Unlock()
	if done {
		return nil
	}
	o, err := n.k.Original(ctx)
	if err != nil {
		return err
	}
	// While kops's kubelet still runs: where it keeps its pods.
	if err := n.k.FindRootDir(ctx); err != nil {
		return err
	}
	if dir := n.k.KubeletRootDir(); dir != layout.RootDir {
		n.p.log.Info("the worker's kubelet keeps its state outside kops's default", "rootDir", dir, "default", layout.RootDir)
	}
	n.mu.Lock()
	n.orig = &o
	if n.want == "" {
		n.want = o.SHA256
	}
	n.mu.Unlock()
	n.p.log.Info("recorded the worker's own kubelet (kops's)", "node", n.String(), "binary", o.Binary, "sha256", o.SHA256)
	return nil
}

// SwapKubelet puts bin on the node (sha256 checked there) through the
// shared driver.
func (n *Node) SwapKubelet(ctx context.Context, bin binaries.Binary) error {
	if err := n.recordOriginal(ctx); err != nil {
		return err
	}
	if err := n.k.SwapKubelet(ctx, bin); err != nil {
		return err
	}
	sum := bin.SHA256
	if sum == "" {
		var err error
		if sum, err = binaries.FileSHA256(bin.Path); err != nil {
			return err
		}
	}
	n.mu.Lock()
	n.want = strings.ToLower(sum)
	n.mu.Unlock()
	return nil
}

// StartKubelet starts the unit, checks that it runs the kubelet installed
// last (not one nodeup put back after a reboot), and checks the run's EBS
// attachments against those before the stop.
func (n *Node) StartKubelet(ctx context.Context) error {
	if err := n.k.StartKubelet(ctx); err != nil {
		return err
	}
	if err := n.VerifyKubelet(ctx); err != nil {
		return err
	}
	n.mu.Lock()
	before := n.before
	n.mu.Unlock()
	after, err := n.p.ebsSettled(ctx, n.instance.ID, "after the kubelet started")
	n.note("%s", after)
	if err != nil {
		return err
	}
	if before != nil {
		return checkAttachments(*before, after)
	}
	return nil
}

// VerifyKubelet checks that the kubelet unit runs the binary the harness
// installed last. After a reboot kops-configuration.service has run
// nodeup again, which reinstalls kops's own kubelet: that is an error
// naming both sums, not a silent hop on the wrong version.
func (n *Node) VerifyKubelet(ctx context.Context) error {
	r, err := n.k.Running(ctx)
	if err != nil {
		return fmt.Errorf("which kubelet runs on %s: %w", n, err)
	}
	n.mu.Lock()
	want, boot := n.want, n.bootID
	n.bootID = r.BootID
	n.mu.Unlock()
	if boot != "" && r.BootID != boot {
		n.note("node %s rebooted (boot ID %s, was %s): kops-configuration.service re-ran nodeup; the running kubelet's sha256 is checked", n, r.BootID, boot)
	}
	if want != "" && !strings.EqualFold(r.SHA256, want) {
		return fmt.Errorf("kubelet on %s (pid %d) has sha256 %s, not the %s installed last: after a reboot nodeup (kops-configuration.service) reinstalls kops's own kubelet", n, r.PID, r.SHA256, want)
	}
	return nil
}

// install starts the node at bin: stop, swap, start. Up uses it for the
// plan's first kubelet.
func (n *Node) install(ctx context.Context, bin binaries.Binary) error {
	if err := n.StopKubelet(ctx); err != nil {
		return err
	}
	if err := n.SwapKubelet(ctx, bin); err != nil {
		return err
	}
	return n.StartKubelet(ctx)
}

// restore puts kops's own kubelet back, if the run changed it.
func (n *Node) restore(ctx context.Context) error {
	n.mu.Lock()
	o := n.orig
	n.mu.Unlock()
	if o == nil {
		return nil
	}
	if err := n.k.Restore(ctx, o.SHA256); err != nil {
		return err
	}
	n.mu.Lock()
	n.want = o.SHA256
	n.mu.Unlock()
	return nil
}
