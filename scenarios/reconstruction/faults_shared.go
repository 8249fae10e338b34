package reconstruction

// This file plants and observes reboot-shared-volume (#119921): two pods
// on one volume, a reboot, one of them deleted meanwhile. The old
// reconstruction before #119923 lets the surviving pod's reconstructed
// volume join the deleted pod's and marks both Mounted, so the kubelet
// never publishes the surviving pod's volume again.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

var _ = addFault(catalogue.Entry{
	Name:   "reboot-shared-volume",
	Plants: "a second pod (nodeName set) on the StatefulSet pod's claim, made until its UID sorts after the StatefulSet pod's (the old reconstruction walks pods/ in that order); with the kubelet down the StatefulSet's pod force-deleted and every mount of both pods unmounted as a reboot takes them, the volume's CSI global mount kept (with it gone, #117513, never fixed on the old reconstruction, keeps the surviving pod's volume from being published on every old-path kubelet and would hide this bug); the CSI driver stopped, and started once the kubelet logs that it is not registered, as after a reboot (a driver already there lets the reconciler's first pass publish the surviving pod's volume before the old reconstruction runs, which hides the bug too)",
	Checks: "the surviving pod's volume published again (pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount mounted, the StatefulSet pod's marker read through it) within a bounded watch from the kubelet's start; the deleted pod cleaned; the re-created pod mounts the volume",
	// In 1.28.5's syncStates the deleted pod's and the surviving
	// pod's reconstructed volumes share one globalVolumeInfo, so
	// updateStates marks the surviving pod's volume Mounted too
	// ("Volume is marked as mounted and added into the actual
	// state" with its podName) and it is never set up again.
	// #119923 keeps them apart; the new reconstruction marks every
	// reconstructed volume uncertain, per pod.
	Expect: append(catalogue.ByFix("1.28",
		catalogue.Expectation{Gates: map[string]bool{"NewVolumeManagerReconstruction": false}, Outcome: catalogue.KnownBug, Bug: sharedBug,
			Says: oldPathSharedSays, Symptom: oldPathSharedSymptom, Refs: []catalogue.Ref{catalogue.Issue(119921), catalogue.PR(119923)}, FixedIn: fixed119923},
		catalogue.Expectation{Gates: map[string]bool{"NewVolumeManagerReconstruction": false}, Outcome: catalogue.Clean, Says: "the surviving pod's volume is reconstructed on its own, marked uncertain and published again",
			Refs: []catalogue.Ref{catalogue.Issue(119921), catalogue.PR(119923)}, FixedIn: fixed119923},
		"1.28.6", "1.29.1", "1.30.0"),
		catalogue.ByFix("1.26",
			catalogue.Expectation{Outcome: catalogue.KnownBug, Bug: sharedBug, Says: oldPathSharedSays, Symptom: oldPathSharedSymptom, Refs: []catalogue.Ref{catalogue.Issue(119921), catalogue.PR(119923)}, FixedIn: fixed119923},
			catalogue.Expectation{Outcome: catalogue.Clean, Says: "the surviving pod's volume is marked uncertain on its own (the new reconstruction, or the old one with #119923) and published again",
				Refs: []catalogue.Ref{catalogue.Issue(119921), catalogue.PR(119923)}, FixedIn: fixed119923},
			"1.26.13", "1.27.10")...),
	Needs: driverNeeds,
}, Fault{Stop: stopWithSharer, Plant: plantSharedReboot, AfterStart: startDriverLate, AfterCleanup: watchSharer, Observe: observeFault})

// fixed119923 are the releases with #119923, the fix of #119921: every
// minor's first, whichever range of it an expectation covers.
const fixed119923 = "1.26.13, 1.27.10, 1.28.6, 1.29.1, 1.30.0"

// oldPathSharedSays is what the old reconstruction before #119923 does
// with a volume a deleted pod and a surviving one share.
const oldPathSharedSays = "the old reconstruction adds the surviving pod's volume to the deleted pod's, and marks both Mounted (\"Volume is marked as mounted and added into the actual state\" with the surviving pod's UID): the kubelet never publishes the surviving pod's volume again, and pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount stays an empty dir"

// sharedBug names #119921 in the report.
const sharedBug = "surviving pod's volume never published again"

