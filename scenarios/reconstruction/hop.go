package reconstruction

// This file holds the steps of a hop: stop the kubelet, swap its binary,
// force-delete the pods, start it, wait for the cleanup, and check the
// re-created pods and the kubelet's metrics.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/conditions"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

func (s *Scenario) snapshotBefore(ctx context.Context, sc *scenarios.StepContext) error {
	snap, err := s.snapshot(ctx, sc.Node)
	if err != nil {
		return err
	}
	s.initial = snap
	s.snapshotEvidence(sc, "node state before the first hop", snap)
	if err := s.recordInitialPath(ctx, sc); err != nil {
		return err
	}
	if s.cfg.Kind == storage.CSI && s.volumes.NoStagingMount {
		sc.Note("the CSI driver mounts nothing at the global mount path when it stages (NodeStageVolume is a no-op); the global mount checks do not apply")
	}
	if s.cfg.Kind == storage.CSI && !s.volumes.NoStagingMount {
		for _, pv := range s.volumes.PVs {
			path, n := snap.CSIGlobalMount(pv.Driver, pv.VolumeHandle)
			if n != 1 {
				return fmt.Errorf("CSI global mount of PV %s at %s is mounted %d times before any hop; want 1", pv.Name, path, n)
			}
		}
	}
	return nil
}

func (s *Scenario) stopKubelet(h plan.Hop) func(context.Context, *scenarios.StepContext) error {
	return func(ctx context.Context, sc *scenarios.StepContext) error {
		s.hop = &reports.Hop{Number: h.Number, From: "v" + h.From.String(), To: "v" + h.To.String(), Direction: h.Direction,
			FromGates: h.FromGates, ToGates: h.ToGates, Restored: s.restored}
		s.restored = ""
		s.startHopPath()
		s.run.Hops = append(s.run.Hops, *s.hop)
		s.hop = &s.run.Hops[len(s.run.Hops)-1]
		pods, err := s.listPods(ctx)
		if err != nil {
			return fmt.Errorf("list pods before stopping the kubelet: %w", err)
		}
		s.oldUIDs, s.stuck = nil, ""
		for _, p := range pods {
			s.oldUIDs = append(s.oldUIDs, string(p.UID))
		}
		s.faultSeen, s.faultDetail, s.faultTraces = nil, "", nil
		s.stopPodsUp()
		start := time.Now()
		s.unstagedInStop = nil
		if f := s.cfg.Fault; f != nil && f.Stop != nil {
			mark := s.unstageLogMark(ctx)
			if err := f.Stop(ctx, s, sc); err != nil {
				return err
			}
			s.recordUnstagedInStop(ctx, mark)
		} else if err := s.node.StopKubelet(ctx); err != nil {
			return err
		}
		if f := s.cfg.Fault; f == nil || !f.KeepPods && !f.NoDelete {
			s.hop.OldPodUIDs = append([]string(nil), s.oldUIDs...)
		}
		s.timing(reports.PhaseKubeletStop, time.Since(start))
		sc.Note("kubelet stopped in %s; pods to force-delete: %s", time.Since(start).Round(time.Millisecond), strings.Join(s.oldUIDs, ", "))
		return nil
	}
}

func (s *Scenario) timing(phase string, d time.Duration) {
	s.hop.Timings = append(s.hop.Timings, reports.Timing{Phase: phase, Duration: d})
}

// swapKubelet installs bin with its plan entry's feature gates (none:
// earlier entries' gates are taken out), when the plan sets any.
func (s *Scenario) swapKubelet(bin binaries.Binary, gates map[string]bool) func(context.Context, *scenarios.StepContext) error {
	return func(ctx context.Context, sc *scenarios.StepContext) error {
		start := time.Now()
		if err := s.node.SwapKubelet(ctx, bin); err != nil {
			return err
		}
		if err := s.setGates(ctx, sc, s.hop.To+plan.FormatGates(gates), gates); err != nil {
			return err
		}
		s.timing("swap binary", time.Since(start))
		sc.Note("kubelet %s from %s (sha256 %s) installed", bin.Version, bin.Source, bin.SHA256)
		return nil
	}
}

