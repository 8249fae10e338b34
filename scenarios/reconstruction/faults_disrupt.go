package reconstruction

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

var _ = addFault(catalogue.Entry{
	Name: "kill-during-publish", Item: 4,
	Plants: "with the kubelet up, the driver holds NodePublishVolume and the pods are force-deleted; the StatefulSet's new pod gets its vol_data.json and a held publish, and the kubelet is SIGKILLed then; that pod force-deleted while the kubelet is down",
	Checks: "the half-published pod's dir and anything it mounted gone; the re-created pods on the same volumes with their data; each global mount once",
	Expect: []catalogue.Expectation{{From: "1.30", Outcome: catalogue.Clean, Says: "the half-published volume is reconstructed as uncertain, unpublished (idempotently) and its pod dir removed"}},
	Needs:  []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.CSIDriverControl, nodes.KubeletKill},
}, Fault{Stop: killDuringPublish, Observe: observeLeftovers})

var _ = addFault(catalogue.Entry{
	Name: "kill-between-unpublish-unstage", Item: 5,
	Plants: "with the kubelet up, the driver holds NodeUnstageVolume and the StatefulSet is scaled to 0; once the pod dir is gone and the unstage held, the kubelet is SIGKILLed; nothing is deleted while it is down",
	Checks: "the global mount no pod uses is unstaged within a bounded wait; then the StatefulSet is scaled back and its pods run on the same volumes",
	Expect: []catalogue.Expectation{{Outcome: catalogue.KnownBug, Bug: "global-mount leak", Says: "nothing is left to reconstruct from, so the staged global mount leaks until a pod uses the volume again",
		Symptom: catalogue.Symptom{Traces: []catalogue.Trace{globalMount}},
		Refs:    []catalogue.Ref{catalogue.Issue(85476), catalogue.Issue(121937), catalogue.PR(136771)}}},
	Needs: []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.CSIDriverControl, nodes.KubeletKill},
}, Fault{Stop: killBetweenUnpublishUnstage, NoDelete: true, AfterCleanup: unstagedOrLeaked, DataLost: true, Observe: observeFault, Holds: mayLeaveBound})

var _ = addFault(catalogue.Entry{
	Name: "driver-registers-late", Item: 6,
	Plants: "the pods force-deleted and the CSI driver's node service stopped while the kubelet is down; the driver started again once the kubelet logs that it looked for it (bounded wait), and registers",
	Checks: "transient errors, then the old pods cleaned; the re-created pods on the same volumes with their data",
	Expect: []catalogue.Expectation{{From: "1.30", Outcome: catalogue.Clean, Says: "reconstruction does not need the driver; unpublish retries until it registers, then the old pods are cleaned"}},
	Needs:  driverNeeds,
}, Fault{Plant: stopDriver, AfterStart: startDriverLate, Observe: observeLeftovers})

var _ = addFault(catalogue.Entry{
	Name: "apiserver-unreachable", Item: 7,
	Plants: "nothing deleted; the API server unreachable from this kubelet alone (its connections refused) for the first 30 s after its start, then restored; the pods keep running",
	Checks: "the kubelet's connections refused and no node heartbeat during the outage (the cut is real); then the same pods Running with the same containers, and every mount of theirs with its mount ID unchanged",
	// Measured on v1.36.3 and v1.37.2 (2026-12): nothing unmounted.
	// #120150 (open) needs the pods listed and then the PVC GET
	// failing (a flaky network); a whole outage keeps the pod
	// sources unready, so the reconciler unmounts nothing.
	Expect: []catalogue.Expectation{{From: "1.28", Outcome: catalogue.Clean, Says: "with the API server wholly unreachable the pod sources are not ready, so nothing is unmounted; #120150's partial outage (pods listed, the PVC GET failing) is not planted here",
		Refs: []catalogue.Ref{catalogue.Issue(120150), catalogue.Issue(117745)}}},
	Needs: []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.APIServerOutage},
}, Fault{KeepPods: true, Plant: cutAPIServer, AfterStart: holdOutage, Observe: observeUntouched, Holds: apiserverOutage})

