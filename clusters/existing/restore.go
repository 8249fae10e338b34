package existing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"sigs.k8s.io/skewtest/clusters/conditions"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
	"sigs.k8s.io/skewtest/clusters/timeouts"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/reports"
)

// readyTimeout bounds the wait for a restored node to report Ready through
// the API server, after its kubelet already answers /healthz.
const readyTimeout = 3 * time.Minute

// restoreAll puts back the own kubelet of every node the state records, in
// parallel, and drops each node from the state once it runs and its node
// is Ready through the API server. With every node back, the state
// directory goes, unless the run's workload is still to be removed.
func (p *provider) restoreAll(ctx context.Context) error {
	p.stateMu.Lock()
	recs := slices.Clone(p.state.Nodes)
	p.stateMu.Unlock()
	errs := make([]error, len(recs))
	var wg sync.WaitGroup
	for i, rec := range recs {
		wg.Go(func() { errs[i] = p.restoreNode(ctx, rec) })
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err != nil && p.cfg.StateDir != "" {
		err = fmt.Errorf("%w\nthe state is kept in %s: fix the node, then run `skewtest clean %s` to put its kubelet back", err, p.cfg.StateDir, p.cfg.StateDir)
	}
	if err == nil {
		// Every node is back; the state ends unless a workload is left.
		p.stateMu.Lock()
		rerr := p.saveLocked(p.state)
		p.stateMu.Unlock()
		if rerr != nil {
			err = fmt.Errorf("existing: the state directory: %w", rerr)
		}
	}
	return err
}

// restoreNode puts rec's node's own kubelet back and waits until the node
// is Ready, at its own kubelet's version, through the API server.
func (p *provider) restoreNode(ctx context.Context, rec nodeState) error {
	n := p.Node(rec.Name, rec.Address)
	d := *n.driver
	d.Layout = rec.layout()
	if err := rec.checkKept(d.Layout); err != nil {
		return fmt.Errorf("restore kubelet on %s: %w", rec.Name, err)
	}
	if err := p.removeUpload(ctx, n, rec.Binary+systemdkubelet.NewSuffix); err != nil {
		return fmt.Errorf("restore kubelet on %s: %w", rec.Name, err)
	}
	r, err := d.RestoreReport(ctx, rec.OriginalSHA256)
	p.noteRestored(rec.Name, r)
	if err != nil {
		return err
	}
	if err := p.waitReady(ctx, rec.Name, rec.OriginalVersion); err != nil {
		return fmt.Errorf("restore kubelet on %s: its own kubelet runs again, but: %w", rec.Name, err)
	}
	p.log.Info("node's own kubelet restored, node Ready", "node", rec.Name, "binary", rec.Binary, "sha256", rec.OriginalSHA256, "version", rec.OriginalVersion)
	if err := p.forget(rec.Name); err != nil {
		return fmt.Errorf("restore kubelet on %s: update the state in %s: %w", rec.Name, p.cfg.StateDir, err)
	}
	return nil
}

// checkKept refuses a state that recorded its originals elsewhere than
// where this skewtest's driver keeps them for l: putting back, or
// removing, from the wrong place would not give the node what it had.
func (s nodeState) checkKept(l systemdkubelet.Layout) error {
	if s.KeptAs != "" && s.KeptAs != l.Binary+systemdkubelet.OrigSuffix {
		return fmt.Errorf("the state says the node's own kubelet was kept as %s, but this skewtest keeps it as %s: rename it back over %s by hand", s.KeptAs, l.Binary+systemdkubelet.OrigSuffix, l.Binary)
	}
	if s.StateKeptIn != "" && s.StateKeptIn != l.StateDir() {
		return fmt.Errorf("the state says the kubelet's checkpoint files were kept in %s, but this skewtest keeps them in %s: move them back under %s by hand", s.StateKeptIn, l.StateDir(), l.RootDir)
	}
	return nil
}

// noteRestored keeps what the restore did to node's checkpoint files for
// the report (RunFacts).
func (p *provider) noteRestored(node string, r systemdkubelet.Restored) {
	if len(r.State) == 0 {
		return
	}
	p.factsMu.Lock()
	defer p.factsMu.Unlock()
	p.restoreFacts = append(p.restoreFacts, reports.KeyValue{
		Key:   "kubelet checkpoints of " + node,
		Value: strings.Join(r.State, "; ") + " (as the node's own kubelet had them before the first swap)",
	})
}

// RunFacts implements capabilities.WithRunFacts: which checkpoint files
// each node's restore put back or removed.
func (p *provider) RunFacts() []reports.KeyValue {
	p.factsMu.Lock()
	defer p.factsMu.Unlock()
	return slices.Clone(p.restoreFacts)
}

// removeUploadScript removes $1 if it is there (a file or a link) and
// says so.
const removeUploadScript = `if [ -e "$1" ] || [ -L "$1" ]; then rm -f -- "$1" && echo removed; fi`

// removeUpload removes path, <kubelet>.skewtest-new on the node: the
// upload of a swap that a kill interrupted, which nothing else removes.
// Only that one name is touched.
func (p *provider) removeUpload(ctx context.Context, n *Node, path string) error {
	res, err := exec.Output(ctx, n, "sh", "-c", removeUploadScript, "sh", path)
	if err != nil {
		return fmt.Errorf("remove the interrupted upload %s: %w", path, err)
	}
	if strings.TrimSpace(res.Stdout) == "removed" {
		p.log.Info("removed the upload an interrupted swap left", "node", n.String(), "path", path)
	}
	return nil
}

// waitReady waits until the API server reports node Ready, at
// kubeletVersion when it is known (a Ready condition left from before the
// restore carries the swapped kubelet's version, so it does not count).
func (p *provider) waitReady(ctx context.Context, node, kubeletVersion string) error {
	_, core, err := p.clients()
	if err != nil {
		return err
	}
	get := func(ctx context.Context, name string) (*corev1.Node, error) {
		return core.Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	return conditions.WaitNodeReadyWith(ctx, get, node, kubeletVersion, timeouts.Scale(readyTimeout, p.slow))
}

// cleanRunDir puts back the own kubelet of every node a killed run of the
// existing provider changed, from the state it left in dir (see
// StateFile), removes what the run's scenarios made in the cluster, and
// removes dir once every node is Ready again and every workload gone. It
// reaches the nodes with the run's SSH settings, so the key file, or the
// agent holding the key, must still be there. It refuses (ErrOtherCluster)
// before touching anything while the kubeconfig points at another cluster
// than the run's.
func cleanRunDir(ctx context.Context, dir string) error {
	st, err := readState(dir)
	if errors.Is(err, os.ErrNotExist) {
		// Killed before Up wrote anything: nothing was touched.
		return os.RemoveAll(dir)
	}
	if err != nil {
		return fmt.Errorf("existing: clean %s: %w", dir, err)
	}
	switch l, what := st.Owner.Liveness(); {
	case l == procfs.Live && !st.Owner.IsSelf():
		return fmt.Errorf("existing: clean %s: the run is live: %s; stop it first (its own teardown puts the nodes back)", dir, what)
	case l == procfs.Unknown:
		slog.Default().Warn("whether the run is still live cannot be told; cleaning it because it was asked for by name", "dir", dir, "why", what)
	}
	if len(st.OlderWorkload) > 0 {
		slog.Default().Warn("an older skewtest recorded what the run made in the cluster by name alone, which does not prove it the run's: left alone; remove it by hand if it is",
			"dir", dir, "kubeconfig", st.Kubeconfig, "workload", string(st.OlderWorkload))
	}
	if len(st.Nodes) == 0 && len(st.Workloads) == 0 {
		return os.RemoveAll(dir)
	}
	if err := st.checkCluster(); err != nil {
		return fmt.Errorf("existing: clean %s: %w", dir, err)
	}
	p, err := newProvider(Config{
		Kubeconfig: st.Kubeconfig,
		Context:    st.Context,
		RunID:      st.RunID,
		StateDir:   dir,
		// clean is a command of its own: the factor is its environment's.
		TimeoutFactor: timeouts.FromEnv(),
		Logger:        slog.Default(),
		SSH: SSHConfig{
			User: st.SSH.User, Port: st.SSH.Port, KeyFile: st.SSH.KeyFile, KnownHostsFile: st.SSH.KnownHostsFile,
		},
	})
	if err != nil {
		return fmt.Errorf("existing: clean %s: %w", dir, err)
	}
	p.state.Nodes, p.state.Workloads = st.Nodes, st.Workloads
	if st.Cluster != (apiIdentity{}) {
		p.state.Cluster = st.Cluster
	}
	// This process acts on the run now: another clean leaves it alone
	// until it is done or gone.
	p.state.Owner = self()
	if err := p.state.write(dir); err != nil {
		return fmt.Errorf("existing: clean %s: %w", dir, err)
	}
	if err := p.Down(ctx); err != nil {
		return err
	}
	var errs []error
	for _, w := range st.Workloads {
		errs = append(errs, p.removeWorkload(ctx, w))
	}
	return errors.Join(errs...)
}

// checkCluster refuses, with ErrOtherCluster naming both, when the
// kubeconfig, read as the run read it, now reaches another cluster than
// the one the run recorded. A state of an older skewtest, which recorded
// none, is not checked.
func (st *State) checkCluster() error {
	if st.Cluster == (apiIdentity{}) {
		slog.Default().Warn("the state does not name the run's cluster (an older skewtest's); cleaning in the cluster the kubeconfig points at now", "kubeconfig", st.Kubeconfig)
		return nil
	}
	now, err := clusterIdentity(st.Kubeconfig, st.Context)
	if err != nil {
		return err
	}
	if !now.Same(st.Cluster) {
		return fmt.Errorf("%w: the run acted on the cluster of %s; the kubeconfig %s now points at %s. Nothing was touched: point the kubeconfig back (kubectl config use-context %s) and run clean again",
			workloads.ErrOtherCluster, st.Cluster, st.Kubeconfig, now, st.Cluster.Context)
	}
	return nil
}

// workloadPollInterval is how often clean looks whether the workload it
// deleted is gone.
const workloadPollInterval = time.Second

// removeWorkload removes what one of the killed run's scenarios made in
// the cluster, now that the nodes' own kubelets are back to finish its
// pods, within the teardown bound; its record goes once it is gone, and
// the state directory with the last.
func (p *provider) removeWorkload(ctx context.Context, r workloads.Record) error {
	rc, err := p.RESTConfig()
	if err != nil {
		return fmt.Errorf("existing: clean %s: the run's workload (%s): %w", p.cfg.StateDir, r, err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("existing: clean %s: %w", p.cfg.StateDir, err)
	}
	timeout := timeouts.Scale(timeouts.Teardown, p.slow)
	p.log.Info("removing what the killed run made in the cluster", "workload", r.String(), "timeout", timeout)
	if err := workloads.Remove(ctx, cs, r, timeout, workloadPollInterval, p.log); err != nil {
		return fmt.Errorf("existing: clean %s: the run's workload (%s): %w\nthe state is kept: run `skewtest clean %s` again once the node's kubelet runs", p.cfg.StateDir, r, err, p.cfg.StateDir)
	}
	return p.RecordWorkload(workloads.Record{Run: r.Run, Namespace: r.Namespace})
}

// Owner is the process acting on a run (procfs.Owner), recorded in its
// state so that clean leaves a live run alone.
type Owner = procfs.Owner

func self() Owner { return procfs.Self() }

// checkRunDir tells whether dir holds the state of the existing-provider
// run runID: nil when its state file parses and names that run. When it
// does, the process it records is returned, which tells whether the run
// is live.
func checkRunDir(dir, runID string) (Owner, error) {
	st, err := readState(dir)
	if err != nil {
		return Owner{}, fmt.Errorf("no existing-provider run state: %w", err)
	}
	if st.RunID != runID {
		return Owner{}, fmt.Errorf("%s is the state of run %q, not of %q", filepath.Join(dir, StateFile), st.RunID, runID)
	}
	return st.Owner, nil
}
