package existing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/internal/filetest"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
)

// ownCPUState is the node's own kubelet's cpu_manager_state.
const ownCPUState = `{"policyName":"none","defaultCpuSet":"","checksum":1}`

// oldKubelet is the node's own kubelet, a script: it refuses to start
// (exits non-zero, as a kubelet does on "checkpoint is corrupted") when
// its cpu_manager_state has a field its version does not know.
func oldKubelet(root string) string {
	return `#!/bin/sh
# kubelet v1.37.2: it does not know newField
if grep -q newField "` + root + `/cpu_manager_state" 2>/dev/null; then
  echo "E0101 cpu_manager.go:1] could not restore state from checkpoint: checkpoint is corrupted" >&2
  exit 1
fi
`
}

// newKubelet is the run's kubelet, a newer version: at its start it
// rewrites cpu_manager_state in its own format and writes a
// dra_manager_state the node's kubelet never had.
func newKubelet(root string) string {
	return `#!/bin/sh
# kubelet v1.38.0
if [ "$1" = start ]; then
  printf '%s' '{"policyName":"none","defaultCpuSet":"","newField":{},"checksum":2}' > "` + root + `/cpu_manager_state"
  printf '%s' '{"version":"v2"}' > "` + root + `/dra_manager_state"
fi
`
}

// The node's own kubelet gets back the checkpoint files it had: after a
// newer kubelet of the run rewrote cpu_manager_state, it starts again and
// the node is Ready, with its own binary back as the same file (inode,
// extended attribute, hard link). Without the kept checkpoint files, the
// restore would start a kubelet that refuses its state and Down would
// fail with the node NotReady.
func TestRestoredKubeletAcceptsItsCheckpoints(t *testing.T) {
	r := newRestoreRig(t)
	ctx := r.context(t)
	root := r.fn.Root
	cpu := filepath.Join(root, "cpu_manager_state")
	dra := filepath.Join(root, "dra_manager_state")
	r.own = oldKubelet(root)
	filetest.Write(t, r.fn.Binary, r.own, 0o755)
	filetest.Write(t, cpu, ownCPUState, 0o600)
	filetest.SetXattr(t, r.fn.Binary, "user.ima-stand-in", "signed-by-the-owner")
	link := filepath.Join(filepath.Dir(r.fn.Binary), "kubelet-link")
	if err := os.Link(r.fn.Binary, link); err != nil {
		t.Fatal(err)
	}
	own := filetest.IdentityOf(t, r.fn.Binary)

	p, ns := r.up(ctx, t)
	n := ns[0]
	if err := n.StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(r.cache, "kubelet-v1.38.0")
	filetest.Write(t, bin, newKubelet(root), 0o755)
	if err := n.SwapKubelet(ctx, newBinaryAt(bin, binSHA(t, bin))); err != nil {
		t.Fatal(err)
	}
	st, err := readState(r.cfg.StateDir)
	if err != nil || len(st.Nodes) != 1 {
		t.Fatalf("state after the swap = %+v, %v", st, err)
	}
	if rec := st.Nodes[0]; rec.KeptAs != r.fn.Binary+systemdkubelet.OrigSuffix || rec.StateKeptIn != root+systemdkubelet.StateSuffix {
		t.Errorf("the state says the originals are at %q and %q", rec.KeptAs, rec.StateKeptIn)
	}
	if err := n.StartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(cpu); !strings.Contains(string(b), "newField") {
		t.Fatalf("the run's kubelet did not rewrite %s: %q", cpu, b)
	}

	if err := p.Down(ctx); err != nil {
		t.Fatalf("Down: %v", err)
	}
	r.assertRestored(t)
	filetest.AssertContent(t, cpu, ownCPUState, 0o600)
	filetest.AssertMissing(t, dra)
	if got := filetest.IdentityOf(t, r.fn.Binary); got != own {
		t.Errorf("the restored kubelet is %s, want the node's own file %s", got, own)
	}
	facts := p.RunFacts()
	if len(facts) != 1 || !strings.Contains(facts[0].Value, "put back "+cpu) || !strings.Contains(facts[0].Value, "removed "+dra) {
		t.Errorf("RunFacts = %+v, want what the restore did to w1's checkpoint files", facts)
	}
}
