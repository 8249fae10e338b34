package reconstruction

// This file binds the generic ephemeral shape's claims to fresh PVs, one
// claim at a time by UID, and tells skewtest's own binding faults from the
// control plane's when a pod waits on a claim.
//
// Each re-created pod gets a new ephemeral claim of the same name
// (<pod>-gen). PVs pre-bound by claim name alone race: the PV controller
// may bind two of them to the first claim of that name, leaving none for
// the next one. So the shape's PVs are made up front, each reserved for a
// claim name that never exists (it stays Available, and no other claim
// can take it), and the scenario hands one to each new claim only once
// that claim exists, with the claim's UID in claimRef: the PV controller
// then binds exactly that claim to exactly that PV.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/scenarios"
)

// genClaim is the ephemeral claim of replica i's pods.
func genClaim(sts string, i int) string { return fmt.Sprintf("%s-%d-%s", sts, i, genVolume) }

// reservedClaim is the claim name a generic ephemeral PV is reserved for
// until a real claim gets it: no such claim is ever made.
func reservedClaim(sts string, i, k int) string {
	return fmt.Sprintf("skewtest-reserved-%s-%d-%s-%d", sts, i, genVolume, k)
}

// claimPool is the generic ephemeral shape's PVs for one claim name, in
// the order they are handed out, and which claim UID got which.
type claimPool struct {
	claim string
	pvs   []string
	given map[types.UID]string
}

// next is the first PV no claim was given, or "".
func (p *claimPool) next() string {
	used := map[string]bool{}
	for _, pv := range p.given {
		used[pv] = true
	}
	for _, pv := range p.pvs {
		if !used[pv] {
			return pv
		}
	}
	return ""
}

// bindNewClaims gives every generic ephemeral claim that exists, is not
// bound and got no PV yet the next PV of its pool, by UID. The waits that
// new pods depend on call it on every poll; errors are left for the next
// poll, and a pool that runs dry is reported by the wait's diagnosis.
func (s *Scenario) bindNewClaims(ctx context.Context, sc *scenarios.StepContext) {
	if s.shapes == nil || len(s.shapes.pools) == 0 {
		return
	}
	var list corev1.PersistentVolumeClaimList
	if err := s.res.WithNamespace(s.cfg.Namespace).List(ctx, &list); err != nil {
		return
	}
	for _, pvc := range list.Items {
		pool := s.shapes.pools[pvc.Name]
		if pool == nil || pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil {
			continue
		}
		if _, ok := pool.given[pvc.UID]; ok {
			continue
		}
		pvName := pool.next()
		if pvName == "" {
			continue
		}
		var pv corev1.PersistentVolume
		if err := s.res.Get(ctx, pvName, "", &pv); err != nil {
			continue
		}
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
		if err := s.res.Update(ctx, &pv); err != nil {
			continue // a conflict with the PV controller: the next poll tries again
		}
		pool.given[pvc.UID] = pvName
		if sc != nil {
			sc.Note("generic-ephemeral shape: claim %s/%s (uid %s) given fresh PV %s by UID", pvc.Namespace, pvc.Name, pvc.UID, pvName)
		}
	}
}

// stuckOnOwnPVs says, for pods a wait ended on, whether they wait on a claim that skewtest's own PVs
// failed: the claim is Pending and none of the PVs skewtest made for it is
// free for it (each Released, or bound to another claim's UID). That is
// skewtest's bug, not the kubelet's nor the control plane's. It returns ""
// when the claims are not why.
func stuckOnOwnPVs(pods []corev1.Pod, claims []corev1.PersistentVolumeClaim, pvs []corev1.PersistentVolume, intended map[string][]string) string {
	claimOf := map[string]corev1.PersistentVolumeClaim{}
	for _, c := range claims {
		claimOf[c.Name] = c
	}
	pvOf := map[string]corev1.PersistentVolume{}
	for _, pv := range pvs {
		pvOf[pv.Name] = pv
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range pods {
		for _, name := range podClaims(p) {
			if seen[name] {
				continue
			}
			seen[name] = true
			c, ok := claimOf[name]
			own := intended[name]
			if !ok || c.Spec.VolumeName != "" || len(own) == 0 {
				continue
			}
			free := false
			var taken []string
			for _, pvName := range own {
				pv, ok := pvOf[pvName]
				if !ok {
					taken = append(taken, pvName+" (gone)")
					continue
				}
				ref := pv.Spec.ClaimRef
				switch {
				case pv.Status.Phase == corev1.VolumeAvailable && (ref == nil || ref.UID == "" || ref.UID == c.UID):
					free = true
				case ref != nil && ref.UID != "":
					taken = append(taken, fmt.Sprintf("%s (%s, claim %s uid %s)", pvName, pv.Status.Phase, ref.Name, ref.UID))
				default:
					taken = append(taken, fmt.Sprintf("%s (%s)", pvName, pv.Status.Phase))
				}
			}
			if !free {
				out = append(out, fmt.Sprintf("claim %s/%s (uid %s) is Pending and none of the %d PVs skewtest made for it is free: %s", c.Namespace, c.Name, c.UID, len(own), strings.Join(taken, ", ")))
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// podClaims are the PVC names a pod uses: its persistentVolumeClaim
// volumes and its generic ephemeral volumes' claims (<pod>-<volume>).
func podClaims(p corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, p.Name+"-"+v.Name)
		}
	}
	return out
}

// intendedPVs maps each claim name the scenario's pods use to the PVs
// skewtest made for it: the StatefulSet's and the block shape's one each,
// the generic ephemeral shape's whole pool.
func (s *Scenario) intendedPVs() map[string][]string {
	out := map[string][]string{}
	add := func(v storage.Volumes) {
		for _, pv := range v.PVs {
			out[pv.Claim] = append(out[pv.Claim], pv.Name)
		}
	}
	add(s.provisioned)
	if s.shapes != nil {
		add(s.shapes.block)
		for claim, pool := range s.shapes.pools {
			out[claim] = append(out[claim], pool.pvs...)
		}
	}
	return out
}

// harnessFault reads the API for stuckOnOwnPVs, after a wait's deadline
// (so with a short deadline of its own); "" when the claims are not why,
// or they could not be read.
func (s *Scenario) harnessFault(ctx context.Context, pods []corev1.Pod) string {
	intended := s.intendedPVs()
	if len(pods) == 0 || len(intended) == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventsTimeout)
	defer cancel()
	claims, err := s.cs.CoreV1().PersistentVolumeClaims(s.cfg.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var pvs []corev1.PersistentVolume
	for _, names := range intended {
		for _, n := range names {
			pv, err := s.cs.CoreV1().PersistentVolumes().Get(ctx, n, metav1.GetOptions{})
			switch {
			case err == nil:
				pvs = append(pvs, *pv)
			case !apierrors.IsNotFound(err):
				return ""
			}
		}
	}
	return stuckOnOwnPVs(pods, claims.Items, pvs, intended)
}
