package reconstruction

// This file plants and observes reboot-block (#119608): a raw block
// volume after a reboot, its first re-stage failing as a disk not back
// yet fails it, and its pod deleted meanwhile. A kubelet without #122211
// marks the reconstructed device unmounted when the re-stage fails, which
// clears the map path its UnmapVolume then unmaps from ("mapPath is
// empty"): the deleted pod stays Terminating.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/loopdev"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

var _ = addFault(catalogue.Entry{
	Name:   "reboot-block",
	Plants: "the block shape's workload (skewtest's driver in CSI_MODE=ebs); with the kubelet down and nothing deleted, what a reboot takes of the raw block volume: the pod's map link bind (plugins/kubernetes.io/csi/volumeDevices/<pv>/dev/<uid>), the driver's publish bind and the kubelet's loop device, dirs, links and vol_data.json kept; and its first re-stage made to fail, as a disk not back yet after a reboot fails it (a file where the kubelet makes the staging dir plugins/kubernetes.io/csi/volumeDevices/staging/<pv>); once the kubelet logs MapVolume.SetUpDevice failed, the pods are deleted (gracefully) and, once it unmaps them, the staging path is freed",
	Checks: "the deleted pods gone from the API and the node within a bounded wait (their map link, publish target and pod dir removed) and the re-created pods running; where the bug shows, the stuck pods are force-deleted, as an admin would, so that the re-created pod maps the volume again and the kubelet finishes the old one",
	// Two fixes close it. #122211 keeps a reconstructed device
	// uncertain when its re-stage fails; without it
	// markDeviceErrorState marks the device unmounted, which
	// clears its map path in the actual state. #123032 (1.30.0
	// only) has GenerateUnmapVolumeFunc take the global map path
	// from the volume's mapper instead of that state. A kubelet
	// with either unmaps the deleted pod; every release with
	// #123032 has #122211, so this fault cannot tell #123032 apart
	// (its own trigger, cleanupMounts of a block volume, passes
	// no volume spec and so takes the filesystem unmount path).
	Expect: rebootBlockExpect(),
	Needs:  blockNeeds,
}, Fault{Shapes: []string{ShapeBlock}, NoDelete: true, Plant: plantRebootBlock, AfterStart: deleteOnFailedRestage, MayLeave: true, AfterCleanup: checkStuckUnmap, Observe: observeFault})

// rebootBlockBug names #119608 in the report.
const rebootBlockBug = "deleted pod stuck Terminating: UnmapVolume \"mapPath is empty\""

// rebootBlockSymptom: each deleted pod stays in the API, Terminating; its
// dir stays, with its map link (plugins/kubernetes.io/csi/volumeDevices/
// <pv>/dev/<uid>) and its publish target (.../publish/<pv>/<uid>): the
// unmap removes the pod's own link, then fails on the empty global map
// path (util.UnmapBlockVolume, 1.26 to 1.29). #122211's own line, the
// device left uncertain, rules the bug out.
var rebootBlockSymptom = catalogue.Symptom{
	Traces: []catalogue.Trace{
		{Kind: catalogue.Terminating, Path: "pods/" + catalogue.OldUID},
		oldPodDir,
		{Kind: catalogue.File, Path: "plugins/kubernetes.io/csi/volumeDevices/" + catalogue.PV + "/dev/" + catalogue.OldUID},
		{Kind: catalogue.File, Path: "plugins/kubernetes.io/csi/volumeDevices/publish/" + catalogue.PV + "/" + catalogue.OldUID},
	},
	Logs:   []string{"UnmapVolume.UnmapBlockVolume failed for volume*" + catalogue.OldUID + "*mapPath is empty"},
	Absent: []string{"markDeviceErrorState leaving volume uncertain"},
}

// rebootBlockExpect: #119608 on every release without #122211; clean
// from each minor's first release with it (the unmap finds its path in
// the actual state), and from 1.30.0 with #123032 too (the unmap takes
// the path from the volume's mapper).
func rebootBlockExpect() []catalogue.Expectation {
	refs := []catalogue.Ref{catalogue.Issue(119608), catalogue.Issue(122960), catalogue.PR(122211), catalogue.PR(123032)}
	out := catalogue.ByFix("1.26",
		catalogue.Expectation{Outcome: catalogue.KnownBug, Bug: rebootBlockBug,
			Says:    "the failed re-stage marks the reconstructed device unmounted and clears its map path, and the unmap takes its global map path from there, so every UnmapVolume of the deleted pod fails (\"UnmapVolume.UnmapBlockVolume failed ... mapPath is empty\"): the pod stays Terminating with pods/<uid>, its map link volumeDevices/<pv>/dev/<uid> and its publish target publish/<pv>/<uid>, until a pod maps the volume again",
			Symptom: rebootBlockSymptom, Refs: refs},
		catalogue.Expectation{Outcome: catalogue.Clean, Says: "the reconstructed device stays uncertain with its map path (#122211: \"markDeviceErrorState leaving volume uncertain\"), so the deleted pod is unmapped and the device unstaged; #123032 is not in this release",
			Refs: refs},
		"1.26.13", "1.27.10", "1.28.6", "1.29.1", "1.30.0")
	last := &out[len(out)-1]
	last.Says = "the reconstructed device stays uncertain with its map path (#122211), and the unmap takes the global map path from the volume's mapper (#123032), so the deleted pod is unmapped and the device unstaged"
	return out
}