var _ = addFault(catalogue.Entry{
	Name: "rejected-feature-gate", Item: 12,
	Plants: "the swapped kubelet's configuration sets featureGates {NewVolumeManagerReconstruction: false}, a gate removed in 1.32 (as a config kept from an older kubelet would); the pods force-deleted",
	Checks: "the kubelet refuses to start and the harness's error names the gate and the kubelet version (a plain run exits 1: a kubelet that refuses to start after a swap); then the gate is taken out, the kubelet starts and the old pods are cleaned",
	Expect: []catalogue.Expectation{{Outcome: catalogue.Clean, Says: "the kubelet exits; skewtest names the gate and the version"}},
	Needs:  []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.KubeletFeatureGates},
}, Fault{Plant: plantRejectedGate, Start: startRejected, Observe: observeFault})

// The catalogue faults that disrupt the kubelet, its CSI driver or its
// way to the API server rather than plant files: each needs a node
// capability (nodes.WithKubeletKill, WithCSIDriver, WithAPIServerOutage,
// WithKubeletFeatureGates) and says so plainly on a node without it.

// The faults' bounds, before timeouts.Scale, and the outage's length.
const (
	// stallTimeout bounds the wait for a stalled CSI call to arrive (and,
	// for kill-between-unpublish-unstage, the pod dir to go).
	stallTimeout = time.Minute
	// driverAskTimeout bounds the wait for a kubelet without its CSI
	// driver to say it looked for it.
	driverAskTimeout = 30 * time.Second
	// apiserverOutage is how long the API server stays unreachable from a
	// starting kubelet (#120150: 30-60 s). It is the fault, not a
	// timeout: it is not scaled.
	apiserverOutage = 30 * time.Second
)

// rejectedGate is the feature gate rejected-feature-gate plants, set
// false: NewVolumeManagerReconstruction went GA in 1.30 and was removed
// in 1.32, so every kubelet skewtest runs (1.34 on) refuses it, as a
// configuration kept from an older kubelet would give it.
const rejectedGate = "NewVolumeManagerReconstruction"

// The kubelet's words when a CSI call finds no registered driver.
const driverMissingLog = "not found in the list of registered CSI drivers"

// nodeAs is the node's capability T, or an error naming what the fault
// needs of it.
func nodeAs[T any](s *Scenario, what string) (T, error) {
	c, ok := any(s.node).(T)
	if !ok {
		return c, fmt.Errorf("fault %s needs to %s on node %s, and its provider cannot", s.cfg.Fault.Entry.Name, what, s.node)
	}
	return c, nil
}

func (s *Scenario) faultStep(fn func(context.Context, *Scenario, *scenarios.StepContext) error) func(context.Context, *scenarios.StepContext) error {
	return func(ctx context.Context, sc *scenarios.StepContext) error { return fn(ctx, s, sc) }
}

// recordDown records the node state the kubelet will find, for a hop that
// deletes nothing while it is down.
func (s *Scenario) recordDown(ctx context.Context, sc *scenarios.StepContext) error {
	snap, err := s.snapshot(ctx, sc.Node)
	if err != nil {
		return err
	}
	s.down = snap
	s.volsAtStart = 0
	for _, u := range s.oldUIDs {
		s.volsAtStart += len(snap.Pod(u).VolumeDirs())
	}
	s.snapshotEvidence(sc, "node state while the kubelet is down", snap)
	sc.Note("%d things of the old pods %s on the node, %d volume dirs for reconstruction", len(snap.Leftovers(s.oldUIDs)), strings.Join(s.oldUIDs, ", "), s.volsAtStart)
	return nil
}

