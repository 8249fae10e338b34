package storage

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
)

// A PV of skewtest's driver loses its data with its staging unless its
// volume context says the driver is in its EBS mode; other drivers' PVs
// and local volumes keep it.
func TestPVUnstageLosesData(t *testing.T) {
	csi := func(driver string, attrs map[string]string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeAttributes: attrs}}}}
	}
	for _, tc := range []struct {
		name string
		pv   *corev1.PersistentVolume
		want bool
	}{
		{"skewtest's, no mode (tmpfs, the default)", csi(csidriver.Name, nil), true},
		{"skewtest's, tmpfs", csi(csidriver.Name, map[string]string{csidriver.VolumeContextMode: "tmpfs"}), true},
		{"skewtest's, ebs", csi(csidriver.Name, map[string]string{csidriver.VolumeContextMode: "ebs"}), false},
		{"EBS CSI's", csi("ebs.csi.aws.com", nil), false},
		{"a local volume", &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/x"}}}}, false},
	} {
		if got := PVUnstageLosesData(tc.pv); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
