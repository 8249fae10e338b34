package reconstruction

// This file is the reboot faults: what a reboot takes of the node while
// the kubelet is down (reboot), and that with a file subPath's mount point
// left for the orphan sweep (reboot-file-subpath).

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
)

var _ = addFault(catalogue.Entry{
	Name: "reboot", Item: 1,
	Plants: "real reboot semantics: with the kubelet down and the pods force-deleted, every mount of the old pods and every CSI global mount is unmounted; the directories and vol_data.json stay",
	Checks: "as csi-filesystem: the re-created pods mount their volumes again with their data",
	// The old reconstruction marks a deleted pod's volume and its
	// device Mounted (not uncertain), so a new pod on the volume
	// gets NodePublish without NodeStage (#117513; PR #119827,
	// which would have fixed it there, was closed: the new
	// reconstruction is the fix). 1.26 and 1.27.2+ run the old one
	// by default, 1.28 and 1.29 with the gate off.
	Expect: []catalogue.Expectation{
		{From: "1.28", Before: "1.30", Gates: map[string]bool{"NewVolumeManagerReconstruction": false}, Outcome: catalogue.KnownBug, Bug: "NodeStage skipped for the re-created pods",
			Says: oldPathRebootSays, Symptom: oldPathRebootSymptom, Refs: []catalogue.Ref{catalogue.Issue(117513), catalogue.PR(119827)}},
		{From: "1.26", Before: "1.28", Outcome: catalogue.KnownBug, Bug: "NodeStage skipped for the re-created pods",
			Says: oldPathRebootSays, Symptom: oldPathRebootSymptom, Refs: []catalogue.Ref{catalogue.Issue(117513), catalogue.PR(119827)}},
		{From: "1.28", Outcome: catalogue.Clean, Says: "reconstructed as uncertain; unpublish and unstage are idempotent; the new pods mount again",
			Refs: []catalogue.Ref{catalogue.Issue(124057)}, FixedIn: "1.30 (#124048, backported to 1.27-1.29)"}},
	Needs: faultNeeds,
}, Fault{Plant: plantReboot, DataLost: true, MayStick: true, Observe: observeStuckOrLeftovers})

var _ = addFault(catalogue.Entry{
	Name: "reboot-file-subpath", Item: 14,
	Plants: "the subpath shape's workload (a configMap key as a file subPath, directory subPaths of the PVC and of a hostPath dir); the reboot fault (with the kubelet down and the pods force-deleted, every mount of the old pods, their subPath binds among them, and every CSI global mount unmounted), then each old pod's configMap volume dir removed, so its file subPath's mount point, a file, is left for the orphan sweep, as after a node that went down mid-cleanup",
	Checks: "the old pods' dirs removed within a bounded wait (the kubelet's orphan sweep must remove the file mount point); the re-created pods mount their volumes and subPaths again",
	// PR #123052 (os.Remove for rmdir) and its backports; 1.26
	// got none.
	Expect: catalogue.ByFix("1.26",
		catalogue.Expectation{Outcome: catalogue.KnownBug, Bug: "orphaned pod dir kept: file subPath \"not a directory\"",
			Says: "the orphan sweep removes each subPath mount point with rmdir, which fails on a file subPath's (\"not a directory\"): the old pod's dir stays for good",
			// The reboot took the binds; the CSI volume is
			// reconstructed and torn down with its subPaths, the
			// hostPath subPath's empty mount point goes by rmdir,
			// the configMap one (a file) stays.
			Symptom: catalogue.Symptom{
				Traces: []catalogue.Trace{oldPodDir, {Kind: catalogue.File, Path: "pods/" + catalogue.OldUID + "/volume-subpaths/" + cfgVolume + "/" + containerName + "/<n>"}},
				Logs:   []string{"orphaned pod * found, but failed to rmdir() subpath at path */volume-subpaths/" + cfgVolume + "/" + containerName + "/*not a directory"},
				Counters: []catalogue.Counter{
					{Metric: kubeletmetrics.OrphanPodCleanedVolumesErrors, Of: catalogue.OldPodDirs},
				},
			},
			Refs: []catalogue.Ref{catalogue.Issue(106942), catalogue.PR(123052)}},
		catalogue.Expectation{Outcome: catalogue.Clean, Says: "the orphan sweep removes a file subPath's mount point as a file, and the old pod's dir goes",
			Refs: []catalogue.Ref{catalogue.Issue(106942), catalogue.PR(123052)}},
		"1.27.12", "1.28.8", "1.29.3", "1.30.0"),
	Needs: hostFaultNeeds,
}, Fault{Shapes: []string{ShapeSubpath}, Plant: plantRebootFileSubpath, DataLost: true, MayLeave: true, Observe: observeLeftovers})