// observeFault: what the fault's own steps saw: a sign of a bug in words
// (s.faultSeen) or as traces (s.faultTraces).
func observeFault(_ context.Context, s *Scenario, _ *scenarios.StepContext) (catalogue.Observation, error) {
	o := catalogue.Observation{Detail: s.faultDetail, Traces: append([]catalogue.Trace(nil), s.faultTraces...)}
	if len(s.faultSeen) > 0 {
		o.Seen, o.Detail = true, strings.Join(s.faultSeen, "; ")
	}
	return o, nil
}

// stall makes the node's CSI driver hold calls of method until release.
func stall(ctx context.Context, sc *scenarios.StepContext, d nodes.WithCSIDriver, method string) error {
	_, err := exec.Output(ctx, sc.Node, "touch", path.Join(d.CSIStallDir(), method))
	return err
}

func release(ctx context.Context, sc *scenarios.StepContext, d nodes.WithCSIDriver, method string) error {
	_, err := exec.Output(ctx, sc.Node, "rm", "-f", path.Join(d.CSIStallDir(), method))
	return err
}

// heldCall is a CSI call the node's driver holds (its stall knob) until
// the kubelet is SIGKILLed in the middle of it: faults 4 and 5.
type heldCall struct {
	method string
	drv    nodes.WithCSIDriver
	killer nodes.WithKubeletKill
}

// holdCall has the node's driver hold method from now on; the caller
// defers h.release, so that a failed fault never leaves the driver stalled.
func holdCall(ctx context.Context, s *Scenario, sc *scenarios.StepContext, method string) (*heldCall, error) {
	drv, err := nodeAs[nodes.WithCSIDriver](s, "stall its CSI driver")
	if err != nil {
		return nil, err
	}
	killer, err := nodeAs[nodes.WithKubeletKill](s, "SIGKILL its kubelet")
	if err != nil {
		return nil, err
	}
	if err := stall(ctx, sc, drv, method); err != nil {
		return nil, err
	}
	return &heldCall{method: method, drv: drv, killer: killer}, nil
}

func (h *heldCall) release(ctx context.Context, sc *scenarios.StepContext) error {
	return release(ctx, sc, h.drv, h.method)
}

// killAndRelease SIGKILLs the kubelet while the call is held, then lets
// the driver go on.
func (h *heldCall) killAndRelease(ctx context.Context, sc *scenarios.StepContext) error {
	if err := h.killer.KillKubelet(ctx); err != nil {
		return err
	}
	return h.release(ctx, sc)
}

// waitStalled waits until a call of method is held by the stall and ready
// also holds; it returns the held call's target or staging path.
func (s *Scenario) waitStalled(ctx context.Context, sc *scenarios.StepContext, d nodes.WithCSIDriver, method string, ready func(context.Context) (bool, string)) (string, error) {
	marker := path.Join(d.CSIStallDir(), method+".stalled")
	var target, last string
	cond := func(ctx context.Context) (bool, error) {
		r, err := exec.Output(ctx, sc.QuietNode, "cat", marker)
		if err != nil {
			last = "no " + method + " call held yet"
			return false, nil
		}
		target = strings.TrimSpace(r.Stdout)
		if ready == nil {
			return true, nil
		}
		ok, why := ready(ctx)
		last = why
		return ok, nil
	}
	timeout := s.scaled(stallTimeout)
	if err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return "", fmt.Errorf("fault %s: %s not held by the driver's stall within %s (%s): %w", s.cfg.Fault.Entry.Name, method, timeout, last, err)
	}
	return target, nil
}

// podUIDOf is the pod UID in a kubelet path (.../pods/<uid>/volumes/...).
func podUIDOf(p string) string {
	parts := strings.Split(p, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "pods" {
			return parts[i+1]
		}
	}
	return ""
}

