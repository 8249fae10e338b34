package reconstruction

// This file restores, before a hop, what the known bug of the hop before
// changed that the hop's fault needs. A fault that keeps its pods
// (pvc-terminating, restart-kill-container) plants into, and judges, pods
// that run with their volumes mounted; a kubelet with the entry's bug
// leaves them otherwise for good (a running pod's volume unmounted under
// its Terminating claim, a killed container never started again). The
// next hop would judge its kubelet on what the buggy one left, so first
// the workload's pods are re-created, as an admin would: the StatefulSet
// scaled to 0, so that the kubelet finishes the pods and pvc-protection
// lets their deleted claims go; each released PV handed back to its
// claim's name, as skewtest made it; the StatefulSet scaled back, and its
// new pods run with their volumes mounted. Where that fails the hop, and
// every hop after it, is not reached (scenarios.ErrNotReached): nothing
// was judged on them, and the run's verdict is that of the hops that were.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// restoresBefore tells whether hop i (0-based in the plan's hops) first
// restores what the fault's known bug changed: the fault's bug lasts, and
// the catalogue expects it of the kubelet the node runs before the hop
// (plan entry i), which a hop before planted into.
func (s *Scenario) restoresBefore(i int) bool {
	f := s.cfg.Fault
	return f != nil && f.BugLasts && i > 0 && expectsBug(f.Entry, s.cfg.Plan.Versions[i], s.cfg.Plan.GatesOf(i))
}

// restore is the step before hop h (index i in the plan's hops, its
// number n in the run) stops its kubelet: it looks for what the known bug
// of the kubelet the node runs (plan entry i) changed that the fault
// needs, and, when something did, re-creates the workload's pods. Failing
// that, hop n and every later hop are not reached.
func (s *Scenario) restore(i, n int) func(context.Context, *scenarios.StepContext) error {
	return func(ctx context.Context, sc *scenarios.StepContext) error {
		f := s.cfg.Fault
		s.restored = ""
		kubelet := s.cfg.Plan.Entry(i)
		x, _ := f.Entry.ExpectationForKubelet(s.cfg.Plan.Versions[i], s.cfg.Plan.GatesOf(i))
		bug := fmt.Sprintf("%s (%s)", x.RefIDs(), x.Bug)
		changed, err := s.disturbed(ctx, sc)
		if err != nil {
			return err
		}
		if len(changed) == 0 {
			sc.Note("nothing to restore: the workload's %d pods run and are ready with their volumes mounted, as fault %s needs; kubelet %s's known bug %s changed none of them", s.cfg.Replicas, f.Entry.Name, kubelet, bug)
			return nil
		}
		why := fmt.Sprintf("kubelet %s's known bug %s, expected on the hop before, left %s; fault %s needs the workload's pods running with their volumes mounted", kubelet, bug, strings.Join(changed, "; "), f.Entry.Name)
		sc.Note("%s: re-creating them before kubelet %s is judged", why, kubelet)
		how, err := s.recreatePods(ctx, sc)
		if err != nil {
			// An interrupt, skewtest's own bug and a control plane that
			// did not act keep their classes: none is the hop's.
			if ctx.Err() != nil || errors.Is(err, scenarios.ErrHarness) || errors.Is(err, scenarios.ErrControlPlane) {
				return err
			}
			reason := fmt.Sprintf("%s, and restoring them failed: %v", why, err)
			s.leaveUnreached(n, reason)
			return fmt.Errorf("%w: %s", scenarios.ErrNotReached, reason)
		}
		s.restored = fmt.Sprintf("%s; so %s", why, how)
		sc.Note("restored: %s", how)
		return nil
	}
}

