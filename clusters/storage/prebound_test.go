package storage

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/skewtest/clusters/internal/kubefake"
)

// A request's Group keeps its PVs apart from another request's on the
// same node, and Block asks for raw block PVs.
func TestProvisionPreboundGroupAndBlock(t *testing.T) {
	cs := kubefake.New()
	ctx := context.Background()
	b := Prebound{NamePrefix: "skewtest-csi-ab12", CSIDriver: "csi.example"}
	first, err := ProvisionPrebound(ctx, cs, Request{Kind: CSI, Namespace: "ns", Claims: []string{"data-web-0"}, Node: "n"}, b)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := ProvisionPrebound(ctx, cs, Request{Kind: CSI, Namespace: "ns", Claims: []string{"block-web-0"}, Node: "n", Group: "block", Block: true}, b)
	if err != nil {
		t.Fatalf("a second request on the same node: %v", err)
	}
	if first.PVs[0].Name != "skewtest-csi-ab12-0" || blocks.PVs[0].Name != "skewtest-csi-ab12-block-0" {
		t.Errorf("PV names %s, %s", first.PVs[0].Name, blocks.PVs[0].Name)
	}
	for name, want := range map[string]corev1.PersistentVolumeMode{"skewtest-csi-ab12-0": "", "skewtest-csi-ab12-block-0": corev1.PersistentVolumeBlock} {
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := corev1.PersistentVolumeMode("")
		if pv.Spec.VolumeMode != nil {
			got = *pv.Spec.VolumeMode
		}
		if got != want {
			t.Errorf("%s: volumeMode %q, want %q", name, got, want)
		}
	}
}

// A request's access mode is its PVs' only one (the API refuses
// ReadWriteOncePod beside another mode); unset, it is ReadWriteOnce.
func TestProvisionPreboundAccessMode(t *testing.T) {
	for _, tt := range []struct {
		mode, want corev1.PersistentVolumeAccessMode
	}{
		{"", corev1.ReadWriteOnce},
		{corev1.ReadWriteOncePod, corev1.ReadWriteOncePod},
	} {
		cs := kubefake.New()
		ctx := context.Background()
		vols, err := ProvisionPrebound(ctx, cs, Request{Kind: CSI, Namespace: "ns", Claims: []string{"data-web-0"}, Node: "n", AccessMode: tt.mode}, Prebound{NamePrefix: "p", CSIDriver: "csi.example"})
		if err != nil {
			t.Fatal(err)
		}
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, vols.PVs[0].Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pv.Spec.AccessModes) != 1 || pv.Spec.AccessModes[0] != tt.want {
			t.Errorf("request mode %q: PV access modes %v, want [%s]", tt.mode, pv.Spec.AccessModes, tt.want)
		}
	}
}