// killDuringPublish (fault 4): with the kubelet up, the driver is told to
// hold NodePublishVolume and the pods are force-deleted; the StatefulSet
// re-creates them, the kubelet writes their vol_data.json and calls
// NodePublishVolume, and while that call is held the kubelet is
// SIGKILLed. The half-published pod is what the restarted kubelet must
// reconstruct (as uncertain) and clean up after the hop's force-delete.
func killDuringPublish(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	const method = "NodePublishVolume"
	h, err := holdCall(ctx, s, sc, method)
	if err != nil {
		return err
	}
	defer h.release(context.WithoutCancel(ctx), sc)
	pods, err := s.listPods(ctx)
	if err != nil {
		return err
	}
	for i := range pods {
		if err := s.res.Delete(ctx, &pods[i], resources.WithGracePeriod(0)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("force-delete pod %s (uid %s) with the kubelet up: %w", pods[i].Name, pods[i].UID, err)
		}
	}
	sc.Note("force-deleted %d pods with the kubelet up; the StatefulSet re-creates them and the driver holds their %s", len(pods), method)
	target, err := s.waitStalled(ctx, sc, h.drv, method, nil)
	if err != nil {
		return err
	}
	if err := h.killAndRelease(ctx, sc); err != nil {
		return err
	}
	uid := podUIDOf(target)
	if uid == "" {
		return fmt.Errorf("fault %s: the held %s has no pod UID in its target path %q", s.cfg.Fault.Entry.Name, method, target)
	}
	sc.Note("kubelet SIGKILLed while %s of pod uid %s was held by the driver (target %s); stall released", method, uid, target)
	s.oldUIDs = append(s.oldUIDs, uid)
	return nil
}

// scale sets the StatefulSet's replicas.
func (s *Scenario) scale(ctx context.Context, replicas int) error {
	sts, err := s.cs.AppsV1().StatefulSets(s.cfg.Namespace).GetScale(ctx, s.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get the scale of StatefulSet %s/%s: %w", s.cfg.Namespace, s.cfg.Name, err)
	}
	sts.Spec.Replicas = int32(replicas)
	if _, err := s.cs.AppsV1().StatefulSets(s.cfg.Namespace).UpdateScale(ctx, s.cfg.Name, sts, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scale StatefulSet %s/%s to %d: %w", s.cfg.Namespace, s.cfg.Name, replicas, err)
	}
	return nil
}

// killBetweenUnpublishUnstage (fault 5): with the kubelet up, the driver
// is told to hold NodeUnstageVolume and the StatefulSet is scaled to 0;
// the kubelet unpublishes, removes the pod dirs and calls
// NodeUnstageVolume, and while that call is held it is SIGKILLed. The
// node keeps the staged global mounts and nothing the kubelet could
// reconstruct them from (#85476).
func killBetweenUnpublishUnstage(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	const method = "NodeUnstageVolume"
	if s.volumes.NoStagingMount || len(s.volumes.PVs) == 0 || s.volumes.PVs[0].Driver == "" {
		return fmt.Errorf("fault %s needs CSI volumes whose driver mounts at the global mount", s.cfg.Fault.Entry.Name)
	}
	h, err := holdCall(ctx, s, sc, method)
	if err != nil {
		return err
	}
	defer h.release(context.WithoutCancel(ctx), sc)
	if err := s.scale(ctx, 0); err != nil {
		return err
	}
	podDirsGone := func(ctx context.Context) (bool, string) {
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil {
			return false, err.Error()
		}
		if left := snap.Leftovers(s.oldUIDs); len(left) > 0 {
			return false, fmt.Sprintf("%s held; %d things of the old pods left, first %s", method, len(left), left[0])
		}
		return true, ""
	}
	target, err := s.waitStalled(ctx, sc, h.drv, method, podDirsGone)
	if err != nil {
		return err
	}
	if err := h.killAndRelease(ctx, sc); err != nil {
		return err
	}
	snap, err := s.snapshot(ctx, sc.Node)
	if err != nil {
		return err
	}
	for _, pv := range s.volumes.PVs {
		if p, n := snap.CSIGlobalMount(pv.Driver, pv.VolumeHandle); n == 0 {
			return fmt.Errorf("fault %s: the global mount %s of PV %s is gone although its %s was held: the fault would prove nothing", s.cfg.Fault.Entry.Name, p, pv.Name, method)
		}
	}
	sc.Note("StatefulSet scaled to 0; the old pods' dirs gone; kubelet SIGKILLed while %s of %s was held; stall released; %d global mounts still staged", method, target, len(s.volumes.PVs))
	return nil
}