const (
	// restageWait bounds the wait, from the kubelet's start, for its
	// first failed re-stage of the block volume: the running pod's
	// volume is set up again within seconds of the start (the desired
	// state is populated, the VolumeAttachment read), and every kubelet
	// from 1.26 does it.
	restageWait = 60 * time.Second
	// unmapWait bounds the wait, from the pods' deletion, for the
	// kubelet to unmap them: the pod worker stops the containers (grace
	// 5 s) before the volume manager drops the pods from its desired
	// state.
	unmapWait = 60 * time.Second
)

// The kubelet's words (operation_generator.go, the same in 1.26 to 1.37):
// its failed re-stage of a block volume, and its unmap of a pod's block
// volume, done or failed (#119608's symptom is the catalogue's).
const (
	restageFailedLog = "MapVolume.SetUpDevice failed for volume"
	unmapDoneLog     = "UnmapVolume succeeded for volume"
	unmapFailedLog   = "UnmapVolume.UnmapBlockVolume failed"
	// leftUncertainLog is #122211's own line: the failed re-stage leaves
	// the reconstructed device uncertain, with its map path.
	leftUncertainLog = "markDeviceErrorState leaving volume uncertain"
)

// blockObstruction is what plantRebootBlock writes where the kubelet makes
// a block volume's staging dir.
const blockObstruction = "planted by skewtest: the block volume's first re-stage after the reboot fails here\n"

// blockReboot is what a reboot takes of the pods' raw block volumes and
// how their first re-stage is made to fail (planBlockReboot).
type blockReboot struct {
	// loops are the kubelet's loop devices over the pods' map links (its
	// lock on the device), detached first: the kernel names their backing
	// file only while the map link is mounted.
	loops []loopdev.Device
	// unmount are the map link binds (the kubelet's) and the publish
	// binds (the driver's), absolute, as many times as mounted.
	unmount []string
	// staging are the volumes' staging dirs, absolute, each replaced by a
	// regular file so that the kubelet's MkdirAll of it fails.
	staging []string
}

// planBlockReboot says what plantRebootBlock takes from pods uids' raw
// block volumes (PVs pvs) on the node in snap, with the node's loop
// devices loops.
func planBlockReboot(snap *nodestate.Snapshot, uids, pvs []string, loops []loopdev.Device) (blockReboot, error) {
	var r blockReboot
	staged := map[string]bool{}
	for _, u := range uids {
		for _, pv := range pvs {
			mapLink := blockMapDir(pv) + "/" + u
			n := snap.MountCount(mapLink)
			if n == 0 {
				continue
			}
			for _, d := range loops {
				if d.BackingFile == snap.Abs(mapLink) {
					r.loops = append(r.loops, d)
				}
			}
			for range n {
				r.unmount = append(r.unmount, snap.Abs(mapLink))
			}
			for range snap.MountCount(blockPublish(pv, u)) {
				r.unmount = append(r.unmount, snap.Abs(blockPublish(pv, u)))
			}
			e, ok := snap.Lookup(blockStaging(pv))
			if !ok || e.Type != nodestate.TypeDir {
				return blockReboot{}, fmt.Errorf("block PV %s has no staging dir %s (%s): not the block shape's layout this fault plants in", pv, snap.Abs(blockStaging(pv)), e.Type)
			}
			if !staged[pv] {
				staged[pv] = true
				r.staging = append(r.staging, snap.Abs(blockStaging(pv)))
			}
		}
	}
	if len(r.unmount) == 0 {
		return blockReboot{}, fmt.Errorf("no block volume of pods %v is mapped on the node: the reboot would prove nothing", uids)
	}
	return r, nil
}

