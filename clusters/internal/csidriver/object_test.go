package csidriver

import (
	"testing"

	storagev1 "k8s.io/api/storage/v1"
)

// The kubelet tells NodePublishVolume that a volume is inline ephemeral
// (EphemeralContextKey) only when the CSIDriver has podInfoOnMount; without
// it the driver takes an inline volume for a persistent one that was never
// staged and fails it (FAILED_PRECONDITION), and no pod with one starts.
func TestObjectLetsTheKubeletMarkEphemeralVolumes(t *testing.T) {
	for _, m := range Modes {
		o := Object(m)
		if o.Spec.PodInfoOnMount == nil || !*o.Spec.PodInfoOnMount {
			t.Errorf("mode %s: podInfoOnMount %v, want true", m, o.Spec.PodInfoOnMount)
		}
		modes := map[storagev1.VolumeLifecycleMode]bool{}
		for _, l := range o.Spec.VolumeLifecycleModes {
			modes[l] = true
		}
		if !modes[storagev1.VolumeLifecycleEphemeral] || !modes[storagev1.VolumeLifecyclePersistent] {
			t.Errorf("mode %s: lifecycle modes %v", m, o.Spec.VolumeLifecycleModes)
		}
		if got, want := *o.Spec.AttachRequired, m == ModeEBS; got != want {
			t.Errorf("mode %s: attachRequired %t, want %t", m, got, want)
		}
	}
}
