package reconstruction

// This file is the faults that leave a volume the kubelet cannot
// reconstruct: a CSI volume's vol_data.json deleted, emptied or corrupted,
// and a file where a volume dir belongs.

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
)

var _ = addFault(catalogue.Entry{
	Name: "vol-data-deleted", Item: 2,
	Plants: "with the kubelet down and the pods force-deleted, each old pod's pods/<uid>/volumes/kubernetes.io~csi/<pv>/vol_data.json is deleted",
	Checks: "the kubelet's reconstruction and force cleanup of each planted volume fail (one error each), the old pod's mount and dir stay and hold the global mount after the workload is deleted; the pods come back with their data",
	Expect: []catalogue.Expectation{{Outcome: catalogue.KnownBug, Bug: "reconstruction failure", Says: "reconstruction fails and the pod dir is force-cleaned without NodeUnstage: the global mount is left to the re-created pod (leaked when none comes)",
		Symptom: volDataSymptom("no such file or directory"),
		Refs:    []catalogue.Ref{catalogue.Issue(101791), catalogue.Issue(85280), {ID: "KEP-6058", URL: "https://github.com/kubernetes/enhancements/pull/6059"}}}},
	Needs: hostFaultNeeds,
}, Fault{Plant: plantVolData(volDataDeleted), MayLeave: true, Observe: observeLeftovers})

var _ = addFault(catalogue.Entry{
	Name: "vol-data-empty", Item: 2,
	Plants: "as vol-data-deleted, but each vol_data.json is truncated to 0 bytes",
	Checks: "as vol-data-deleted",
	Expect: []catalogue.Expectation{{Outcome: catalogue.KnownBug, Bug: "reconstruction failure", Says: "the empty file cannot be decoded: reconstruction fails and the pod dir is force-cleaned, as vol-data-deleted",
		Symptom: volDataSymptom("EOF", catalogue.Trace{Kind: catalogue.File, Path: "pods/" + catalogue.OldUID + "/volumes/kubernetes.io~csi/" + catalogue.PV + "/vol_data.json"}),
		Refs:    []catalogue.Ref{catalogue.Issue(108217), catalogue.Issue(101791)}}},
	Needs: hostFaultNeeds,
}, Fault{Plant: plantVolData(volDataTruncated), MayLeave: true, Observe: observeLeftovers})

var _ = addFault(catalogue.Entry{
	Name: "vol-data-corrupt", Item: 2,
	Plants: "as vol-data-deleted, but each vol_data.json is overwritten with bytes that are not JSON, as a torn write or a disk error leaves it",
	Checks: "as vol-data-deleted",
	// loadVolumeData (pkg/volume/csi/csi_util.go, v1.34 to v1.37) opens
	// the file and fails to decode it: "failed to parse volume data
	// file [...]: invalid character 's' looking for beginning of value",
	// for reconstruction and the unmounter alike.
	Expect: []catalogue.Expectation{{Outcome: catalogue.KnownBug, Bug: "reconstruction failure", Says: "the file cannot be parsed: reconstruction fails and the pod dir is force-cleaned, as vol-data-deleted",
		Symptom: volDataSymptom("invalid character 's' looking for beginning of value", catalogue.Trace{Kind: catalogue.File, Path: "pods/" + catalogue.OldUID + "/volumes/kubernetes.io~csi/" + catalogue.PV + "/vol_data.json"}),
		Refs:    []catalogue.Ref{catalogue.Issue(108217), catalogue.Issue(101791)}}},
	Needs: hostFaultNeeds,
}, Fault{Plant: plantVolData(volDataCorrupted), MayLeave: true, Observe: observeLeftovers})

var _ = addFault(catalogue.Entry{
	Name: "file-for-dir", Item: 3,
	Plants: "a regular file where a volume directory is expected (pods/<uid>/volumes/kubernetes.io~csi/<name> is a file)",
	Checks: "the old pod dir stays with the file, and nothing else of it; the file's reconstruction and force cleanup fail (one error each), the orphan sweep logs \"not a directory\" and counts the pod dir in kubelet_orphan_pod_cleaned_volumes_errors",
	// The file is listed as a CSI volume: its reconstruction and
	// force cleanup fail on <file>/vol_data.json (not a
	// directory); the real volume is reconstructed and torn down;
	// the orphan sweep skips the file as a volume path (no
	// <file>/mount) and RemoveDirsOneFilesystem fails on it.
	Expect: []catalogue.Expectation{{Outcome: catalogue.KnownBug, Bug: "orphaned pod \"not a directory\" leak", Says: "orphaned pod cleanup fails every 2 s with \"not a directory\"; pods/<uid> stays",
		Symptom: catalogue.Symptom{
			Traces: []catalogue.Trace{oldPodDir, {Kind: catalogue.File, Path: "pods/" + catalogue.OldUID + "/volumes/kubernetes.io~csi/" + strayName}},
			Logs: []string{
				"Could not construct volume information*" + catalogue.OldUID + "*" + strayName + "*not a directory",
				"UnmountVolume.NewUnmounter failed*" + strayName + "*" + catalogue.OldUID + "*not a directory",
				"orphaned pod * found, but error occurred when trying to remove the volumes dir: not a directory",
			},
			Counters: []catalogue.Counter{
				{Metric: kubeletmetrics.ReconstructVolumeOperationsErrors, Of: catalogue.Unreconstructable},
				{Metric: kubeletmetrics.ForceCleanedFailedVolumeOps, Of: catalogue.Unreconstructable},
				{Metric: kubeletmetrics.ForceCleanedFailedVolumeOpErrors, Of: catalogue.Unreconstructable},
				{Metric: kubeletmetrics.OrphanPodCleanedVolumesErrors, Of: catalogue.OldPodDirs},
			},
		},
		Refs: []catalogue.Ref{catalogue.Issue(105536), catalogue.Issue(111933), catalogue.Issue(119919), catalogue.Issue(114698)}}},
	Needs: hostFaultNeeds,
}, Fault{Plant: plantFileForDir, MayLeave: true, Observe: observeLeftovers})

