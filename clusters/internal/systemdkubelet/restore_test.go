package systemdkubelet

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/skewtest/clusters/internal/filetest"
)

// The node's own binary comes back as the same file, not a copy of it:
// the same inode, its extended attributes (an IMA signature would be one)
// and its hard links. Swap renames it aside and Restore renames it back.
func TestRestorePutsBackTheSameFile(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	bin := h.d.Layout.Binary
	filetest.SetXattr(t, bin, "user.skewtest.signature", "owners-signature")
	other := filepath.Join(h.dir, "opt/kubelet-hardlink")
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(bin, other); err != nil {
		t.Fatal(err)
	}
	before := filetest.IdentityOf(t, bin)
	if before.Nlink != 2 || before.Xattrs == "" {
		t.Fatalf("set-up: %s", before)
	}
	orig, err := h.d.Original(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"v1.36.3", "v1.35.4"} {
		if err := h.d.Swap(ctx, h.binary(v, "kubelet "+v)); err != nil {
			t.Fatal(err)
		}
		if kept := filetest.IdentityOf(t, bin+OrigSuffix); kept != before {
			t.Errorf("after the swap to %s the kept original is %s, want the node's own file %s", v, kept, before)
		}
	}
	// The other name still reaches the node's own binary throughout.
	filetest.AssertContent(t, other, "kops kubelet v1.37.2", 0o755)
	if err := h.d.Restore(ctx, orig.SHA256); err != nil {
		t.Fatal(err)
	}
	if after := filetest.IdentityOf(t, bin); after != before {
		t.Errorf("the restored kubelet is %s, want the node's own file %s", after, before)
	}
	filetest.AssertContent(t, bin, "kops kubelet v1.37.2", 0o755)
	filetest.AssertMissing(t, bin+OrigSuffix)
}

// A swap killed between its two renames leaves the binary's path empty and
// the original kept: Restore renames it back.
func TestRestoreAfterASwapCutBetweenItsRenames(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	bin := h.d.Layout.Binary
	before := filetest.IdentityOf(t, bin)
	orig, err := h.d.Original(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bin, bin+OrigSuffix); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Restore(ctx, orig.SHA256); err != nil {
		t.Fatal(err)
	}
	if after := filetest.IdentityOf(t, bin); after != before {
		t.Errorf("restored %s, want %s", after, before)
	}
	if !h.fake.active {
		t.Error("Restore left the unit stopped")
	}
}

// The first swap keeps the node's checkpoint files; Restore puts them back
// over what the run's kubelets wrote, removes the ones they made that the
// node did not have, and reports both.
func TestSwapKeepsStateAndRestorePutsItBack(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	root := h.d.Layout.RootDir
	cpu := filepath.Join(root, "cpu_manager_state")
	devices := filepath.Join(root, "device-plugins/kubelet_internal_checkpoint")
	dra := filepath.Join(root, "dra_manager_state")
	filetest.Write(t, cpu, `{"policyName":"none","checksum":1}`, 0o600)
	filetest.Write(t, devices, `{"Data":{"PodDeviceEntries":null},"Checksum":2}`, 0o600)
	orig, err := h.d.Original(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Swap(ctx, h.binary("v1.38.0", "kubelet v1.38.0")); err != nil {
		t.Fatal(err)
	}
	// The run's kubelet rewrites them in its format, and makes one more.
	filetest.Write(t, cpu, `{"policyName":"none","newField":{},"checksum":3}`, 0o600)
	filetest.Write(t, devices, `{"Data":{"PodDeviceEntries":[],"Registered":{}},"Checksum":4}`, 0o600)
	filetest.Write(t, dra, `{"version":"v2"}`, 0o600)
	// A later swap keeps the first one's files, the node's own.
	if err := h.d.Swap(ctx, h.binary("v1.36.3", "kubelet v1.36.3")); err != nil {
		t.Fatal(err)
	}
	h.take()
	r, err := h.d.RestoreReport(ctx, orig.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	h.expect("Restore", restoreCommands(1)...)
	filetest.AssertContent(t, cpu, `{"policyName":"none","checksum":1}`, 0o600)
	filetest.AssertContent(t, devices, `{"Data":{"PodDeviceEntries":null},"Checksum":2}`, 0o600)
	filetest.AssertMissing(t, dra)
	filetest.AssertMissing(t, h.d.Layout.StateDir())
	want := []string{"put back " + cpu, "removed " + dra, "put back " + devices}
	slices.Sort(want)
	got := slices.Sorted(slices.Values(r.State))
	if !slices.Equal(got, want) {
		t.Errorf("Restore reported the state changes %q, want %q", got, want)
	}
	if !slices.Equal(r.Files, []string{h.d.Layout.Binary}) {
		t.Errorf("Restore reported the files %q, want the binary", r.Files)
	}
}

// A swap cut short while it kept the checkpoint files leaves a temporary
// directory and nothing rewritten: Restore removes it and puts nothing
// back.
func TestRestoreAfterAKeepCutShort(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	cpu := filepath.Join(h.d.Layout.RootDir, "cpu_manager_state")
	filetest.Write(t, cpu, `{"checksum":1}`, 0o600)
	tmp := h.d.Layout.StateDir() + ".tmp"
	filetest.Write(t, filepath.Join(tmp, "paths"), cpu+"\n", 0o600)
	r, err := h.d.RestoreReport(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	filetest.AssertMissing(t, tmp)
	filetest.AssertContent(t, cpu, `{"checksum":1}`, 0o600)
	if len(r.State) != 0 {
		t.Errorf("Restore reported %q, want no change to the checkpoint files", r.State)
	}
}