// unstagedOrLeaked waits (bounded) for the restarted kubelet to unstage
// the global mounts no pod uses, records what it left, then scales the
// StatefulSet back up for the hop's checks and the next hop.
func unstagedOrLeaked(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	var leaked []catalogue.Trace
	cond := func(ctx context.Context) (bool, error) {
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil {
			return false, nil
		}
		leaked = s.globalMountTraces(snap)
		return len(leaked) == 0, nil
	}
	err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(mayLeaveBound), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate())
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		s.faultTraces = append(s.faultTraces, leaked...)
		s.faultDetail = fmt.Sprintf("%s after %s with no pod using it (bounded wait)", joinTraces(leaked), mayLeaveBound)
		sc.Note("the kubelet left %d staged global mounts no pod uses: %s", len(leaked), joinTraces(leaked))
	default:
		s.faultDetail = fmt.Sprintf("the kubelet unstaged the %d global mounts no pod used", len(s.volumes.PVs))
		sc.Note("%s", s.faultDetail)
	}
	if err := s.scale(ctx, s.cfg.Replicas); err != nil {
		return err
	}
	sc.Note("StatefulSet scaled back to %d", s.cfg.Replicas)
	return nil
}

// stopDriver (fault 6) stops the node's CSI driver while the kubelet is
// down, so that the kubelet starts and reconstructs without it.
func stopDriver(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	drv, err := nodeAs[nodes.WithCSIDriver](s, "stop and start its CSI driver")
	if err != nil {
		return err
	}
	if err := drv.StopCSIDriver(ctx); err != nil {
		return err
	}
	sc.Note("CSI driver stopped: the kubelet starts without it; its mounts stay")
	return nil
}

// startDriverLate waits (bounded) until the kubelet says it looked for the
// missing driver, then starts the driver, which registers.
func startDriverLate(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	drv, err := nodeAs[nodes.WithCSIDriver](s, "stop and start its CSI driver")
	if err != nil {
		return err
	}
	logs, err := nodeAs[nodes.WithKubeletLog](s, "read its kubelet's log")
	if err != nil {
		return err
	}
	var line string
	cond := func(ctx context.Context) (bool, error) {
		text, err := logs.KubeletLog(ctx)
		if err != nil {
			return false, nil
		}
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, driverMissingLog) {
				line = strings.TrimSpace(l)
				return true, nil
			}
		}
		return false, nil
	}
	timeout := s.scaled(driverAskTimeout)
	err = wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate())
	if ctx.Err() != nil {
		return ctx.Err()
	}
	asked := time.Since(s.kubeletUp).Round(10 * time.Millisecond)
	if err != nil {
		sc.Note("the kubelet did not log %q within %s of its start; starting the driver now", driverMissingLog, timeout)
	} else {
		// Quote the end of the line: the kubelet's error, not its prefix.
		if i := strings.Index(line, driverMissingLog) + len(driverMissingLog); i > maxQuoted {
			line = "…" + line[i-maxQuoted:i]
		}
		sc.Note("%s after its start the kubelet looked for the missing driver: %s", asked, line)
	}
	if err := drv.StartCSIDriver(ctx); err != nil {
		return err
	}
	sc.Note("CSI driver started %s after the kubelet; it registers through the plugin registration socket", time.Since(s.kubeletUp).Round(10*time.Millisecond))
	return nil
}

// cutAPIServer (fault 7) makes the API server unreachable for the node's
// kubelet from its start.
func cutAPIServer(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	o, err := nodeAs[nodes.WithAPIServerOutage](s, "cut its kubelet off from the API server")
	if err != nil {
		return err
	}
	if err := o.CutAPIServer(ctx); err != nil {
		return err
	}
	sc.Note("the API server is unreachable for the kubelet of %s from its start (the rest of the cluster still reaches it)", s.node)
	return nil
}

