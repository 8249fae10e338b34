package reconstruction

// This file gives the StatefulSet's pods more than one volume each
// (Config.VolumesPerPod): a busy node's shape, one pod with many volumes,
// for measuring what reconstruction costs per volume. With one volume per
// pod nothing here changes the workload.

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

// extraVolume is the name of a pod's volume j beyond its first ("data1"),
// its claim template's and its mount's (/data1).
func extraVolume(j int) string { return fmt.Sprintf("%s%d", volumeName, j) }

// podClaims are the claims of the StatefulSet's pod of ordinal i: its
// first volume's (the marker's), then each extra volume's.
func (s *Scenario) podClaims(i int) []string {
	out := []string{claimName(s.cfg.Name, i)}
	for j := 1; j < s.cfg.VolumesPerPod; j++ {
		out = append(out, claimNameOf(extraVolume(j), s.cfg.Name, i))
	}
	return out
}

// allClaims are the claims of every replica, pod by pod.
func (s *Scenario) allClaims() []string {
	var out []string
	for i := range s.cfg.Replicas {
		out = append(out, s.podClaims(i)...)
	}
	return out
}

// addVolumes gives each of the StatefulSet's pods perPod volumes: the
// first one's claim template copied under each extra volume's name, and
// mounted at /<name>. The marker stays on the first volume (the image
// writes /data/marker); the extra volumes are checked for their binding
// and their mount after each hop (checkExtraVolumes).
func addVolumes(sts *appsv1.StatefulSet, perPod int) {
	first := sts.Spec.VolumeClaimTemplates[0]
	c := &sts.Spec.Template.Spec.Containers[0]
	for j := 1; j < perPod; j++ {
		t := *first.DeepCopy()
		t.Name = extraVolume(j)
		sts.Spec.VolumeClaimTemplates = append(sts.Spec.VolumeClaimTemplates, t)
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: t.Name, MountPath: "/" + t.Name})
	}
}

// boundClaims maps each claim of the namespace to the PV it is bound to,
// in one list: a pod with a hundred volumes is not a hundred requests
// under the client's rate limit. Nil when every pod has one volume, whose
// claim checkRecreated reads itself.
func (s *Scenario) boundClaims(ctx context.Context) (map[string]string, error) {
	if s.cfg.VolumesPerPod <= 1 {
		return nil, nil
	}
	var list corev1.PersistentVolumeClaimList
	if err := s.res.WithNamespace(s.cfg.Namespace).List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list the claims of %s: %w", s.cfg.Namespace, err)
	}
	out := map[string]string{}
	for _, c := range list.Items {
		out[c.Name] = c.Spec.VolumeName
	}
	return out, nil
}

// checkExtraVolumes checks a re-created pod's extra volumes as its first
// one is checked, but for the marker: each claim (bound, from
// boundClaims) bound to the PV it was bound to before the hop, and
// mounted in the pod.
func (s *Scenario) checkExtraVolumes(p corev1.Pod, bound map[string]string, snap *nodestate.Snapshot) error {
	claims := s.podClaims(ordinal(p))[1:]
	for _, claim := range claims {
		pv, ok := bound[claim]
		if !ok || pv == "" {
			return fmt.Errorf("pod %s (uid %s): claim %s/%s is missing or not bound", p.Name, p.UID, s.cfg.Namespace, claim)
		}
		if pv != s.pvOf[claim] {
			return fmt.Errorf("pod %s (uid %s) claim %s is bound to PV %q; it was %q before the hop", p.Name, p.UID, claim, pv, s.pvOf[claim])
		}
		dir := podVolumeDir(s.cfg.Kind, string(p.UID), pv)
		if n := snap.MountCount(dir); n < 1 {
			return fmt.Errorf("pod %s (uid %s): its volume %s (claim %s) is not mounted at %s", p.Name, p.UID, pv, claim, snap.Abs(dir))
		}
	}
	return nil
}