// disturbed says, pod by pod, what keeps the workload from being what a
// fault that keeps its pods plants into: every replica Running and ready,
// each of its containers running, each pod's claim's volume mounted. It
// says nothing of Terminating claims alone: the plant deletes them again,
// and a kubelet without the bug keeps their volumes mounted.
func (s *Scenario) disturbed(ctx context.Context, sc *scenarios.StepContext) ([]string, error) {
	pods, err := s.listPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the workload's pods: %w", err)
	}
	snap, err := s.snapshot(ctx, sc.QuietNode)
	if err != nil {
		return nil, err
	}
	s.snapshotEvidence(sc, "node state before the restore check", snap)
	var out []string
	if len(pods) != s.cfg.Replicas {
		out = append(out, fmt.Sprintf("%d of the StatefulSet's %d pods", len(pods), s.cfg.Replicas))
	}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || !podReady(p) {
			st := string(p.Status.Phase)
			if reason := waitingReason(p); reason != "" {
				st += "/" + reason
			}
			out = append(out, fmt.Sprintf("pod %s (uid %s) %s, not Running and ready", p.Name, p.UID, st))
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running == nil {
				out = append(out, fmt.Sprintf("pod %s (uid %s): container %s not running (restarts %d)", p.Name, p.UID, c.Name, c.RestartCount))
				continue
			}
			// A kubelet that never starts a dead container again
			// (#124057) may not report it dead either: the node says.
			id := c.ContainerID
			if i := strings.Index(id, "://"); i >= 0 {
				id = id[i+3:]
			}
			if id == "" {
				continue
			}
			res, err := exec.Output(ctx, sc.Node, "sh", "-c", containerPIDsScript, "container-pids", id)
			if err != nil {
				return nil, fmt.Errorf("pod %s: look for the processes of container %s: %w", p.Name, id, err)
			}
			if strings.TrimSpace(res.Stdout) == "" {
				out = append(out, fmt.Sprintf("pod %s (uid %s): container %s (%s) has no process on the node, though its status says running", p.Name, p.UID, c.Name, id))
			}
		}
		if pv := s.pvOf[claimOf(p)]; pv != "" {
			dir := podVolumeDir(s.cfg.Kind, string(p.UID), pv)
			if snap.MountCount(dir) < 1 {
				out = append(out, fmt.Sprintf("pod %s (uid %s): its volume %s unmounted (%s)", p.Name, p.UID, pv, snap.Abs(dir)))
			}
		}
	}
	return out, nil
}

