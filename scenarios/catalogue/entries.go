package catalogue

import (
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
)

// What the implemented entries need of a provider's nodes
// (nodes.Capability); each runs on the providers whose nodes have it all.
var (
	// faultNeeds: the faults that need nothing of the node but commands
	// through nodes.Node and the API, on a node of the run's own whose
	// volumes are skewtest's (the reboot's tmpfs data goes with its
	// global mount, as a real reboot's would).
	faultNeeds = []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes}
	// hostFaultNeeds: the faults whose plant or judgement reads the
	// kernel's state of the kubelet's volumes directly: what their known
	// bugs leave at the CSI global mount (vol-data-deleted, vol-data-empty,
	// file-for-dir; kind's hostpath driver stages nothing there), a
	// container's processes, an atomic-writer volume's links, a file
	// subPath's bind. They are proven on a host node only so far.
	hostFaultNeeds = []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.HostNode}
	// shapeNeeds: the shapes beyond the sign-off's, which go into one
	// workload with inline ephemeral volumes of the run's driver and
	// claims bound to PVs it makes.
	shapeNeeds = []nodes.Capability{nodes.SkewtestVolumes}
	// blockNeeds: raw block volumes, attached through VolumeAttachments.
	blockNeeds = []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.BlockVolumes}
	// driverNeeds: the faults that stall, fail calls of or stop the
	// node's CSI driver.
	driverNeeds = []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.CSIDriverControl}
)

// Local-volume PVs: the kubelets skewtest runs cannot reconstruct them;
// see kubeletmetrics.LocalVolumeReconstructionReason.
const localVolumeSays = "reconstructVolume.NewMounter fails (local volume source is nil); the kubelet falls back to force cleanup, which still removes the mounts and dirs; reconstruct_volume_operations_errors_total equals the number of local volumes"

// localVolumeSymptom: reconstruction fails for each deleted pod's local
// volume (reconstructVolume, v1.34-v1.37: the plugin's NewMounter needs
// the PV's source, which a reconstructed spec lacks), each is force-cleaned
// once the desired state is populated (cleanOrphanVolumes), and the local
// plugin's unmounter needs no spec, so the cleanup succeeds and nothing is
// left.
var localVolumeSymptom = Symptom{
	Logs: []string{"Could not construct volume information*" + OldUID + "*reconstructVolume.NewMounter failed*local volume source is nil or local path is not set"},
	Counters: []Counter{
		{Metric: kubeletmetrics.ReconstructVolumeOperationsErrors, Of: LocalVolumeDirs},
		{Metric: kubeletmetrics.ForceCleanedFailedVolumeOps, Of: LocalVolumeDirs},
	},
}

// The names the catalogue's symptoms use of the scenario's workload: the
// subpath shape's hostPath and configMap volumes, its container, and the
// file file-for-dir plants (scenarios/reconstruction checks they are the
// names it uses).
const (
	HostPathVolume  = "host"
	ConfigMapVolume = "cfg"
	ConfigMapKey    = "file.txt"
	Container       = "workload"
	StrayFile       = "skewtest-stray-file"
)

// oldPodDir is an old pod's dir, kept by what its symptom names inside.
var oldPodDir = Trace{Kind: Dir, Path: "pods/" + OldUID}

// globalMount is a workload PV's CSI global (staging) mount.
var globalMount = Trace{Kind: Mounted, Path: "plugins/kubernetes.io/csi/" + Driver + "/" + VolumeHash + "/globalmount"}

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
func volDataSymptom(why string, extra ...Trace) Symptom {
	return Symptom{
		Traces: append([]Trace{oldPodDir, {Kind: Mounted, Path: "pods/" + OldUID + "/volumes/kubernetes.io~csi/" + PV + "/mount"}}, extra...),
		Logs: []string{
			"Could not construct volume information*" + OldUID + "*vol_data.json*" + why,
			"UnmountVolume.NewUnmounter failed*" + OldUID + "*vol_data.json*" + why,
		},
		Counters: []Counter{
			{Metric: kubeletmetrics.ReconstructVolumeOperationsErrors, Of: Unreconstructable},
			{Metric: kubeletmetrics.ForceCleanedFailedVolumeOps, Of: Unreconstructable},
			{Metric: kubeletmetrics.ForceCleanedFailedVolumeOpErrors, Of: Unreconstructable},
			{Metric: kubeletmetrics.OrphanPodCleanedVolumesErrors, Of: OldPodDirs},
		},
		AfterDelete: &Symptom{
			Traces: []Trace{globalMount},
			Logs:   []string{"GetDeviceMountRefs check failed*is still mounted by other references"},
		},
	}
}

// errorsKeptUncertain is what the kubelet does with a reconstructed
// device whose re-stage fails finally.
const errorsKeptUncertain = "a final error from the re-stage of a reconstructed device leaves it uncertain (markDeviceErrorState), so the kubelet neither forgets the staged device nor sets a pod up on it unstaged"

// oldPathRebootSays is what the old reconstruction does after a reboot.
const oldPathRebootSays = "the old reconstruction marks the deleted pods' volumes and their devices Mounted, so the re-created pods on the same volumes get NodePublish without NodeStage: their mount is not backed by the staged volume"