// forceDelete deletes the pods with grace period 0 while the kubelet is
// down, as the manual sign-off did, then records the node state the new
// kubelet will find.
func (s *Scenario) forceDelete(ctx context.Context, sc *scenarios.StepContext) error {
	start := time.Now()
	pods, err := s.listPods(ctx)
	if err != nil {
		return err
	}
	for i := range pods {
		if err := s.res.Delete(ctx, &pods[i], resources.WithGracePeriod(0)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("force-delete pod %s/%s (uid %s): %w", pods[i].Namespace, pods[i].Name, pods[i].UID, err)
		}
	}
	old := map[string]bool{}
	for _, u := range s.oldUIDs {
		old[u] = true
	}
	gone := func(ctx context.Context) (bool, error) {
		now, err := s.listPods(ctx)
		if err != nil {
			return false, nil
		}
		for _, p := range now {
			if old[string(p.UID)] {
				return false, nil
			}
		}
		return true, nil
	}
	if err := wait.For(gone, wait.WithContext(ctx), wait.WithTimeout(s.scaled(podsGoneTimeout)), wait.WithInterval(100*time.Millisecond), wait.WithImmediate()); err != nil {
		return fmt.Errorf("force-deleted pods still in the API: %w", err)
	}
	s.timing("force delete", time.Since(start))
	snap, err := s.snapshot(ctx, sc.Node)
	if err != nil {
		return err
	}
	s.down = snap
	left := snap.Leftovers(s.oldUIDs)
	s.volsAtStart = 0
	for _, u := range s.oldUIDs {
		s.volsAtStart += len(snap.Pod(u).VolumeDirs())
	}
	s.pathVolumes = s.volsAtStart
	s.hop.VolumesAtStart = s.volsAtStart
	sc.Note("%d pods force-deleted; with the kubelet down the node still holds %d of their mounts and directories, %d volume dirs for reconstruction", len(pods), len(left), s.volsAtStart)
	s.snapshotEvidence(sc, "node state while the kubelet is down", snap)
	if len(left) == 0 {
		return fmt.Errorf("nothing of the old pods %v is on the node while the kubelet is down: the scenario would prove nothing", s.oldUIDs)
	}
	if s.shapes != nil {
		return s.recordShapesDown(ctx, sc)
	}
	return nil
}

func (s *Scenario) startKubelet(ctx context.Context, sc *scenarios.StepContext) error {
	s.kubeletUp = time.Now()
	s.watchPodsUp(ctx)
	if err := s.node.StartKubelet(ctx); err != nil {
		return err
	}
	if n, ok := s.node.(nodes.WithNotes); ok {
		for _, note := range n.Notes() {
			sc.Note("%s", note)
		}
	}
	sc.Note("kubelet process healthy %s after start", time.Since(s.kubeletUp).Round(time.Millisecond))
	return nil
}

func (s *Scenario) waitReady(version string) func(context.Context, *scenarios.StepContext) error {
	return func(ctx context.Context, sc *scenarios.StepContext) error {
		if err := conditions.WaitNodeReady(ctx, s.res, s.node.String(), version, s.scaled(nodeReadyTimeout)); err != nil {
			return err
		}
		d := time.Since(s.kubeletUp)
		s.timing(reports.PhaseNodeReady, d)
		sc.Note("node %s Ready at kubelet %s, %s after the kubelet started", s.node, version, d.Round(10*time.Millisecond))
		return nil
	}
}

// waitCleanup polls node state until no mount and then nothing at all of
// the old pods is left, recording when each happened (from the kubelet's
// start); then it reads which reconstruction the kubelet ran, from its
// log (also when the cleanup failed: which path left the old pods matters
// most then). A log with lines of both paths fails the step.
func (s *Scenario) waitCleanup(ctx context.Context, sc *scenarios.StepContext) error {
	err := s.awaitCleanup(ctx, sc)
	if perr := s.recordHopPath(ctx, sc); err == nil {
		err = perr
	}
	return err
}

