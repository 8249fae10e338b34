package existing

import (
	"testing"

	"sigs.k8s.io/skewtest/clusters/internal/filetest"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
)

// A run killed while it uploaded a kubelet left <kubelet>.skewtest-new,
// half written, beside the node's own: Restore removes it, and only it.
func TestRestoreRemovesAnInterruptedUpload(t *testing.T) {
	r := newRestoreRig(t)
	ctx := r.context(t)
	p, ns := r.up(ctx, t)
	if err := ns[0].StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	// What the kill during the upload left, and names that are not it.
	filetest.Write(t, r.fn.Binary+systemdkubelet.NewSuffix, "kubelet v1.36", 0o644)
	others := []string{r.fn.Binary + systemdkubelet.NewSuffix + ".bak", r.fn.Binary + ".skewtest-newer", r.fn.Binary + "2" + systemdkubelet.NewSuffix}
	for _, o := range others {
		filetest.Write(t, o, "not the run's", 0o644)
	}
	if err := p.Down(ctx); err != nil {
		t.Fatalf("Down: %v", err)
	}
	r.assertRestored(t)
	for _, o := range others {
		filetest.AssertContent(t, o, "not the run's", 0o644)
	}
}