// oldPathSharedSymptom: the surviving pod (<uid>) has its volume's mount
// taken by the reboot and never back, and the old reconstruction logs
// that it marked that pod's volume Mounted (reconstruct.go updateStates,
// 1.26 to 1.29). The same line without the pod in the desired state
// ("could not find pod information") is the populator's race, which
// marks it Mounted by another way than #119921.
var oldPathSharedSymptom = catalogue.Symptom{
	Traces: []catalogue.Trace{{Kind: catalogue.Unmounted, Path: "pods/" + catalogue.UID + "/volumes/kubernetes.io~csi/" + catalogue.PV + "/mount"}},
	Logs:   []string{"Volume is marked as mounted and added into the actual state*" + catalogue.UID},
	Absent: []string{"could not find pod information in desired state*" + catalogue.UID},
}

const (
	// sharerTries bounds how many pods stopWithSharer draws, the sharer
	// or the StatefulSet's pod, until the sharer's UID sorts after the
	// other's; from any pair it keeps the likelier draw (sharerOdds),
	// so each try succeeds with probability 1/2 or more and 20 tries
	// fail about one time in a million.
	sharerTries = 20
	// sharerWatch is how long, from the kubelet's start, the surviving
	// pod's volume gets to be published again: a kubelet sets up a
	// running pod's volume within seconds of its start (its desired
	// state populated); one that marked it Mounted never does.
	sharerWatch = 30 * time.Second
)

// sharedFaultState is what reboot-shared-volume carries between a hop's
// steps: the surviving pod.
type sharedFaultState struct {
	sharer corev1.Pod
}

// sortsAfter tells whether uid comes after every one of others in the
// order the kubelet lists pods/ (os.ReadDir: by name).
func sortsAfter(uid types.UID, others []string) bool {
	for _, o := range others {
		if string(uid) <= o {
			return false
		}
	}
	return true
}

// uidFraction is where uid falls in the order the kubelet lists pods/
// (os.ReadDir: by name), as a fraction in [0, 1) read from its first
// eight hex digits: a random (version 4) UID is uniform there.
func uidFraction(uid types.UID) float64 {
	n, err := strconv.ParseUint(strings.SplitN(string(uid), "-", 2)[0], 16, 32)
	if err != nil {
		return 0.5
	}
	return float64(n) / (1 << 32)
}

// redrawOwner tells, for a sharer whose UID sorts before the StatefulSet
// pod's (the owner's), which of the two a new draw should replace: a new
// sharer sorts after the owner with probability 1-owner, a new owner
// before the sharer with probability sharer, so the owner is drawn again
// when that is likelier. A high owner UID (the one a run met at
// fd298be0) then no longer takes every try.
func redrawOwner(owner, sharer types.UID) bool {
	return uidFraction(sharer) > 1-uidFraction(owner)
}

// stopWithSharer, with the kubelet up: a pod of its own (nodeName set) on
// the claim of the StatefulSet's first pod, whose UID must sort after
// that pod's, so that the old reconstruction meets the pod it deletes
// first, as #119921 needs (the other StatefulSet pods' volumes are not
// shared, and their order does not matter). Until it does, the likelier
// of the two is drawn again (redrawOwner): a new sharer, or the
// StatefulSet's pod force-deleted and re-created while the sharer keeps
// the volume staged (this driver's volumes keep no data across an
// unstage), its new UID replacing the old in s.oldUIDs. Once the sharer
// runs, the kubelet is stopped.
func stopWithSharer(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	pods, err := s.listPods(ctx)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		return fmt.Errorf("no StatefulSet pod to share a volume with")
	}
	owner := pods[0]
	claim := claimOf(owner)
	if claim == "" {
		return fmt.Errorf("pod %s has no claim to share", owner.Name)
	}
	var tried []string
	for i := range sharerTries {
		p := s.faultPod(fmt.Sprintf("%s-sharer-%d", s.cfg.Name, i), []corev1.Volume{{Name: volumeName, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}, 5)
		if err := s.res.Create(ctx, p); err != nil {
			return fmt.Errorf("create pod %s on claim %s: %w", p.Name, claim, err)
		}
		if !sortsAfter(p.UID, []string{string(owner.UID)}) && redrawOwner(owner.UID, p.UID) {
			// The sharer runs (its volume published) before the owner
			// goes, so that the volume stays staged.
			if _, err := s.waitPod(ctx, p.Name, s.scaled(podsRunningTimeout)); err != nil {
				return err
			}
			was := owner.UID
			if owner, err = s.redrawStatefulSetPod(ctx, sc, owner); err != nil {
				return err
			}
			tried = append(tried, fmt.Sprintf("StatefulSet pod %s for %s", owner.UID, was))
		}
		if sortsAfter(p.UID, []string{string(owner.UID)}) {
			got, err := s.waitPod(ctx, p.Name, s.scaled(podsRunningTimeout))
			if err != nil {
				return err
			}
			s.sharer = got
			sc.Note("pod %s uid %s shares claim %s (PV %s) with %s uid %s, its UID after that pod's; %d draws before (%s)", got.Name, got.UID, claim, s.pvOf[claim], owner.Name, owner.UID, len(tried), strings.Join(tried, ", "))
			return s.node.StopKubelet(ctx)
		}
		tried = append(tried, "sharer "+string(p.UID))
		if err := s.removeFaultPod(ctx, sc, *p); err != nil {
			return err
		}
	}
	return fmt.Errorf("%d sharers made on claim %s, none with a UID after the StatefulSet pod's %s: %s", sharerTries, claim, owner.UID, strings.Join(tried, ", "))
}