// plantRebootBlock, with the kubelet down and the pods running: what a
// reboot takes of their raw block volumes (the kubelet's loop devices, the
// map link and publish binds; dirs, links and vol_data.json stay), and
// the volumes' staging dirs replaced by files so that the kubelet's first
// re-stage fails, as a disk that is not back yet after a reboot fails it
// (#119608 was a power cycle). The driver's attachment (its loop device)
// stays, as a disk stays attached to a machine across its reboot.
func plantRebootBlock(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	if !s.hasShape(ShapeBlock) {
		return fmt.Errorf("fault %s needs the block shape's workload", s.cfg.Fault.Entry.Name)
	}
	loops, err := loopdev.ListOn(ctx, sc.Node)
	if err != nil {
		return err
	}
	r, err := planBlockReboot(s.down, s.oldUIDs, pvNameList(s.shapes.block), loops)
	if err != nil {
		return err
	}
	for _, d := range r.loops {
		if _, err := exec.Output(ctx, sc.Node, "losetup", "-d", d.Path); err != nil {
			return fmt.Errorf("reboot: detach the kubelet's loop device %s over %s: %w", d.Path, d.BackingFile, err)
		}
	}
	for _, p := range r.unmount {
		if _, err := exec.Output(ctx, sc.Node, "umount", p); err != nil {
			return fmt.Errorf("reboot: %w", err)
		}
	}
	for _, p := range r.staging {
		// rmdir: an empty dir, as the driver leaves it for a raw block
		// volume; anything in it is not this fault's to remove.
		if _, err := exec.Output(ctx, sc.Node, "rmdir", p); err != nil {
			return fmt.Errorf("replace the block volume's staging dir with a file: %w", err)
		}
		if _, err := exec.OutputStdin(ctx, sc.Node, strings.NewReader(blockObstruction), "sh", "-c", `cat > "$1"`, "sh", p); err != nil {
			return err
		}
	}
	sc.Note("reboot of the block volumes: detached the kubelet's loop devices %s, unmounted %s; dirs, links and vol_data.json kept; the staging dirs %s replaced by files, so that the first re-stage fails",
		describeLoops(r.loops), strings.Join(r.unmount, ", "), strings.Join(r.staging, ", "))
	return nil
}