func (s *Scenario) awaitCleanup(ctx context.Context, sc *scenarios.StepContext) error {
	var last *nodestate.Snapshot
	var lastErr error
	mountsGone, polls := time.Duration(0), 0
	cond := func(ctx context.Context) (bool, error) {
		polls++
		// The re-created pods' new ephemeral claims get their PVs as soon
		// as they exist, as from a provisioner, not after the cleanup.
		s.bindNewClaims(ctx, sc)
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last = snap
		left := snap.Leftovers(s.oldUIDs)
		mounts := 0
		for _, l := range left {
			if l.Kind == "mount" {
				mounts++
			}
		}
		if mounts == 0 && mountsGone == 0 {
			mountsGone = time.Since(s.kubeletUp)
		}
		return len(left) == 0, nil
	}
	timeout := s.cfg.CleanupTimeout
	to := version.MustParseGeneric(s.hop.To)
	mayLeave := s.cfg.Fault != nil && s.cfg.Fault.MayLeave || s.shapesMayLeave(to)
	if mayLeave && timeout > mayLeaveBound {
		timeout = mayLeaveBound
	}
	s.left, s.leftSnap = nil, nil
	err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate())
	dirsGone := time.Since(s.kubeletUp)
	s.leftSnap = last
	if last != nil {
		s.snapshotEvidence(sc, "node state after cleanup", last)
		sc.Evidence(reports.Evidence{Name: "changes since the kubelet was stopped", Kind: "diff", Text: nodestate.Diff(s.down, last)})
	}
	if err != nil && mayLeave && last != nil && ctx.Err() == nil {
		s.left = last.Leftovers(s.oldUIDs)
		s.leftEver = append(s.leftEver, s.left...)
		if s.shapes != nil && s.cfg.Fault == nil {
			if un := s.unexplainedLeftovers(s.left, to); len(un) > 0 {
				return fmt.Errorf("old pods not cleaned up within %s of the kubelet's start, beyond what the shapes' known bugs leave (%d polls): %s", timeout, polls, s.leftoverHeadline(ctx, un))
			}
			if un := s.unexplainedTraces(oldPodTraces(last, s.left), to); len(un) > 0 {
				return fmt.Errorf("old pods not cleaned up within %s of the kubelet's start, beyond what the shapes' known bugs leave (%d polls): left %s", timeout, polls, joinTraces(un))
			}
		}
		sc.Note("%s: %d things of the old pods left %s after the kubelet started (bounded wait); the catalogue judges them", s.leakEntry().Name, len(s.left), timeout)
		return nil
	}
	if err != nil {
		detail := ""
		if last != nil {
			detail = s.leftoverHeadline(ctx, last.Leftovers(s.oldUIDs))
		} else if lastErr != nil {
			detail = snapshotFailure(sc, lastErr)
		}
		if ctx.Err() != nil {
			// Not the kubelet's timeout: the run was stopped mid-wait.
			return fmt.Errorf("stopped waiting for the old pods' cleanup %s after the kubelet's start, of its %s (%d polls); left then: %s",
				time.Since(s.kubeletUp).Round(10*time.Millisecond), timeout, polls, detail)
		}
		return fmt.Errorf("old pods not cleaned up within %s of the kubelet's start (%d polls): %s", timeout, polls, detail)
	}
	s.timing(reports.PhaseMountsGone, mountsGone)
	s.timing(reports.PhasePodDirsGone, dirsGone)
	sc.Note("old pods' mounts gone %s and their directories %s after the kubelet started (%d polls every %s)",
		mountsGone.Round(10*time.Millisecond), dirsGone.Round(10*time.Millisecond), polls, s.cfg.PollInterval)
	return nil
}