// volDataSymptom is what a CSI volume whose vol_data.json is missing or
// unreadable shows (v1.37.2, pkg/kubelet/volumemanager/reconciler and
// pkg/volume/csi): ConstructVolumeSpec cannot load the file, so
// reconstruction fails ("Could not construct volume information", each
// failure counted); the volume is force-cleaned (cleanupMounts, counted),
// and the CSI plugin's NewUnmounter needs the same file, so that fails
// too (counted): the pod's mount stays, a bind of the global mount. The
// orphan sweep then finds a mounted volume and skips the pod (counted as a
// pod with errors, logging nothing at error level). After the workload is
// deleted, UnmountDevice refuses the global mount the old mount still
// references. why is the loader's error ("no such file or directory",
// "EOF").
func volDataSymptom(why string, extra ...catalogue.Trace) catalogue.Symptom {
	return catalogue.Symptom{
		Traces: append([]catalogue.Trace{oldPodDir, {Kind: catalogue.Mounted, Path: "pods/" + catalogue.OldUID + "/volumes/kubernetes.io~csi/" + catalogue.PV + "/mount"}}, extra...),
		Logs: []string{
			"Could not construct volume information*" + catalogue.OldUID + "*vol_data.json*" + why,
			"UnmountVolume.NewUnmounter failed*" + catalogue.OldUID + "*vol_data.json*" + why,
		},
		Counters: []catalogue.Counter{
			{Metric: kubeletmetrics.ReconstructVolumeOperationsErrors, Of: catalogue.Unreconstructable},
			{Metric: kubeletmetrics.ForceCleanedFailedVolumeOps, Of: catalogue.Unreconstructable},
			{Metric: kubeletmetrics.ForceCleanedFailedVolumeOpErrors, Of: catalogue.Unreconstructable},
			{Metric: kubeletmetrics.OrphanPodCleanedVolumesErrors, Of: catalogue.OldPodDirs},
		},
		AfterDelete: &catalogue.Symptom{
			Traces: []catalogue.Trace{globalMount},
			Logs:   []string{"GetDeviceMountRefs check failed*is still mounted by other references"},
		},
	}
}

// volDataChange is what a vol_data.json fault does to each old pod's file.
type volDataChange string

const (
	volDataDeleted   volDataChange = "deleted"
	volDataTruncated volDataChange = "truncated to 0 bytes"
	volDataCorrupted volDataChange = "overwritten with " + volDataGarbage
)

// volDataGarbage is what vol-data-corrupt writes: not JSON from its first
// byte.
const volDataGarbage = "skewtest: not JSON"

// plantVolData changes each old pod's CSI vol_data.json as change says.
func plantVolData(change volDataChange) func(context.Context, *Scenario, *scenarios.StepContext) error {
	return func(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
		if s.cfg.Kind != storage.CSI {
			return fmt.Errorf("vol_data.json faults need CSI volumes, not %s", s.cfg.Kind)
		}
		var files, dirs []string
		for _, u := range s.oldUIDs {
			for _, pv := range s.volumes.PVs {
				dir := fmt.Sprintf("pods/%s/volumes/kubernetes.io~csi/%s", u, pv.Name)
				if _, ok := s.down.Lookup(dir + "/vol_data.json"); ok {
					files = append(files, s.down.Abs(dir+"/vol_data.json"))
					dirs = append(dirs, dir)
				}
			}
		}
		if len(files) == 0 {
			return fmt.Errorf("no vol_data.json of the old pods %v on the node", s.oldUIDs)
		}
		var argv []string
		switch change {
		case volDataDeleted:
			argv = append([]string{"rm", "--"}, files...)
		case volDataTruncated:
			argv = append([]string{"truncate", "-s", "0", "--"}, files...)
		case volDataCorrupted:
			argv = append([]string{"sh", "-c", `g=$1; shift; for f; do printf '%s' "$g" > "$f" || exit; done`, "sh", volDataGarbage}, files...)
		default:
			return fmt.Errorf("vol_data.json change %q", change)
		}
		if _, err := exec.Output(ctx, sc.Node, argv...); err != nil {
			return err
		}
		sc.Note("%d vol_data.json files %s", len(files), change)
		s.notePlanted(sc, dirs)
		return nil
	}
}

// plantFileForDir puts a regular file where the kubelet expects a CSI
// volume directory, in each old pod's dir.
func plantFileForDir(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	var files []string
	for _, u := range s.oldUIDs {
		dir := fmt.Sprintf("pods/%s/volumes/kubernetes.io~csi", u)
		if _, ok := s.down.Lookup(dir); ok {
			files = append(files, s.down.Abs(dir+"/"+strayName))
		}
	}
	if len(files) == 0 {
		return fmt.Errorf("no CSI volume dir of the old pods %v on the node", s.oldUIDs)
	}
	var rels []string
	for _, f := range files {
		if _, err := exec.OutputStdin(ctx, sc.Node, strings.NewReader("planted by skewtest\n"), "sh", "-c", `cat > "$1"`, "sh", f); err != nil {
			return err
		}
		rels = append(rels, strings.TrimPrefix(f, strings.TrimSuffix(s.down.ResolvedRoot, "/")+"/"))
	}
	sc.Note("planted %d regular files where the kubelet expects volume directories: %s", len(files), strings.Join(files, ", "))
	s.notePlanted(sc, rels)
	return nil
}