// redrawStatefulSetPod force-deletes the StatefulSet's pod old, waits
// until the API and the node are rid of it and its replacement runs, and
// puts the replacement's UID in old's place in s.oldUIDs.
func (s *Scenario) redrawStatefulSetPod(ctx context.Context, sc *scenarios.StepContext, old corev1.Pod) (corev1.Pod, error) {
	if err := s.removeFaultPod(ctx, sc, old); err != nil {
		return corev1.Pod{}, err
	}
	got, err := s.waitPod(ctx, old.Name, s.scaled(podsRunningTimeout))
	if err != nil {
		return corev1.Pod{}, err
	}
	for i, u := range s.oldUIDs {
		if u == string(old.UID) {
			s.oldUIDs[i] = string(got.UID)
		}
	}
	sc.Note("StatefulSet pod %s re-created (uid %s, was %s): a new sharer was less likely to sort after the old UID than a new pod before the sharer's", got.Name, got.UID, old.UID)
	return got, nil
}

// sharedRebootMounts are the mount points plantSharedReboot takes: every
// mount of pods uids (the deleted pods and the survivor), deepest first.
// The CSI global mounts are not among them (they are below plugins/).
func sharedRebootMounts(snap *nodestate.Snapshot, uids []string) []string {
	var points []string
	for _, u := range uids {
		for _, m := range snap.Pod(u).Mounts {
			points = append(points, m.MountPoint)
		}
	}
	sort.SliceStable(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points
}

// plantSharedReboot, with the kubelet down and the StatefulSet's pods
// force-deleted: every mount of theirs and of the surviving pod taken,
// as a reboot takes them; dirs and vol_data.json kept, and the volume's
// CSI global mount kept: with it gone, every old-path kubelet, fixed or
// not, would publish the surviving pod's volume without staging it
// (#117513) and so hide this bug. Then the CSI driver is stopped, to
// register late (startDriverLate), as a driver does after a reboot: the
// old reconstruction runs once the desired state is populated, right
// after the reconciler's first pass, and a driver already there lets that
// pass publish the surviving pod's volume before the reconstruction marks
// it Mounted (1.28.5 showed it), which hides the bug too.
func plantSharedReboot(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	u := string(s.sharer.UID)
	pv := s.pvOf[claimOf(s.sharer)]
	vol := podVolumeDir(s.cfg.Kind, u, pv)
	if s.down.MountCount(vol) == 0 {
		return fmt.Errorf("the surviving pod %s (uid %s) has nothing mounted at %s while the kubelet is down: the reboot would prove nothing", s.sharer.Name, u, s.down.Abs(vol))
	}
	points := sharedRebootMounts(s.down, append(append([]string(nil), s.oldUIDs...), u))
	for _, p := range points {
		if _, err := exec.Output(ctx, sc.Node, "umount", p); err != nil {
			return fmt.Errorf("reboot: %w", err)
		}
	}
	sc.Note("unmounted %d mounts of the deleted pods %s and of the surviving pod %s (uid %s) as a reboot would; dirs, vol_data.json and the CSI global mounts kept", len(points), strings.Join(s.oldUIDs, ", "), s.sharer.Name, u)
	return stopDriver(ctx, s, sc)
}

// watchSharer, once the deleted pods are cleaned: the surviving pod's
// volume must be published again within sharerWatch of the kubelet's
// start, and read the StatefulSet pod's marker. One that is not is
// recorded as a trace (its mount taken), for the catalogue's judge to hold
// against #119921's symptom (the old reconstruction's line marking the
// pod's volume Mounted). Then the surviving pod is removed, for the next
// hop to make its own.
func watchSharer(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	p := s.sharer
	u := string(p.UID)
	pv := s.pvOf[claimOf(p)]
	rel := podVolumeDir(s.cfg.Kind, u, pv)
	vol := s.down.Abs(rel)
	var marker string
	mounted := func(ctx context.Context) (bool, error) {
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil || snap.MountCount(rel) == 0 {
			return false, nil
		}
		res, err := exec.Output(ctx, sc.QuietNode, "cat", vol+"/marker")
		if err != nil {
			return false, nil
		}
		marker = strings.TrimSpace(res.Stdout)
		return true, nil
	}
	timeout := time.Until(s.kubeletUp.Add(s.scaled(sharerWatch)))
	err := wait.For(mounted, wait.WithContext(ctx), wait.WithTimeout(max(timeout, s.cfg.PollInterval)), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate())
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err == nil && marker != s.markers[pv]:
		return fmt.Errorf("the surviving pod %s (uid %s) has its volume %s published again at %s, but it reads marker %q, want %q", p.Name, u, pv, vol, marker, s.markers[pv])
	case err == nil:
		s.faultDetail = fmt.Sprintf("the surviving pod %s (uid %s) had its volume %s published again at %s %s after the kubelet's start, with the StatefulSet pod's marker", p.Name, u, pv, vol, time.Since(s.kubeletUp).Round(100*time.Millisecond))
		if logs, ok := s.node.(nodes.WithKubeletLog); ok {
			if text, err := logs.KubeletLog(ctx); err == nil {
				if line := findUIDLine(text, "MountVolume.SetUp succeeded", u); line != "" {
					s.faultDetail += "; the kubelet logged: " + line
				}
			}
		}
	default:
		t := sharerTrace(p, rel, s.scaled(sharerWatch))
		s.faultTraces = append(s.faultTraces, t)
		s.faultDetail = fmt.Sprintf("the surviving pod %s (uid %s): its volume %s not published again at %s within %s of the kubelet's start", p.Name, u, pv, vol, s.scaled(sharerWatch))
	}
	if err := s.removeFaultPod(ctx, sc, p); err != nil {
		return err
	}
	sc.Note("the surviving pod %s (uid %s) removed", p.Name, u)
	return nil
}

