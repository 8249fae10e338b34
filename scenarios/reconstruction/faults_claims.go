package reconstruction

// This file is pvc-terminating (#130335): the running pods' claims
// deleted, so they stay Terminating through a kubelet restart.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

var _ = addFault(catalogue.Entry{
	Name: "pvc-terminating", Item: 8,
	Plants: "the in-use PVC deleted (it stays Terminating through pvc-protection), then a kubelet restart",
	Checks: "the pod stays Running with the same containers; its mounts keep their mount IDs (no unpublish or unstage happened)",
	// The fix and its backports #130686 (1.30), #130685 (1.31)
	// and #130684 (1.32); nothing for 1.29 and before. The old
	// reconstruction has the bug too (inferred from code: its
	// sync() marks the volume of a pod missing from the desired
	// state Mounted, and the reconciler unmounts it).
	Expect: catalogue.ByFix("1.26",
		catalogue.Expectation{Outcome: catalogue.KnownBug, Bug: "running pod's volume unmounted",
			Says: "the desired-state populator skips the Terminating PVC (\"PVC is being deleted\"), so after the restart the reconciler unmounts the running pod's volume under it",
			// The pod's mount goes, and with it the file the pod
			// wrote there; the volume, no other pod's, is unstaged.
			Symptom: catalogue.Symptom{
				Traces: []catalogue.Trace{
					{Kind: catalogue.Unmounted, Path: "pods/" + catalogue.UID + "/volumes/kubernetes.io~csi/" + catalogue.PV + "/mount"},
					{Kind: catalogue.ContentChanged, Path: "pods/" + catalogue.UID + "/volumes/kubernetes.io~csi/" + catalogue.PV + "/mount/<file>"},
					{Kind: catalogue.Unmounted, Path: "plugins/kubernetes.io/csi/" + catalogue.Driver + "/" + catalogue.VolumeHash + "/globalmount"},
					{Kind: catalogue.UnmountLogged},
				},
				Logs: []string{
					"Error processing volume*PVC is being deleted",
					"operationExecutor.UnmountVolume started for volume*" + catalogue.UID,
				},
			},
			Refs: []catalogue.Ref{catalogue.PR(130335)}},
		catalogue.Expectation{Outcome: catalogue.Clean, Says: "the PVC still has its pvc-protection finalizer, so the running pod's volume stays in the desired state and stays mounted", Refs: []catalogue.Ref{catalogue.PR(130335)}},
		"1.30.12", "1.31.8", "1.32.4", "1.33.0"),
	Needs: faultNeeds,
}, Fault{KeepPods: true, BugLasts: true, Plant: plantDeleteClaims, Observe: observeUntouched})

// plantDeleteClaims deletes the running pods' PVCs while the kubelet is
// down; pvc-protection keeps them Terminating while the pods use them.
func plantDeleteClaims(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	// A kubelet with the bug at an earlier hop unmounted the volumes and
	// never mounts them again (their claims stay Terminating); the hop
	// re-created the pods before it stopped the kubelet (restore.go).
	// Without a CSI volume mounted this hop would have nothing to keep
	// mounted, and its "untouched" would prove nothing.
	for _, r := range s.running {
		if !hasCSIMount(r.mounts) {
			return fmt.Errorf("pod %s (uid %s) has no CSI volume mounted while the kubelet is down, so this hop cannot show whether its kubelet keeps it; an earlier hop's kubelet unmounted it, and the catalogue expects the entry's bug of none that could have (else the hop would have re-created the pods first)", r.name, r.uid)
		}
	}
	var claims []string
	for claim := range s.pvOf {
		claims = append(claims, claim)
	}
	sort.Strings(claims)
	for _, claim := range claims {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: s.cfg.Namespace}}
		if err := s.res.Delete(ctx, pvc); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete PVC %s/%s: %w", s.cfg.Namespace, claim, err)
		}
		var got corev1.PersistentVolumeClaim
		if err := s.res.Get(ctx, claim, s.cfg.Namespace, &got); err != nil {
			return fmt.Errorf("PVC %s/%s of a running pod is gone after its delete (want it Terminating, held by pvc-protection): %w", s.cfg.Namespace, claim, err)
		}
		if got.DeletionTimestamp == nil {
			return fmt.Errorf("PVC %s/%s has no deletion timestamp after its delete", s.cfg.Namespace, claim)
		}
	}
	sc.Note("deleted %d PVCs in use (%s); each stays Terminating", len(claims), strings.Join(claims, ", "))
	return nil
}

// hasCSIMount tells whether a pod's mounts include a CSI volume's.
func hasCSIMount(mounts map[string]int) bool {
	for mp := range mounts {
		if strings.Contains(mp, "/volumes/kubernetes.io~csi/") {
			return true
		}
	}
	return false
}
