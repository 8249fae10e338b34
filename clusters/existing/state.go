package existing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/statefile"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
	"sigs.k8s.io/skewtest/clusters/workloads"
)

// StateFile is the file in Config.StateDir that records what a run
// changed on which node, so that Down, or `skewtest clean` after the
// harness was killed, can put each node's own kubelet back.
const StateFile = "state.json"

// State is what StateFile holds: enough to reach each node again (the
// kubeconfig and SSH settings; never a secret, only the key file's path)
// and what to put back.
type State struct {
	RunID      string `json:"runID"`
	Kubeconfig string `json:"kubeconfig"`
	// Context is the kubeconfig context the run was told to use; empty
	// when it used the current one.
	Context string `json:"context,omitempty"`
	// Cluster is the cluster the run acted on; clean refuses to act while
	// the kubeconfig points at another. Zero in older state files.
	Cluster apiIdentity `json:"cluster,omitzero"`
	SSH     stateSSH    `json:"ssh"`
	Nodes   []nodeState `json:"nodes"`
	// Owner is the process acting on the run: its harness, or the
	// `skewtest clean` putting its nodes back. Such a run takes no host
	// lock, so clean, looking through the run roots, leaves it alone while
	// that process runs (Owner.Liveness). Zero in older state files.
	Owner Owner `json:"owner,omitzero"`
	// Workloads are what the run's scenarios (a run's one, a batch's
	// jobs, a matrix tour's trails) made in the cluster and have not
	// removed, one record each, keyed by namespace (RecordWorkload); clean
	// removes each once the nodes' own kubelets are back, and drops it
	// from the state once its objects are gone.
	Workloads []workloads.Record `json:"workloads,omitempty"`
	// OlderWorkload is the one workload record an older skewtest kept,
	// which named its objects by fixed names alone: nothing proves them
	// the run's, so clean leaves them and says so.
	OlderWorkload json.RawMessage `json:"workload,omitempty"`
}

// stateSSH is the SSH settings of the run.
type stateSSH struct {
	User           string `json:"user"`
	Port           int    `json:"port"`
	KeyFile        string `json:"keyFile,omitempty"` // empty: the ssh-agent
	KnownHostsFile string `json:"knownHostsFile"`
}

// nodeState is one node the run touched, recorded before its kubelet was
// first stopped.
type nodeState struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	Unit    string `json:"unit"`
	Binary  string `json:"binary"`
	RootDir string `json:"rootDir"`
	// HealthzURL is the kubelet's health endpoint when the run was told
	// one (Config.KubeletHealthzURL), for clean's starts.
	HealthzURL string `json:"healthzURL,omitempty"`
	// OriginalSHA256 is the sha256 of the node's own kubelet binary.
	OriginalSHA256 string `json:"originalSHA256"`
	// OriginalVersion is the kubelet version the API server reported for
	// the node before the run touched it; empty if unknown.
	OriginalVersion string    `json:"originalVersion,omitempty"`
	Recorded        time.Time `json:"recorded"`
	// KeptAs is where the first swap renames the node's own binary aside
	// (Binary+systemdkubelet.OrigSuffix), and StateKeptIn the directory
	// where it keeps the kubelet's checkpoint files: recorded before the
	// first swap, so that `skewtest clean` after a kill finds the
	// originals. Empty in older state files.
	KeptAs      string `json:"keptAs,omitempty"`
	StateKeptIn string `json:"stateKeptIn,omitempty"`
}

func (s nodeState) layout() systemdkubelet.Layout {
	return systemdkubelet.Layout{Unit: s.Unit, Binary: s.Binary, RootDir: s.RootDir, HealthzURL: s.HealthzURL}
}