// oldPathRebootSymptom: the re-created pods do not run, SetUp
// (NodePublish) fails, and MountDevice (NodeStage) never ran for the PV:
// a pod stuck with its volume staged is another failure.
var oldPathRebootSymptom = Symptom{
	Traces: []Trace{{Kind: NotRunning}},
	Logs:   []string{"MountVolume.SetUp failed for volume*" + PV},
	Absent: []string{"MountVolume.MountDevice succeeded for volume*" + PV},
}

// All is the catalogue, shapes first, then faults in issue 9's order.
func All() []Entry {
	return []Entry{
		{
			Name: "csi-filesystem", Kind: Shape,
			Plants: "a StatefulSet, one filesystem CSI PVC per pod (tmpfs staged at the global mount, bind-published); pods force-deleted while the kubelet is down",
			Checks: "old UIDs' mounts, pod dirs and plugin entries gone; re-created pods on the same PVs with their data; each global mount mounted exactly once; reconstruction metrics",
			Expect: []Expectation{{From: "1.30", Outcome: Clean, Says: "reconstructed as uncertain, unpublished and cleaned; the global mount is kept once for the re-created pod",
				Refs: []Ref{{ID: "KEP-3756", URL: "https://github.com/kubernetes/enhancements/issues/3756"}}}},
			Status: Runs, Needs: nil,
		},
		{
			Name: "local-volume", Kind: Shape,
			Plants: "csi-filesystem's workload on kubernetes.io/local-volume PVs (bind mounts of host dirs)",
			Checks: "as csi-filesystem; the kubelet's reconstruction errors and force cleanups, exactly one each per local volume, are the known symptom",
			Expect: []Expectation{{From: "1.34", Outcome: KnownBug, Bug: "local-volume reconstruction errors", Says: localVolumeSays, Symptom: localVolumeSymptom,
				Refs: []Ref{{ID: "kubernetes#121675", URL: "https://github.com/kubernetes/kubernetes/issues/121675"}}}},
			Status: Runs, Needs: []nodes.Capability{nodes.HostNode},
		},
		{
			Name: "block", Kind: Shape,
			Plants: "a volumeMode: Block CSI PVC (skewtest's driver in CSI_MODE=ebs: a loop device over a sparse file, attached through a VolumeAttachment) mapped into the pod at /dev/skewtest-block, which writes a marker in its first sector; the pod force-deleted while the kubelet is down",
			Checks: "the old UID's pods/<uid>/volumeDevices link, plugins/kubernetes.io/csi/volumeDevices/<pv>/dev/<uid> map link and publish/<pv>/<uid> target gone; the new pod's mapped; as many loop devices as at deploy, the kubelet's backed by the new pod's map link, none by an old UID's path or a deleted file; the marker reads back after every hop",
			Expect: []Expectation{{From: "1.30", Outcome: Clean, Says: "unmapped and cleaned; one driver loop device and one kubelet loop device per block volume",
				Refs: []Ref{issue(119608), issue(122960), issue(102408)}, FixedIn: "1.30 (#122211, backported to 1.26-1.29)"}},
			Status: Runs, Needs: blockNeeds,
		},
		{
			Name: "subpath", Kind: Shape,
			Plants: "directory subPaths of the pod's CSI PVC and of a hostPath directory (as #135698 was reported), and a file subPath of a configMap, the pod writing a marker through each directory; the pod force-deleted while the kubelet is down",
			Checks: "the old UID's volume-subpaths bind mounts gone and pods/<uid> removed; the new pod's three subPath binds there, the markers read back through the directory binds, the configMap key through the file bind",
			// A hostPath volume has no dir under pods/<uid>/volumes, so it
			// is not reconstructed and no unmount cleans its subPath bind;
			// the orphan sweep's remove of the bind fails (EBUSY; the
			// message says rmdir() before v1.36, remove after).
			Expect: []Expectation{{From: "1.31", Outcome: KnownBug, Bug: "subpath rmdir busy leak",
				Symptom: Symptom{
					Traces: []Trace{oldPodDir, {Kind: Mounted, Path: "pods/" + OldUID + "/volume-subpaths/" + HostPathVolume + "/" + Container + "/<n>"}},
					Logs:   []string{"orphaned pod * found, but failed to * subpath at path */volume-subpaths/" + HostPathVolume + "/" + Container + "/*device or resource busy"},
					Counters: []Counter{
						{Metric: kubeletmetrics.OrphanPodCleanedVolumesErrors, Of: OldPodDirs},
					},
				},
				Says:    "orphaned pod cleanup fails to remove the hostPath subPath bind (device or resource busy) every 2 s and the pod dir stays; reported with hostPath on 1.31.1, seen here on 1.36.3 and 1.37.2 (the PVC's and configMap's subPath binds are cleaned)",
				Refs:    []Ref{issue(135698), pr(135696)},
				FixedIn: ""}},
			Status: Runs, Needs: shapeNeeds,
		},
		{
			Name: "emptydir-memory", Kind: Shape,
			Plants: "an emptyDir with medium: Memory (a tmpfs per pod) the pod writes a marker into",
			Checks: "the old UID's tmpfs unmounted and its dir removed; the new pod has a tmpfs of its own with its own marker (the volume's lifecycle is the pod's, so no data is carried over)",
			Expect: []Expectation{{Outcome: Clean, Says: "reconstructed and unmounted like any tmpfs volume"}},
			Status: Runs, Needs: shapeNeeds,
		},
		{
			Name: "projected-secret-configmap", Kind: Shape,
			Plants: "a configMap, a secret and a projected (configMap + secret + downward API metadata.uid) volume",
			Checks: "the old UID's secret and projected tmpfs mounts and configMap dir gone; the new pod's secret and projected volumes are tmpfs mounts, its configMap volume a dir, every file holds the API objects' contents and the projected uid file the new UID",
			Expect: []Expectation{{Outcome: Clean, Says: "reconstructed and cleaned (every pod's kube-api-access projected volume already is)"}},
			Status: Runs, Needs: shapeNeeds,
		},
		{
			Name: "generic-ephemeral", Kind: Shape,
			Plants: "a generic ephemeral volume (a PVC the ephemeral controller makes for the pod and the garbage collector deletes with it), each new claim bound to a fresh pre-created PV, as from a provisioner",
			Checks: "the old pod's volume unpublished, unstaged and (EBS mode) detached: its global mount and VolumeAttachment gone; the new pod's claim is a new PVC owned by it, on a fresh PV staged once, with its own marker",
			Expect: []Expectation{{From: "1.23", Outcome: Clean, Says: "reconstructed from vol_data.json like any CSI PVC; the old claim's volume is released"}},
			Status: Runs, Needs: shapeNeeds,
		},
		{
			Name: "csi-inline-ephemeral", Kind: Shape,
			Plants: "a CSI inline ephemeral volume of skewtest's driver (volumeLifecycleMode Ephemeral: no staging, no attach; the driver publishes a tmpfs)",
			Checks: "the old UID's published tmpfs gone (the driver's NodeUnpublishVolume) and its dir removed; the new pod's published, its vol_data.json saying Ephemeral, with its own marker",
			Expect: []Expectation{{Outcome: Clean, Says: "reconstructed with volumeLifecycleMode Ephemeral from vol_data.json and unpublished"}},
			Status: Runs, Needs: shapeNeeds,
		},
		{
			Name: "reboot", Kind: Fault, Item: 1,
			Plants: "real reboot semantics: with the kubelet down and the pods force-deleted, every mount of the old pods and every CSI global mount is unmounted; the directories and vol_data.json stay",
			Checks: "as csi-filesystem: the re-created pods mount their volumes again with their data",
			// The old reconstruction marks a deleted pod's volume and its
			// device Mounted (not uncertain), so a new pod on the volume
			// gets NodePublish without NodeStage (#117513; PR #119827,
			// which would have fixed it there, was closed: the new
			// reconstruction is the fix). 1.26 and 1.27.2+ run the old one
			// by default, 1.28 and 1.29 with the gate off.
			Expect: []Expectation{
				{From: "1.28", Before: "1.30", Gates: map[string]bool{"NewVolumeManagerReconstruction": false}, Outcome: KnownBug, Bug: "NodeStage skipped for the re-created pods",
					Says: oldPathRebootSays, Symptom: oldPathRebootSymptom, Refs: []Ref{issue(117513), pr(119827)}},
				{From: "1.26", Before: "1.28", Outcome: KnownBug, Bug: "NodeStage skipped for the re-created pods",
					Says: oldPathRebootSays, Symptom: oldPathRebootSymptom, Refs: []Ref{issue(117513), pr(119827)}},
				{From: "1.28", Outcome: Clean, Says: "reconstructed as uncertain; unpublish and unstage are idempotent; the new pods mount again",
					Refs: []Ref{issue(124057)}, FixedIn: "1.30 (#124048, backported to 1.27-1.29)"}},
			Status: Runs, Needs: faultNeeds,
		},
		{
			Name: "vol-data-deleted", Kind: Fault, Item: 2,
			Plants: "with the kubelet down and the pods force-deleted, each old pod's pods/<uid>/volumes/kubernetes.io~csi/<pv>/vol_data.json is deleted",
			Checks: "the kubelet's reconstruction and force cleanup of each planted volume fail (one error each), the old pod's mount and dir stay and hold the global mount after the workload is deleted; the pods come back with their data",
			Expect: []Expectation{{Outcome: KnownBug, Bug: "reconstruction failure", Says: "reconstruction fails and the pod dir is force-cleaned without NodeUnstage: the global mount is left to the re-created pod (leaked when none comes)",
				Symptom: volDataSymptom("no such file or directory"),
				Refs:    []Ref{issue(101791), issue(85280), {ID: "KEP-6058", URL: "https://github.com/kubernetes/enhancements/pull/6059"}}}},
			Status: Runs, Needs: hostFaultNeeds,
		},
		{
			Name: "vol-data-empty", Kind: Fault, Item: 2,
			Plants: "as vol-data-deleted, but each vol_data.json is truncated to 0 bytes",
			Checks: "as vol-data-deleted",
			Expect: []Expectation{{Outcome: KnownBug, Bug: "reconstruction failure", Says: "the empty file cannot be decoded: reconstruction fails and the pod dir is force-cleaned, as vol-data-deleted",
				Symptom: volDataSymptom("EOF", Trace{Kind: File, Path: "pods/" + OldUID + "/volumes/kubernetes.io~csi/" + PV + "/vol_data.json"}),
				Refs:    []Ref{issue(108217), issue(101791)}}},
			Status: Runs, Needs: hostFaultNeeds,
		},
		{
			Name: "file-for-dir", Kind: Fault, Item: 3,
			Plants: "a regular file where a volume directory is expected (pods/<uid>/volumes/kubernetes.io~csi/<name> is a file)",
			Checks: "the old pod dir stays with the file, and nothing else of it; the file's reconstruction and force cleanup fail (one error each), the orphan sweep logs \"not a directory\" and counts the pod dir in kubelet_orphan_pod_cleaned_volumes_errors",
			// The file is listed as a CSI volume: its reconstruction and
			// force cleanup fail on <file>/vol_data.json (not a
			// directory); the real volume is reconstructed and torn down;
			// the orphan sweep skips the file as a volume path (no
			// <file>/mount) and RemoveDirsOneFilesystem fails on it.
			Expect: []Expectation{{Outcome: KnownBug, Bug: "orphaned pod \"not a directory\" leak", Says: "orphaned pod cleanup fails every 2 s with \"not a directory\"; pods/<uid> stays",
				Symptom: Symptom{
					Traces: []Trace{oldPodDir, {Kind: File, Path: "pods/" + OldUID + "/volumes/kubernetes.io~csi/" + StrayFile}},
					Logs: []string{
						"Could not construct volume information*" + OldUID + "*" + StrayFile + "*not a directory",
						"UnmountVolume.NewUnmounter failed*" + StrayFile + "*" + OldUID + "*not a directory",
						"orphaned pod * found, but error occurred when trying to remove the volumes dir: not a directory",
					},
					Counters: []Counter{
						{Metric: kubeletmetrics.ReconstructVolumeOperationsErrors, Of: Unreconstructable},
						{Metric: kubeletmetrics.ForceCleanedFailedVolumeOps, Of: Unreconstructable},
						{Metric: kubeletmetrics.ForceCleanedFailedVolumeOpErrors, Of: Unreconstructable},
						{Metric: kubeletmetrics.OrphanPodCleanedVolumesErrors, Of: OldPodDirs},
					},
				},
				Refs: []Ref{issue(105536), issue(111933), issue(119919), issue(114698)}}},
			Status: Runs, Needs: hostFaultNeeds,
		},
		{
			Name: "kill-during-publish", Kind: Fault, Item: 4,
			Plants: "with the kubelet up, the driver holds NodePublishVolume and the pods are force-deleted; the StatefulSet's new pod gets its vol_data.json and a held publish, and the kubelet is SIGKILLed then; that pod force-deleted while the kubelet is down",
			Checks: "the half-published pod's dir and anything it mounted gone; the re-created pods on the same volumes with their data; each global mount once",
			Expect: []Expectation{{From: "1.30", Outcome: Clean, Says: "the half-published volume is reconstructed as uncertain, unpublished (idempotently) and its pod dir removed"}},
			Status: Runs, Needs: []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.CSIDriverControl, nodes.KubeletKill},
		},
		{
			Name: "kill-between-unpublish-unstage", Kind: Fault, Item: 5,
			Plants: "with the kubelet up, the driver holds NodeUnstageVolume and the StatefulSet is scaled to 0; once the pod dir is gone and the unstage held, the kubelet is SIGKILLed; nothing is deleted while it is down",
			Checks: "the global mount no pod uses is unstaged within a bounded wait; then the StatefulSet is scaled back and its pods run on the same volumes",
			Expect: []Expectation{{Outcome: KnownBug, Bug: "global-mount leak", Says: "nothing is left to reconstruct from, so the staged global mount leaks until a pod uses the volume again",
				Symptom: Symptom{Traces: []Trace{globalMount}},
				Refs:    []Ref{issue(85476), issue(121937), pr(136771)}}},
			Status: Runs, Needs: []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.CSIDriverControl, nodes.KubeletKill},
		},
		{
			Name: "driver-registers-late", Kind: Fault, Item: 6,
			Plants: "the pods force-deleted and the CSI driver's node service stopped while the kubelet is down; the driver started again once the kubelet logs that it looked for it (bounded wait), and registers",
			Checks: "transient errors, then the old pods cleaned; the re-created pods on the same volumes with their data",
			Expect: []Expectation{{From: "1.30", Outcome: Clean, Says: "reconstruction does not need the driver; unpublish retries until it registers, then the old pods are cleaned"}},
			Status: Runs, Needs: driverNeeds,
		},
		{
			Name: "apiserver-unreachable", Kind: Fault, Item: 7,
			Plants: "nothing deleted; the API server unreachable from this kubelet alone (its connections refused) for the first 30 s after its start, then restored; the pods keep running",
			Checks: "the kubelet's connections refused and no node heartbeat during the outage (the cut is real); then the same pods Running with the same containers, and every mount of theirs with its mount ID unchanged",
			// Measured on v1.36.3 and v1.37.2 (2026-12): nothing unmounted.
			// #120150 (open) needs the pods listed and then the PVC GET
			// failing (a flaky network); a whole outage keeps the pod
			// sources unready, so the reconciler unmounts nothing.
			Expect: []Expectation{{From: "1.28", Outcome: Clean, Says: "with the API server wholly unreachable the pod sources are not ready, so nothing is unmounted; #120150's partial outage (pods listed, the PVC GET failing) is not planted here",
				Refs: []Ref{issue(120150), issue(117745)}}},
			Status: Runs, Needs: []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.APIServerOutage},
		},
		{
			Name: "pvc-terminating", Kind: Fault, Item: 8,
			Plants: "the in-use PVC deleted (it stays Terminating through pvc-protection), then a kubelet restart",
			Checks: "the pod stays Running with the same containers; its mounts keep their mount IDs (no unpublish or unstage happened)",
			// The fix and its backports #130686 (1.30), #130685 (1.31)
			// and #130684 (1.32); nothing for 1.29 and before. The old
			// reconstruction has the bug too (inferred from code: its
			// sync() marks the volume of a pod missing from the desired
			// state Mounted, and the reconciler unmounts it).
			Expect: ByFix("1.26",
				Expectation{Outcome: KnownBug, Bug: "running pod's volume unmounted",
					Says: "the desired-state populator skips the Terminating PVC (\"PVC is being deleted\"), so after the restart the reconciler unmounts the running pod's volume under it",
					// The pod's mount goes, and with it the file the pod
					// wrote there; the volume, no other pod's, is unstaged.
					Symptom: Symptom{
						Traces: []Trace{
							{Kind: Unmounted, Path: "pods/" + UID + "/volumes/kubernetes.io~csi/" + PV + "/mount"},
							{Kind: ContentChanged, Path: "pods/" + UID + "/volumes/kubernetes.io~csi/" + PV + "/mount/<file>"},
							{Kind: Unmounted, Path: "plugins/kubernetes.io/csi/" + Driver + "/" + VolumeHash + "/globalmount"},
							{Kind: UnmountLogged},
						},
						Logs: []string{
							"Error processing volume*PVC is being deleted",
							"operationExecutor.UnmountVolume started for volume*" + UID,
						},
					},
					Refs: []Ref{pr(130335)}},
				Expectation{Outcome: Clean, Says: "the PVC still has its pvc-protection finalizer, so the running pod's volume stays in the desired state and stays mounted", Refs: []Ref{pr(130335)}},
				"1.30.12", "1.31.8", "1.32.4", "1.33.0"),
			Status: Runs, Needs: faultNeeds,
		},
		{
			Name: "replacement-pod", Kind: Fault, Item: 9,
			Plants: "while the kubelet is down: the StatefulSet scaled to 0, a replacement pod on the same claim with nodeName set (no scheduler) created, then the old pod force-deleted; the claims are ReadWriteOncePod, as in upstream's multi-pod test",
			Checks: "the old pod cleaned; the replacement Running with the old pod's data; then it is removed and the StatefulSet scaled back",
			Expect: []Expectation{{From: "1.26", Outcome: Clean, Says: "the replacement starts once the old pod is cleaned",
				Refs: []Ref{issue(113596)}, FixedIn: "1.26 (SELinux label reconstruction)"}},
			Status: Runs, Needs: faultNeeds,
		},
		{
			Name: "restart-no-delete", Kind: Fault, Item: 10,
			Plants: "a kubelet stop, swap and start with nothing deleted",
			Checks: "the same pod UIDs Running with the same container IDs and restart counts; every volume mount of the pods untouched (same mount IDs); reconstruction metrics",
			Expect: []Expectation{{From: "1.30", Outcome: Clean, Says: "the running pods' volumes are reconstructed and left mounted; no container restarts"}},
			Status: Runs, Needs: faultNeeds,
		},
		{
			Name: "shapes-restart", Kind: Fault,
			Plants: "the six shapes' workload (block, subpath, emptydir-memory, projected-secret-configmap, generic-ephemeral and csi-inline-ephemeral in one pod, skewtest's driver in CSI_MODE=ebs); a kubelet stop, swap and start with nothing deleted",
			Checks: "the same pod Running with the same container IDs and restart counts; every mount of the pod on the node (its volumes, the subPath binds, the block volume's map link and publish bind) with its mount ID unchanged; every marker the pod wrote (each writable volume, the block device's first sector), the configMap, secret and projected files and their ..data links unchanged; no line in the kubelet's log since its start unmounting, unmapping, unstaging or detaching one of the pod's volumes",
			// Read in v1.37.2's reconstruct.go: every volume dir is
			// reconstructed at start, the running pod's too, marked
			// uncertain and set up again in place (SetUp and MapPodDevice
			// find their mounts and links there and keep them; the
			// AtomicWriter writes nothing for an unchanged payload).
			Expect: []Expectation{{From: "1.34", Outcome: Clean, Says: "the running pod's volumes are reconstructed as uncertain and set up again in place: no unmount, remount or rewrite, no container restart"}},
			Status: Runs, Needs: []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.BlockVolumes, nodes.HostNode},
		},
		{
			Name: "prestop-emptydir", Kind: Fault, Item: 11,
			Plants: "a pod of its own with an emptyDir (a marker written there) and a preStop hook that outlasts the hop (grace 40 s) deleted gracefully; the kubelet stopped, swapped and started while it is Terminating; the StatefulSet's pods kept",
			Checks: "for 20 s from the kubelet's start the pod stays and its emptyDir keeps the marker; the StatefulSet's pods keep their containers and mount IDs; then the pod is force-deleted and cleaned",
			Expect: []Expectation{{Outcome: Clean, Says: "the volume is not unmounted or emptied under the running container", Refs: []Ref{issue(113979)}}},
			Status: Runs, Needs: faultNeeds,
		},
		{
			Name: "configmap-key-missing", Kind: Fault, Item: 13,
			Plants: "the projected-secret-configmap shape's workload; with the kubelet down and nothing deleted, the key's link in each running pod's configMap volume (pods/<uid>/volumes/kubernetes.io~configmap/cfg/file.txt) removed, ..data and its timestamped dir kept, as a kubelet killed between writing ..data and the key links leaves them",
			Checks: "the same pods Running, containers and mounts untouched; within a bounded watch from the kubelet's start the key's link is back and reads the ConfigMap's value",
			// Fixed by PR #122807 in 1.30.0 only: its 1.28 cherry-pick
			// #123104 was closed unmerged, and 1.27 and 1.29 got none.
			Expect: ByFix("1.26",
				Expectation{Outcome: KnownBug, Bug: "configMap key missing after the restart",
					Says:    "the volume's AtomicWriter finds the payload unchanged (\"no update required\") and returns before it makes the user-visible links: the key stays missing in the container",
					Symptom: Symptom{Traces: []Trace{{Kind: Missing, Path: "pods/" + UID + "/volumes/kubernetes.io~configmap/" + ConfigMapVolume + "/" + ConfigMapKey}}},
					Refs:    []Ref{issue(121472), pr(122807)}},
				Expectation{Outcome: Clean, Says: "the AtomicWriter makes the user-visible links at every write, so the key is back once the volume is set up again after the start",
					Refs: []Ref{issue(121472), pr(122807)}},
				"1.30.0"),
			Status: Runs, Needs: hostFaultNeeds,
		},
		{
			Name: "reboot-file-subpath", Kind: Fault, Item: 14,
			Plants: "the subpath shape's workload (a configMap key as a file subPath, directory subPaths of the PVC and of a hostPath dir); the reboot fault (with the kubelet down and the pods force-deleted, every mount of the old pods, their subPath binds among them, and every CSI global mount unmounted), then each old pod's configMap volume dir removed, so its file subPath's mount point, a file, is left for the orphan sweep, as after a node that went down mid-cleanup",
			Checks: "the old pods' dirs removed within a bounded wait (the kubelet's orphan sweep must remove the file mount point); the re-created pods mount their volumes and subPaths again",
			// PR #123052 (os.Remove for rmdir) and its backports; 1.26
			// got none.
			Expect: ByFix("1.26",
				Expectation{Outcome: KnownBug, Bug: "orphaned pod dir kept: file subPath \"not a directory\"",
					Says: "the orphan sweep removes each subPath mount point with rmdir, which fails on a file subPath's (\"not a directory\"): the old pod's dir stays for good",
					// The reboot took the binds; the CSI volume is
					// reconstructed and torn down with its subPaths, the
					// hostPath subPath's empty mount point goes by rmdir,
					// the configMap one (a file) stays.
					Symptom: Symptom{
						Traces: []Trace{oldPodDir, {Kind: File, Path: "pods/" + OldUID + "/volume-subpaths/" + ConfigMapVolume + "/" + Container + "/<n>"}},
						Logs:   []string{"orphaned pod * found, but failed to rmdir() subpath at path */volume-subpaths/" + ConfigMapVolume + "/" + Container + "/*not a directory"},
						Counters: []Counter{
							{Metric: kubeletmetrics.OrphanPodCleanedVolumesErrors, Of: OldPodDirs},
						},
					},
					Refs: []Ref{issue(106942), pr(123052)}},
				Expectation{Outcome: Clean, Says: "the orphan sweep removes a file subPath's mount point as a file, and the old pod's dir goes",
					Refs: []Ref{issue(106942), pr(123052)}},
				"1.27.12", "1.28.8", "1.29.3", "1.30.0"),
			Status: Runs, Needs: hostFaultNeeds,
		},
		{
			Name: "restart-kill-container", Kind: Fault, Item: 15,
			Plants: "a kubelet stop, swap and start with nothing deleted; once the pods were watched untouched, each one's workload container killed on the node",
			Checks: "the same pods Running with the same containers until the kill; then each killed container runs again within a bounded watch, its restart count up",
			// #124057: with NewVolumeManagerReconstruction on and
			// SELinuxMountReadWriteOncePod off, a reconstructed volume
			// keeps its provisional outer name, so the pod's volumes
			// read as unmounted and its sync fails: running containers
			// run on, a dead one is never started again. Fixed by
			// #124048 and its backports; 1.28's default gates (the
			// SELinux gate on) never had it.
			Expect: append(ByFix("1.28",
				Expectation{Gates: map[string]bool{"SELinuxMountReadWriteOncePod": false}, Outcome: KnownBug, Bug: "killed container not started again",
					Says: "the reconstructed volume keeps its provisional outer name, so the pod's sync reports its volumes unmounted (\"unmounted volumes=[...]\") and the kubelet never starts the dead container again",
					// The sync's "unmounted volumes=[...]" error comes only
					// after WaitForAttachAndMount's 2 min bound, past the
					// watch: no log line is required.
					Symptom: Symptom{Traces: []Trace{{Kind: NotRestarted, Path: "pods/" + UID}}},
					Refs:    []Ref{issue(124057), pr(124048)}},
				Expectation{Gates: map[string]bool{"SELinuxMountReadWriteOncePod": false}, Outcome: Clean, Says: "the reconstructed volume gets the pod's outer name, and the dead container is started again",
					Refs: []Ref{issue(124057), pr(124048)}},
				"1.28.9", "1.29.4", "1.30.0"),
				Expectation{From: "1.28", Outcome: Clean, Says: "the dead container is started again on the reconstructed volumes", Refs: []Ref{issue(124057)}}),
			Status: Runs, Needs: hostFaultNeeds,
		},
		{
			Name: "rejected-feature-gate", Kind: Fault, Item: 12,
			Plants: "the swapped kubelet's configuration sets featureGates {NewVolumeManagerReconstruction: false}, a gate removed in 1.32 (as a config kept from an older kubelet would); the pods force-deleted",
			Checks: "the kubelet refuses to start and the harness's error names the gate and the kubelet version (a plain run exits 1: a kubelet that refuses to start after a swap); then the gate is taken out, the kubelet starts and the old pods are cleaned",
			Expect: []Expectation{{Outcome: Clean, Says: "the kubelet exits; skewtest names the gate and the version"}},
			Status: Runs, Needs: []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.KubeletFeatureGates},
		},
		{
			Name: "reboot-block", Kind: Fault,
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
			Status: Runs, Needs: blockNeeds,
		},
		{
			Name: "reboot-shared-volume", Kind: Fault,
			Plants: "a second pod (nodeName set) on the StatefulSet pod's claim, made until its UID sorts after the StatefulSet pod's (the old reconstruction walks pods/ in that order); with the kubelet down the StatefulSet's pod force-deleted and every mount of both pods unmounted as a reboot takes them, the volume's CSI global mount kept (with it gone, #117513, never fixed on the old reconstruction, keeps the surviving pod's volume from being published on every old-path kubelet and would hide this bug); the CSI driver stopped, and started once the kubelet logs that it is not registered, as after a reboot (a driver already there lets the reconciler's first pass publish the surviving pod's volume before the old reconstruction runs, which hides the bug too)",
			Checks: "the surviving pod's volume published again (pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount mounted, the StatefulSet pod's marker read through it) within a bounded watch from the kubelet's start; the deleted pod cleaned; the re-created pod mounts the volume",
			// In 1.28.5's syncStates the deleted pod's and the surviving
			// pod's reconstructed volumes share one globalVolumeInfo, so
			// updateStates marks the surviving pod's volume Mounted too
			// ("Volume is marked as mounted and added into the actual
			// state" with its podName) and it is never set up again.
			// #119923 keeps them apart; the new reconstruction marks every
			// reconstructed volume uncertain, per pod.
			Expect: append(ByFix("1.28",
				Expectation{Gates: map[string]bool{"NewVolumeManagerReconstruction": false}, Outcome: KnownBug, Bug: sharedBug,
					Says: oldPathSharedSays, Symptom: oldPathSharedSymptom, Refs: []Ref{issue(119921), pr(119923)}, FixedIn: fixed119923},
				Expectation{Gates: map[string]bool{"NewVolumeManagerReconstruction": false}, Outcome: Clean, Says: "the surviving pod's volume is reconstructed on its own, marked uncertain and published again",
					Refs: []Ref{issue(119921), pr(119923)}, FixedIn: fixed119923},
				"1.28.6", "1.29.1", "1.30.0"),
				ByFix("1.26",
					Expectation{Outcome: KnownBug, Bug: sharedBug, Says: oldPathSharedSays, Symptom: oldPathSharedSymptom, Refs: []Ref{issue(119921), pr(119923)}, FixedIn: fixed119923},
					Expectation{Outcome: Clean, Says: "the surviving pod's volume is marked uncertain on its own (the new reconstruction, or the old one with #119923) and published again",
						Refs: []Ref{issue(119921), pr(119923)}, FixedIn: fixed119923},
					"1.26.13", "1.27.10")...),
			Status: Runs, Needs: driverNeeds,
		},
		{
			Name: "restage-fails-final-until-deleted", Kind: Fault, Item: 16,
			Plants: "with the kubelet down and the pods force-deleted, skewtest's CSI driver told (its fail knob) to fail every NodeStageVolume of the workload's volume with FAILED_PRECONDITION, a final error; once the kubelet retried three times, the StatefulSet is scaled to 0, so the kubelet gives the volume up; then the knob is removed and the StatefulSet scaled back",
			Checks: "the driver's call record since the kubelet's start: while the stage fails, the waiting pod gets no NodePublishVolume and nothing is unstaged, and the global mount stays mounted once; after the scale-down, within 30 s: exactly one NodeUnstageVolume, the global mount gone (else a trace), the waiting pod's dir removed; then the new pod stages, publishes and runs; the kubelet keeps the reconstructed device uncertain (\"leaving volume uncertain\") and logs the failed MountDevice once per failed NodeStageVolume",
			Expect: []Expectation{{From: "1.34", Outcome: Clean, Says: errorsKeptUncertain + "; once no pod wants the volume the kubelet unstages that device (NodeUnstageVolume) and removes its global mount",
				Refs: []Ref{pr(122211), issue(119608)}, FixedIn: "1.30 (#122211, backported to 1.26-1.29)"}},
			Status: Runs, Needs: driverNeeds,
		},
		{
			Name: "unpublish-fails-final", Kind: Fault, Item: 17,
			Plants: "with the kubelet down and the pods force-deleted, NodeUnpublishVolume of the workload's volume fails twice with FAILED_PRECONDITION, then goes through",
			Checks: "the call record: for the old pod, two failed NodeUnpublishVolume then one that succeeds and nothing after; the re-created pod stages the uncertain device again and publishes; no NodeUnstageVolume; the kubelet logs each failed TearDown once; the old pod's mount and dir gone within the cleanup bound, as on the baseline, the global mount mounted once, the re-created pod Running with its data",
			Expect: []Expectation{{From: "1.34", Outcome: Clean, Says: "a failed TearDown leaves the reconstructed volume uncertain, so the unmount is retried until the driver unpublishes, and only then is the old pod's dir removed"}},
			Status: Runs, Needs: driverNeeds,
		},
	}
}

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
var oldPathSharedSymptom = Symptom{
	Traces: []Trace{{Kind: Unmounted, Path: "pods/" + UID + "/volumes/kubernetes.io~csi/" + PV + "/mount"}},
	Logs:   []string{"Volume is marked as mounted and added into the actual state*" + UID},
	Absent: []string{"could not find pod information in desired state*" + UID},
}