// recreatePods re-creates the workload's pods with the kubelet the node
// runs, and says how, in words for the report.
func (s *Scenario) recreatePods(ctx context.Context, sc *scenarios.StepContext) (string, error) {
	pods, err := s.listPods(ctx)
	if err != nil {
		return "", err
	}
	old := map[types.UID]bool{}
	var uids []string
	for _, p := range pods {
		old[p.UID] = true
		uids = append(uids, string(p.UID))
	}
	deleted, err := s.deletedClaims(ctx)
	if err != nil {
		return "", err
	}
	if err := s.scale(ctx, 0); err != nil {
		return "", err
	}
	sc.Note("StatefulSet %s/%s scaled to 0: the kubelet finishes pods %s", s.cfg.Namespace, s.cfg.Name, strings.Join(uids, ", "))
	gone := func(ctx context.Context) (bool, error) {
		now, err := s.listPods(ctx)
		if err != nil {
			return false, nil
		}
		if len(now) > 0 {
			return false, nil
		}
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil {
			return false, nil
		}
		return len(snap.Leftovers(uids)) == 0, nil
	}
	if err := wait.For(gone, wait.WithContext(ctx), wait.WithTimeout(s.cfg.CleanupTimeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return "", fmt.Errorf("pods %s not gone from the API and the node %s after the StatefulSet was scaled to 0: %w", strings.Join(uids, ", "), s.cfg.CleanupTimeout, err)
	}
	freed, err := s.freeClaimedPVs(ctx, sc, deleted)
	if err != nil {
		return "", err
	}
	if err := s.scale(ctx, s.cfg.Replicas); err != nil {
		return "", err
	}
	start := time.Now()
	now, err := s.waitPodsRunning(ctx, sc, old, s.scaled(podsRunningTimeout))
	if err != nil {
		return "", err
	}
	if err := s.boundVolumes(ctx, sc, s.allClaims()); err != nil {
		return "", err
	}
	if err := s.setMade(s.madeWorkload()); err != nil {
		return "", err
	}
	snap, err := s.snapshot(ctx, sc.QuietNode)
	if err != nil {
		return "", err
	}
	s.snapshotEvidence(sc, "node state with the re-created pods", snap)
	var names []string
	for _, p := range now {
		pv := s.pvOf[claimOf(p)]
		dir := podVolumeDir(s.cfg.Kind, string(p.UID), pv)
		if snap.MountCount(dir) < 1 {
			return "", fmt.Errorf("re-created pod %s (uid %s): its volume %s is not mounted at %s", p.Name, p.UID, pv, snap.Abs(dir))
		}
		marker, err := s.readMarker(ctx, sc.Node, snap, p, pv)
		if err != nil {
			return "", err
		}
		if marker != s.markers[pv] {
			// The known bug unpublished (and maybe unstaged) the volume:
			// a driver whose volumes keep no data once unstaged comes
			// back empty, and the new pod writes its own marker.
			sc.Note("pod %s uid %s on PV %s: marker now %q (before the restore: %q)", p.Name, p.UID, pv, marker, s.markers[pv])
			s.markers[pv] = marker
		}
		names = append(names, fmt.Sprintf("%s (uid %s)", p.Name, p.UID))
	}
	how := fmt.Sprintf("the StatefulSet was scaled to 0 and back: pods %s re-created, Running with their volumes mounted %s after the scale-up", strings.Join(names, ", "), time.Since(start).Round(10*time.Millisecond))
	if len(freed) > 0 {
		how += fmt.Sprintf(", on fresh claims bound to the same PVs (%s, released by their deleted claims)", strings.Join(freed, ", "))
	}
	return how, nil
}

// deletedClaims are the workload's claims being deleted (held by
// pvc-protection while a pod uses them), by name, with their UIDs.
func (s *Scenario) deletedClaims(ctx context.Context) (map[string]types.UID, error) {
	out := map[string]types.UID{}
	for _, claim := range s.allClaims() {
		var pvc corev1.PersistentVolumeClaim
		if err := s.res.Get(ctx, claim, s.cfg.Namespace, &pvc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("get PVC %s/%s: %w", s.cfg.Namespace, claim, err)
		}
		if pvc.DeletionTimestamp != nil {
			out[claim] = pvc.UID
		}
	}
	return out, nil
}

// freeClaimedPVs waits until each deleted claim is gone (pvc-protection
// lets it go once no pod uses it), then hands its PV back to the claim's
// name alone, as skewtest pre-bound it (storage.ProvisionPrebound): a
// Retain PV of a deleted claim is Released, and the StatefulSet's new
// claim of that name binds it only once its claimRef has no UID. A PV
// its provisioner deletes with the claim is left to it. It returns the
// PVs it freed.
func (s *Scenario) freeClaimedPVs(ctx context.Context, sc *scenarios.StepContext, deleted map[string]types.UID) ([]string, error) {
	if len(deleted) == 0 {
		return nil, nil
	}
	var left []string
	gone := func(ctx context.Context) (bool, error) {
		left = nil
		for claim, uid := range deleted {
			var pvc corev1.PersistentVolumeClaim
			err := s.res.Get(ctx, claim, s.cfg.Namespace, &pvc)
			if err == nil && pvc.UID == uid {
				left = append(left, claim)
			} else if err != nil && !apierrors.IsNotFound(err) {
				left = append(left, claim+" ("+err.Error()+")")
			}
		}
		return len(left) == 0, nil
	}
	if err := wait.For(gone, wait.WithContext(ctx), wait.WithTimeout(s.cfg.CleanupTimeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return nil, fmt.Errorf("deleted claims %s still in the API %s after their pods were gone: %w", strings.Join(left, ", "), s.cfg.CleanupTimeout, err)
	}
	var freed []string
	for _, rec := range s.volumes.PVs {
		uid, ok := deleted[rec.Claim]
		if !ok {
			continue
		}
		var pv corev1.PersistentVolume
		handed := false
		// The PV controller updates the PV as its claim goes (Released):
		// a conflict with it is tried again on the PV as it is then.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			handed = false
			if err := s.res.Get(ctx, rec.Name, "", &pv); err != nil {
				return err
			}
			ref := pv.Spec.ClaimRef
			// A dynamically provisioned PV (reclaim policy Delete) goes
			// with its claim, and the new claim gets a new one.
			if ref == nil || ref.UID != uid || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
				return nil
			}
			pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: ref.Kind, APIVersion: ref.APIVersion, Namespace: ref.Namespace, Name: ref.Name}
			handed = true
			return s.res.Update(ctx, &pv)
		})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("hand PV %s back to claim %s/%s: %w", rec.Name, s.cfg.Namespace, rec.Claim, err)
		}
		if !handed {
			continue
		}
		sc.Note("PV %s (%s) released by deleted claim %s (uid %s): claimRef set to the claim's name alone, as skewtest made it", rec.Name, pv.Status.Phase, rec.Claim, uid)
		freed = append(freed, rec.Name)
	}
	return freed, nil
}

// leaveUnreached records hop n, and every later hop of the plan, as not
// reached, with why.
func (s *Scenario) leaveUnreached(n int, reason string) {
	for _, h := range s.cfg.Plan.Hops() {
		num := h.Number + s.cfg.FirstHop - 1
		if num < n {
			continue
		}
		why := reason
		if num > n {
			why = fmt.Sprintf("hop %d before it was not reached", n)
		}
		s.run.Unreached = append(s.run.Unreached, reports.UnreachedHop{Number: num,
			From: plan.V(h.From) + plan.FormatGates(h.FromGates), To: plan.V(h.To) + plan.FormatGates(h.ToGates), Reason: why})
	}
}