// readState reads dir's StateFile.
func readState(dir string) (*State, error) {
	var s State
	if err := statefile.Read(dir, StateFile, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// write replaces dir's StateFile in one rename, so a kill leaves the old
// state or the new, never half of one.
func (s *State) write(dir string) error { return statefile.Write(dir, StateFile, s, 0o600) }

// initState writes the run's state, with no node yet, before any node is
// touched: a state directory that cannot be written fails Up, not a hop.
func (p *provider) initState() error {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if p.cfg.StateDir == "" {
		return nil
	}
	if err := os.MkdirAll(p.cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("existing: state directory %s (it records each node's own kubelet so that `skewtest clean` can put it back): %w", p.cfg.StateDir, err)
	}
	p.state.Owner = self()
	if err := p.state.write(p.cfg.StateDir); err != nil {
		return fmt.Errorf("existing: state directory %s: %w", p.cfg.StateDir, err)
	}
	return nil
}

// record notes n's own kubelet in the state, and writes it to the state
// directory, before the run first changes n. Later calls for n do nothing.
func (p *provider) record(ctx context.Context, n *Node) error {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if slices.ContainsFunc(p.state.Nodes, func(s nodeState) bool { return s.Name == n.String() }) {
		return nil
	}
	orig, err := n.driver.Original(ctx)
	if err != nil {
		return err
	}
	if orig.Kept {
		p.log.Warn("an earlier run kept this node's kubelet and did not put it back; the kept copy is taken as the original",
			"node", n.String(), "kept", orig.Binary+systemdkubelet.OrigSuffix, "sha256", orig.SHA256)
	}
	st := nodeState{
		Name: n.String(), Address: n.Address(),
		Unit: n.driver.Layout.Unit, Binary: orig.Binary, RootDir: n.driver.Layout.RootDir, HealthzURL: n.driver.Layout.HealthzURL,
		OriginalSHA256: orig.SHA256, OriginalVersion: n.kubeletVersion, Recorded: time.Now().UTC(),
		KeptAs: orig.Binary + systemdkubelet.OrigSuffix, StateKeptIn: n.driver.Layout.StateDir(),
	}
	next := *p.state
	next.Nodes = append(slices.Clone(p.state.Nodes), st)
	if p.cfg.StateDir != "" {
		if err := next.write(p.cfg.StateDir); err != nil {
			return fmt.Errorf("record the node's own kubelet in %s: %w", p.cfg.StateDir, err)
		}
	}
	*p.state = next
	p.log.Info("recorded the node's own kubelet", "node", n.String(), "binary", orig.Binary, "sha256", orig.SHA256, "version", n.kubeletVersion, "state", p.cfg.StateDir)
	return nil
}

// RecordWorkload implements capabilities.WithWorkloadRecord: it writes r
// into the state, in place of the record of r's namespace, before the
// scenario makes what r adds. An empty r drops that record; with no record
// left and every node back, the state ends (saveLocked).
func (p *provider) RecordWorkload(r workloads.Record) error {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	next := *p.state
	next.Workloads = slices.DeleteFunc(slices.Clone(p.state.Workloads), func(w workloads.Record) bool { return w.Namespace == r.Namespace })
	if !r.Empty() {
		next.Workloads = append(next.Workloads, r)
	}
	if err := p.saveLocked(&next); err != nil {
		return fmt.Errorf("existing: record the run's workload in %s: %w", p.cfg.StateDir, err)
	}
	*p.state = next
	return nil
}

// forget drops name from the state once its kubelet is back.
func (p *provider) forget(name string) error {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	next := *p.state
	next.Nodes = slices.DeleteFunc(slices.Clone(p.state.Nodes), func(s nodeState) bool { return s.Name == name })
	if err := p.saveLocked(&next); err != nil {
		return err
	}
	*p.state = next
	return nil
}

// saveLocked writes st to the state directory, or removes the directory
// once st describes nothing left: no node to put back and no workload to
// remove. The caller holds stateMu.
func (p *provider) saveLocked(st *State) error {
	if p.cfg.StateDir == "" {
		return nil
	}
	if len(st.Nodes) > 0 || len(st.Workloads) > 0 {
		return st.write(p.cfg.StateDir)
	}
	err := os.RemoveAll(p.cfg.StateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