// rebootBlockBug names #119608 in the report.
const rebootBlockBug = "deleted pod stuck Terminating: UnmapVolume \"mapPath is empty\""

// rebootBlockSymptom: each deleted pod stays in the API, Terminating; its
// dir stays, with its map link (plugins/kubernetes.io/csi/volumeDevices/
// <pv>/dev/<uid>) and its publish target (.../publish/<pv>/<uid>): the
// unmap removes the pod's own link, then fails on the empty global map
// path (util.UnmapBlockVolume, 1.26 to 1.29). #122211's own line, the
// device left uncertain, rules the bug out.
var rebootBlockSymptom = Symptom{
	Traces: []Trace{
		{Kind: Terminating, Path: "pods/" + OldUID},
		oldPodDir,
		{Kind: File, Path: "plugins/kubernetes.io/csi/volumeDevices/" + PV + "/dev/" + OldUID},
		{Kind: File, Path: "plugins/kubernetes.io/csi/volumeDevices/publish/" + PV + "/" + OldUID},
	},
	Logs:   []string{"UnmapVolume.UnmapBlockVolume failed for volume*" + OldUID + "*mapPath is empty"},
	Absent: []string{"markDeviceErrorState leaving volume uncertain"},
}

// rebootBlockExpect: #119608 on every release without #122211; clean
// from each minor's first release with it (the unmap finds its path in
// the actual state), and from 1.30.0 with #123032 too (the unmap takes
// the path from the volume's mapper).
func rebootBlockExpect() []Expectation {
	refs := []Ref{issue(119608), issue(122960), pr(122211), pr(123032)}
	out := ByFix("1.26",
		Expectation{Outcome: KnownBug, Bug: rebootBlockBug,
			Says:    "the failed re-stage marks the reconstructed device unmounted and clears its map path, and the unmap takes its global map path from there, so every UnmapVolume of the deleted pod fails (\"UnmapVolume.UnmapBlockVolume failed ... mapPath is empty\"): the pod stays Terminating with pods/<uid>, its map link volumeDevices/<pv>/dev/<uid> and its publish target publish/<pv>/<uid>, until a pod maps the volume again",
			Symptom: rebootBlockSymptom, Refs: refs},
		Expectation{Outcome: Clean, Says: "the reconstructed device stays uncertain with its map path (#122211: \"markDeviceErrorState leaving volume uncertain\"), so the deleted pod is unmapped and the device unstaged; #123032 is not in this release",
			Refs: refs},
		"1.26.13", "1.27.10", "1.28.6", "1.29.1", "1.30.0")
	last := &out[len(out)-1]
	last.Says = "the reconstructed device stays uncertain with its map path (#122211), and the unmap takes the global map path from the volume's mapper (#123032), so the deleted pod is unmapped and the device unstaged"
	return out
}
