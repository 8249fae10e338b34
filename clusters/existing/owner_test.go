package existing

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/internal/procfs"
)

// The run's state names its process from the first write on, so that
// `skewtest clean` (existing-cluster runs take no host lock) can tell a
// live run from a killed one; a pid now another process's is stale.
func TestStateRecordsTheRunsProcess(t *testing.T) {
	r := newRestoreRig(t)
	ctx := r.context(t)
	p, err := newProvider(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Down(ctx) })
	st, err := readState(r.cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	self, err := procfs.ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.Owner.PID != os.Getpid() || st.Owner.Start != self.StartTime || st.Owner.BootID == "" || st.Owner.PIDNamespace == "" {
		t.Errorf("state owner = %+v, want this process (pid %d, start %d) with its boot and pid namespace", st.Owner, os.Getpid(), self.StartTime)
	}
	if l, what := st.Owner.Liveness(); l != procfs.Live {
		t.Errorf("Liveness of this process = %v (%s), want Live", l, what)
	}
	reused := st.Owner
	reused.Start++
	if l, what := reused.Liveness(); l != procfs.Gone || !strings.Contains(what, "another process") {
		t.Errorf("Liveness of a reused pid = %v (%s), want Gone", l, what)
	}
	if l, _ := (Owner{}).Liveness(); l != procfs.Unknown {
		t.Errorf("Liveness of an older state's missing owner = %v, want Unknown", l)
	}
}

// Clean refuses a run whose process still runs, and touches nothing.
func TestCleanRefusesALiveRun(t *testing.T) {
	r := newRestoreRig(t)
	ctx := r.context(t)
	p, ns := r.up(ctx, t)
	if err := ns[0].StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Down(ctx) })
	// The run's process is another one, still running.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	st, err := readState(r.cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	sst, err := procfs.ReadStat(sleeper.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	st.Owner.PID, st.Owner.Start = sleeper.Process.Pid, sst.StartTime
	writeState(t, r.cfg.StateDir, st)
	r.fn.calls()
	err = cleanRunDir(ctx, r.cfg.StateDir)
	if err == nil || !strings.Contains(err.Error(), "live") || !strings.Contains(err.Error(), strconv.Itoa(sleeper.Process.Pid)) {
		t.Errorf("Clean of a live run = %v, want a refusal naming pid %d", err, sleeper.Process.Pid)
	}
	if calls := r.fn.calls(); calls != "" {
		t.Errorf("Clean of a live run drove the node's unit:\n%s", calls)
	}
	if r.fn.running() != "" {
		t.Errorf("Clean of a live run started the node's kubelet")
	}
}

func writeState(t *testing.T, dir string, st *State) {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, StateFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}