// checkRecreated checks the StatefulSet's new pods: new UIDs, same node,
// same claims bound to the same PVs, marker readable and unchanged, each
// pod's volume mounted, and each CSI global mount mounted exactly once.
func (s *Scenario) checkRecreated(ctx context.Context, sc *scenarios.StepContext) error {
	exclude := map[types.UID]bool{}
	for _, u := range s.oldUIDs {
		exclude[types.UID(u)] = true
	}
	timeout, mayStick := s.scaled(podsRunningTimeout), s.mayStick()
	if mayStick {
		timeout = s.scaled(mayStickBound)
	}
	pods, err := s.waitPodsRunning(ctx, sc, exclude, timeout)
	if err != nil {
		if mayStick && ctx.Err() == nil && !errors.Is(err, scenarios.ErrControlPlane) && !errors.Is(err, scenarios.ErrHarness) {
			s.stuck = s.stuckWhy(ctx, sc, err)
			sc.Note("the re-created pods did not run, which the hop's kubelet's known bug does (fault %s); judged below: %s", s.cfg.Fault.Entry.Name, s.stuck)
			return nil
		}
		return err
	}
	running := time.Since(s.kubeletUp)
	if at := s.stopPodsUp(); at > 0 {
		running = at
	}
	s.timing(reports.PhasePodsRunning, running)
	// The hop's work is done: what its kubelet used for it, before the
	// checks below take their time.
	s.recordKubeletUsage(ctx, sc)
	snap, err := s.snapshot(ctx, sc.QuietNode)
	if err != nil {
		return err
	}
	bound, err := s.boundClaims(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		claim := claimOf(p)
		pv := s.pvOf[claim]
		var pvc corev1.PersistentVolumeClaim
		if err := s.res.Get(ctx, claim, s.cfg.Namespace, &pvc); err != nil {
			return fmt.Errorf("get PVC %s of pod %s: %w", claim, p.Name, err)
		}
		if pvc.Spec.VolumeName != pv {
			return fmt.Errorf("pod %s (uid %s) claim %s is bound to PV %q; it was %q before the hop", p.Name, p.UID, claim, pvc.Spec.VolumeName, pv)
		}
		dir := podVolumeDir(s.cfg.Kind, string(p.UID), pv)
		if n := snap.MountCount(dir); n < 1 {
			return fmt.Errorf("pod %s (uid %s): its volume %s is not mounted at %s", p.Name, p.UID, pv, snap.Abs(dir))
		}
		if err := s.checkExtraVolumes(p, bound, snap); err != nil {
			return err
		}
		marker, err := s.readMarker(ctx, sc.Node, snap, p, pv)
		if err != nil {
			return err
		}
		if s.cfg.Fault != nil && s.cfg.Fault.DataLost {
			sc.Note("pod %s uid %s on PV %s: marker now %q (fault %s takes the volume's data; before: %q)", p.Name, p.UID, pv, marker, s.cfg.Fault.Entry.Name, s.markers[pv])
			s.markers[pv] = marker
			continue
		}
		if marker != s.markers[pv] {
			if line := s.unstagedLine(ctx, pv); line != "" {
				sc.Evidence(reports.Evidence{Name: "the kubelet unstaged PV " + pv, Kind: "log", Text: line})
				sc.Note("pod %s uid %s on PV %s: marker now %q, before %q: %s", p.Name, p.UID, pv, marker, s.markers[pv], restaged(line))
				s.markers[pv] = marker
				continue
			}
			return fmt.Errorf("pod %s (uid %s): marker on PV %s is %q, want %q (written before the first hop)", p.Name, p.UID, pv, marker, s.markers[pv])
		}
		sc.Note("pod %s uid %s on %s, claim %s → PV %s, marker intact", p.Name, p.UID, p.Spec.NodeName, claim, pv)
	}
	if s.cfg.Kind == storage.CSI && !s.volumes.NoStagingMount {
		for _, pv := range s.volumes.PVs {
			path, n := snap.CSIGlobalMount(pv.Driver, pv.VolumeHandle)
			if n != 1 {
				return fmt.Errorf("CSI global mount of PV %s at %s is mounted %d times; want exactly 1", pv.Name, path, n)
			}
		}
		sc.Note("each of the %d CSI global mounts is mounted exactly once", len(s.volumes.PVs))
	}
	s.snapshotEvidence(sc, "node state with the re-created pods", snap)
	return nil
}