// oldPathRebootSays is what the old reconstruction does after a reboot.
const oldPathRebootSays = "the old reconstruction marks the deleted pods' volumes and their devices Mounted, so the re-created pods on the same volumes get NodePublish without NodeStage: their mount is not backed by the staged volume"

// oldPathRebootSymptom: the re-created pods do not run, SetUp
// (NodePublish) fails, and MountDevice (NodeStage) never ran for the PV:
// a pod stuck with its volume staged is another failure.
var oldPathRebootSymptom = catalogue.Symptom{
	Traces: []catalogue.Trace{{Kind: catalogue.NotRunning}},
	Logs:   []string{"MountVolume.SetUp failed for volume*" + catalogue.PV},
	Absent: []string{"MountVolume.MountDevice succeeded for volume*" + catalogue.PV},
}

// plantReboot unmounts what a reboot takes: every mount of the old pods
// (deepest first) and every CSI global mount of the workload's volumes.
// Directories and vol_data.json files stay.
func plantReboot(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	var points []string
	for _, u := range s.oldUIDs {
		for _, m := range s.down.Pod(u).Mounts {
			points = append(points, m.MountPoint)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	if s.cfg.Kind == storage.CSI && !s.volumes.NoStagingMount {
		for _, pv := range s.volumes.PVs {
			if p, n := s.down.CSIGlobalMount(pv.Driver, pv.VolumeHandle); n > 0 {
				for range n {
					points = append(points, s.down.Abs(p))
				}
			}
		}
	}
	if len(points) == 0 {
		return fmt.Errorf("nothing mounted to take away: the reboot would prove nothing")
	}
	for _, p := range points {
		if _, err := exec.Output(ctx, sc.Node, "umount", p); err != nil {
			return fmt.Errorf("reboot: %w", err)
		}
	}
	sc.Note("unmounted %d mounts as a reboot would; directories and vol_data.json kept", len(points))
	return nil
}

// plantRebootFileSubpath is the reboot, and then each old pod's configMap
// volume dir removed while its file subPath's mount point, a file, stays
// under volume-subpaths: the state the kubelet's orphan sweep meets when a
// node went down in the middle of a pod's cleanup (the kubelet logs "Path
// does not exist .../volumes", then "failed to rmdir() subpath ... not a
// directory"). Left in place, the volume manager would tear the configMap
// volume down and clean its subPaths, files too, before the orphan sweep
// looks: a reboot alone does not reach the sweep's bug.
func plantRebootFileSubpath(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	if err := plantReboot(ctx, s, sc); err != nil {
		return err
	}
	var removed []string
	for _, u := range s.oldUIDs {
		rel := fmt.Sprintf("pods/%s/volumes/kubernetes.io~configmap/%s", u, cfgVolume)
		if _, ok := s.down.Lookup(rel); !ok {
			return fmt.Errorf("old pod %s has no configMap volume dir %s: not the subpath shape's workload", u, s.down.Abs(rel))
		}
		sub := fmt.Sprintf("pods/%s/volume-subpaths/%s", u, cfgVolume)
		if _, ok := s.down.Lookup(sub); !ok {
			return fmt.Errorf("old pod %s has no subPath entry %s for its configMap key", u, s.down.Abs(sub))
		}
		// Nothing may be mounted under it: the reboot unmounted the
		// pod's mounts, and a configMap volume is a plain directory.
		if _, err := exec.Output(ctx, sc.Node, "findmnt", "--mountpoint", s.down.Abs(rel)); err == nil {
			return fmt.Errorf("something is mounted at %s; not removing it", s.down.Abs(rel))
		}
		if _, err := exec.Output(ctx, sc.Node, "rm", "-r", "--one-file-system", s.down.Abs(rel)); err != nil {
			return err
		}
		removed = append(removed, s.down.Abs(rel))
	}
	// The kubelet finds one volume dir fewer per old pod to reconstruct.
	s.volsAtStart -= len(removed)
	s.pathVolumes = s.volsAtStart
	sc.Note("removed the old pods' configMap volume dirs (%s); their file subPath mount points stay under volume-subpaths; %d volume dirs left for reconstruction", strings.Join(removed, ", "), s.volsAtStart)
	return nil
}