// deleteOnFailedRestage, once the kubelet runs: it waits until the kubelet
// has failed to re-stage each block volume, deletes the pods (gracefully,
// as #119608's were deleted or evicted while their node was off), waits
// until the kubelet has unmapped them or failed to, and then frees the
// staging paths (the disk is back). A kubelet with the bug has by then
// cleared the map path, and no pod wants the volume any more to set it
// again.
func deleteOnFailedRestage(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	logs, err := nodeAs[nodes.WithKubeletLog](s, "read its kubelet's log")
	if err != nil {
		return err
	}
	pvs := pvNameList(s.shapes.block)
	var failed []string
	found := func(ctx context.Context) (bool, error) {
		text, err := logs.KubeletLog(ctx)
		if err != nil {
			return false, nil
		}
		failed = nil
		for _, pv := range pvs {
			if line := findVolumeLine(text, restageFailedLog, pv); line != "" {
				failed = append(failed, line)
			}
		}
		return len(failed) == len(pvs), nil
	}
	if err := wait.For(found, wait.WithContext(ctx), wait.WithTimeout(s.scaled(restageWait)), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return fmt.Errorf("the kubelet did not log %q for each block PV %v within %s of its start (%d seen): the fault did not take, the hop would prove nothing: %w",
			restageFailedLog, pvs, s.scaled(restageWait), len(failed), err)
	}
	sc.Note("%s after its start the kubelet failed to re-stage the block volumes: %s", time.Since(s.kubeletUp).Round(10*time.Millisecond), strings.Join(failed, "; "))
	pods, err := s.listPods(ctx)
	if err != nil {
		return err
	}
	for i := range pods {
		if err := s.res.Delete(ctx, &pods[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s (uid %s): %w", pods[i].Name, pods[i].UID, err)
		}
	}
	deleted := time.Now()
	var lines []string
	unmapped := func(ctx context.Context) (bool, error) {
		text, err := logs.KubeletLog(ctx)
		if err != nil {
			return false, nil
		}
		lines = unmapLines(text, s.oldUIDs)
		return len(lines) == len(s.oldUIDs), nil
	}
	if err := wait.For(unmapped, wait.WithContext(ctx), wait.WithTimeout(s.scaled(unmapWait)), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return fmt.Errorf("pods %s deleted, but the kubelet did not unmap their block volumes, or fail to, within %s (%d of %d seen): %w",
			strings.Join(s.oldUIDs, ", "), s.scaled(unmapWait), len(lines), len(s.oldUIDs), err)
	}
	sc.Note("pods %s deleted; %s later the kubelet unmapped them or tried: %s", strings.Join(s.oldUIDs, ", "), time.Since(deleted).Round(10*time.Millisecond), strings.Join(lines, "; "))
	return freeStaging(ctx, s, sc)
}

// unmapLines are, for each of uids, the kubelet's first line saying it
// unmapped the pod's block volume or failed to, in uids' order; a UID
// without one has none.
func unmapLines(log string, uids []string) []string {
	var out []string
	for _, u := range uids {
		line := findUIDLine(log, unmapDoneLog, u)
		if line == "" {
			line = findUIDLine(log, unmapFailedLog, u)
		}
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// freeStaging removes the files plantRebootBlock put at the staging paths,
// where the kubelet did not remove them itself (its unstage does).
func freeStaging(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	var freed []string
	for _, pv := range pvNameList(s.shapes.block) {
		p := s.down.Abs(blockStaging(pv))
		res, err := exec.Output(ctx, sc.Node, "sh", "-c", `if [ -f "$1" ] && [ ! -L "$1" ]; then rm -f -- "$1" && echo freed; fi`, "sh", p)
		if err != nil {
			return fmt.Errorf("free the block volume's staging path %s: %w", p, err)
		}
		if strings.TrimSpace(res.Stdout) == "freed" {
			freed = append(freed, p)
		}
	}
	if len(freed) > 0 {
		sc.Note("the disk is back: removed the files at the staging paths %s", strings.Join(freed, ", "))
	} else {
		sc.Note("the kubelet had already removed the files at the staging paths (its unstage removes the staging path)")
	}
	return nil
}

// terminatingTraces are the deleted pods uids still in the API (pods),
// Terminating: #119608 keeps them there, their unmap failing.
func terminatingTraces(uids []string, pods []corev1.Pod) []catalogue.Trace {
	want := map[string]bool{}
	for _, u := range uids {
		want[u] = true
	}
	var out []catalogue.Trace
	for _, p := range pods {
		if want[string(p.UID)] && p.DeletionTimestamp != nil {
			out = append(out, catalogue.Trace{Kind: catalogue.Terminating, Path: "pods/" + string(p.UID),
				Detail: fmt.Sprintf("pod %s, deleted %s", p.Name, p.DeletionTimestamp.UTC().Format(time.RFC3339))})
		}
	}
	return out
}

// checkStuckUnmap, once the old pods' cleanup was waited for: pods that
// left nothing are clean (the kubelet's own line saying the device stayed
// uncertain quoted when it logged one). Otherwise the deleted pods still
// Terminating in the API are recorded as traces, beside what they left on
// the node, for the catalogue's judge to hold against #119608's symptom;
// then they are force-deleted, as an admin would, so that the
// StatefulSet's new pod maps the volume, which sets the map path again:
// the kubelet must then finish the old pods, so that the rest of the run
// starts from a clean node.
func checkStuckUnmap(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	if len(s.left) == 0 {
		s.faultDetail = fmt.Sprintf("the deleted pods %s were unmapped and cleaned after the failed re-stage", strings.Join(s.oldUIDs, ", "))
		if logs, ok := s.node.(nodes.WithKubeletLog); ok {
			if text, err := logs.KubeletLog(ctx); err == nil {
				if line := grepLines(text, leftUncertainLog, 1); line != "" {
					s.faultDetail += "; the kubelet logged: " + quoteFrom(line, leftUncertainLog)
				}
			}
		}
		return nil
	}
	var list corev1.PodList
	if err := s.res.WithNamespace(s.cfg.Namespace).List(ctx, &list); err != nil {
		return err
	}
	s.faultTraces = append(s.faultTraces, terminatingTraces(s.oldUIDs, list.Items)...)
	s.faultDetail = fmt.Sprintf("%s after the kubelet's start the deleted pods left: %s; still Terminating in the API: %s",
		time.Since(s.kubeletUp).Round(time.Second), s.leftoverHeadline(ctx, s.left), joinTraces(s.faultTraces))
	var stuck []corev1.Pod
	for _, p := range list.Items {
		for _, u := range s.oldUIDs {
			if string(p.UID) == u {
				stuck = append(stuck, p)
			}
		}
	}
	for i := range stuck {
		if err := s.res.Delete(ctx, &stuck[i], resources.WithGracePeriod(0)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("force-delete the stuck pod %s (uid %s): %w", stuck[i].Name, stuck[i].UID, err)
		}
	}
	start := time.Now()
	var last []nodestate.Leftover
	gone := func(ctx context.Context) (bool, error) {
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil {
			return false, nil
		}
		last = snap.Leftovers(s.oldUIDs)
		return len(last) == 0, nil
	}
	// The kubelet retries the failed unmap with its back-off, at most
	// every 2 min 2 s, and succeeds once the new pod's map set the path.
	if err := wait.For(gone, wait.WithContext(ctx), wait.WithTimeout(s.cfg.CleanupTimeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return fmt.Errorf("stuck pods force-deleted, but the kubelet did not finish them within %s once the StatefulSet's new pod could map the volume: %s: %w", s.cfg.CleanupTimeout, s.leftoverHeadline(ctx, last), err)
	}
	sc.Note("%d stuck pods force-deleted; the StatefulSet's new pod mapped the volume, and %s later the kubelet had finished the old ones", len(stuck), time.Since(start).Round(time.Second))
	return nil
}