// holdOutage keeps the API server unreachable for apiserverOutage after
// the kubelet's start, restores it, and checks that the kubelet met the
// cut (connections refused) and got nothing through (no heartbeat).
func holdOutage(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	o, err := nodeAs[nodes.WithAPIServerOutage](s, "cut its kubelet off from the API server")
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(s.kubeletUp.Add(apiserverOutage))):
	}
	refused, err := o.RestoreAPIServer(ctx)
	if err != nil {
		return err
	}
	if refused == 0 {
		return fmt.Errorf("fault %s: the kubelet made no connection to the API server in its first %s, so the cut proved nothing", s.cfg.Fault.Entry.Name, apiserverOutage)
	}
	// The node's heartbeat is the kubelet's (every 2 s on local nodes):
	// one after its start means the cut let something through.
	var node corev1.Node
	if err := s.res.Get(ctx, s.node.String(), "", &node); err != nil {
		return fmt.Errorf("read node %s: %w", s.node, err)
	}
	beat := "none"
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		beat = c.LastHeartbeatTime.UTC().Format(time.RFC3339)
		if c.LastHeartbeatTime.After(s.kubeletUp) {
			return fmt.Errorf("fault %s: node %s has a heartbeat at %s, after the kubelet's start at %s, although the API server was cut off from it", s.cfg.Fault.Entry.Name, s.node, beat, s.kubeletUp.UTC().Format(time.RFC3339Nano))
		}
	}
	sc.Note("API server unreachable from the kubelet for its first %s: %d connections refused, the node's last heartbeat %s (before the start); restored", apiserverOutage, refused, beat)
	return nil
}

// plantRejectedGate (fault 12) gives the swapped kubelet a configuration
// with a feature gate it rejects, beside its plan entry's own gates.
func plantRejectedGate(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	g, err := nodeAs[nodes.WithKubeletFeatureGates](s, "set feature gates in its kubelet's configuration")
	if err != nil {
		return err
	}
	gates := withGates(s.hop.ToGates, rejectedGate, false)
	if err := g.SetKubeletFeatureGates(ctx, gates); err != nil {
		return err
	}
	sc.Note("kubelet configuration now sets featureGates: %s", gateList(gates))
	return nil
}

// startRejected starts the kubelet with the rejected gate: it must refuse,
// and the harness's error must name the gate and the kubelet's version
// (in a plain run that error fails it with exit code 1, a kubelet that
// refuses to start after a swap). Then the gate is taken out and the
// kubelet started as usual, so the hop goes on.
func startRejected(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	g, err := nodeAs[nodes.WithKubeletFeatureGates](s, "set feature gates in its kubelet's configuration")
	if err != nil {
		return err
	}
	err = s.node.StartKubelet(ctx)
	if err == nil {
		return fmt.Errorf("fault %s: kubelet %s started with featureGates {%s: false}; the fault expects it to refuse (update rejectedGate)", s.cfg.Fault.Entry.Name, s.hop.To, rejectedGate)
	}
	var rg *nodes.RejectedFeatureGateError
	msg := err.Error()
	if errors.As(err, &rg) && rg.Gate == rejectedGate && strings.Contains(msg, s.hop.To) {
		s.faultDetail = "the kubelet refused and the harness said so plainly: " + msg
	} else {
		s.faultSeen = append(s.faultSeen, fmt.Sprintf("the kubelet's refusal was reported without naming gate %s and version %s: %s", rejectedGate, s.hop.To, msg))
	}
	sc.Note("kubelet %s refused to start: %s", s.hop.To, msg)
	// Back to the plan entry's own gates (none, for most plans).
	if err := g.SetKubeletFeatureGates(ctx, s.hop.ToGates); err != nil {
		return err
	}
	sc.Note("feature gate taken out of the configuration; starting the kubelet again")
	return s.startKubelet(ctx, sc)
}