// checkMetrics scrapes the kubelet through the API server's node proxy and
// checks the scenario's expectations for the volume kind, on the metrics
// the hop's kubelet version registers (kubeletmetrics.Exposed); a counter
// that looks like the metrics registration race is decided by witness
// starts (witness.go). A hop without a cleanup wait (the pods kept) reads
// its reconstruction path here. A hop whose re-created pods were not
// checked records what its kubelet used here (usage.go).
func (s *Scenario) checkMetrics(ctx context.Context, sc *scenarios.StepContext) error {
	if s.hop.Kubelet == nil {
		s.recordKubeletUsage(ctx, sc)
	}
	perr := s.recordHopPath(ctx, sc)
	scrape, err := kubeletmetrics.Fetch(ctx, s.cs, s.node.String())
	if err != nil {
		return errors.Join(err, perr)
	}
	if path, err := sc.Artifact("metrics.txt", scrape.Raw); err == nil {
		sc.Evidence(reports.Evidence{Name: "kubelet metrics", Kind: "metrics", Path: path})
	}
	exps := kubeletmetrics.CSIExpectations(s.volsAtStart)
	if s.cfg.Kind == storage.Local {
		exps = kubeletmetrics.LocalVolumeExpectations(s.volsAtStart)
	}
	if s.cfg.Fault != nil && s.cfg.Fault.Metrics != nil {
		exps = s.cfg.Fault.Metrics(s.volsAtStart)
	}
	to := version.MustParseGeneric(s.hop.To)
	if exps, err = s.symptomMetrics(ctx, sc, scrape, exps, to); err != nil {
		return errors.Join(err, perr)
	}
	results, err := kubeletmetrics.Evaluate(scrape, s.hop.To, exps)
	if err != nil {
		return errors.Join(err, perr)
	}
	if kubeletmetrics.NeedsKubeletLog(results) {
		if results, err = s.explainRace(ctx, sc, results); err != nil {
			return errors.Join(err, perr)
		}
	}
	s.metricResults = results
	var failed []string
	for _, r := range results {
		m := reports.Metric{Name: r.Metric, Value: r.Value, Present: r.Present, Expected: r.Expected, Verdict: reports.Verdict(r.Verdict), Reason: r.Reason}
		s.hop.Metrics = append(s.hop.Metrics, m)
		switch m.Verdict {
		case reports.Fail:
			// The reason names the metric and why it failed: its value
			// and the expectation, or that the scrape lacks it, or the
			// witness starts of a counter that never moves.
			failed = append(failed, r.Reason)
		case reports.PassWithExpectedDeviations:
			sc.Deviation(reports.Deviation{Check: "metric " + r.Metric, Expected: r.Expected, Observed: fmt.Sprint(r.Value), Reason: r.Reason})
		}
	}
	if len(failed) > 0 {
		return errors.Join(fmt.Errorf("kubelet metrics: %s%s", strings.Join(failed, "; "), s.symptomNote(to)), perr)
	}
	return perr
}

func (s *Scenario) snapshotAfter(ctx context.Context, sc *scenarios.StepContext) error {
	snap, err := s.snapshot(ctx, sc.Node)
	if err != nil {
		return err
	}
	s.snapshotEvidence(sc, "node state after the last hop", snap)
	sc.Evidence(reports.Evidence{Name: "changes since before the first hop", Kind: "diff", Text: nodestate.Diff(s.initial, snap)})
	return nil
}