// sharerTrace is the surviving pod p's volume mount (rel, relative to the
// kubelet root) that the reboot took and the kubelet did not set up again
// within watch.
func sharerTrace(p corev1.Pod, rel string, watch time.Duration) catalogue.Trace {
	return catalogue.Trace{Kind: catalogue.Unmounted, Path: rel, Detail: fmt.Sprintf("pod %s, not mounted again within %s of the kubelet's start", p.Name, watch)}
}

// findUIDLine is the first line of log with msg about pod uid, quoted
// from msg on (quoteFrom); "" when there is none.
func findUIDLine(log, msg, uid string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, msg) && strings.Contains(line, uid) {
			return quoteFrom(line, msg)
		}
	}
	return ""
}

// quoteFrom quotes a kubelet log line from msg on, after its klog time
// ("E1206 01:02:03.000000 … UnmapVolume.UnmapBlockVolume failed ..."):
// the pending operations' errors put a long prefix before the kubelet's
// words. Beyond maxQuoted its middle is left out, so that the cause at
// its end ("mapPath is empty") stays.
func quoteFrom(line, msg string) string {
	line = strings.TrimSpace(line)
	if i := strings.Index(line, msg); i > 0 {
		if f := strings.Fields(line); len(f) >= 2 && len(f[0])+len(f[1])+1 < i {
			line = f[0] + " " + f[1] + " … " + line[i:]
		}
	}
	if len(line) > maxQuoted {
		line = line[:maxQuoted/2] + " … " + line[len(line)-maxQuoted/2:]
	}
	return line
}
