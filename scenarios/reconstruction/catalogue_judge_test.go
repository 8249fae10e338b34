package reconstruction

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
)

// The kubelet's log lines of a vol-data-deleted hop on v1.37.2 for pod u1
// and PV pv1, as it logs them (klog header trimmed to the essentials).
const (
	couldNotConstruct  = `I1205 10:00:00.000001    1 reconstruct.go:67] "Could not construct volume information" podName="u1" volumeSpecName="pv1" err="kubernetes.io/csi: plugin.ConstructVolumeSpec failed loading volume data using [/k/pods/u1/volumes/kubernetes.io~csi/pv1]: kubernetes.io/csi: failed to open volume data file [/k/pods/u1/volumes/kubernetes.io~csi/pv1/vol_data.json]: open /k/pods/u1/volumes/kubernetes.io~csi/pv1/vol_data.json: no such file or directory"`
	newUnmounterFailed = `E1205 10:00:02.000001    1 reconstruct_common.go:171] "volumeHandler.UnmountVolumeHandler for UnmountVolume failed for volume \"pv1\" (UniqueName: \"pv1\") pod \"u1\" (UID: \"u1\") : UnmountVolume.NewUnmounter failed for volume \"pv1\" (UniqueName: \"pv1\") pod \"u1\" (UID: \"u1\") : kubernetes.io/csi: unmounter failed to load volume data file [/k/pods/u1/volumes/kubernetes.io~csi/pv1/mount]: kubernetes.io/csi: failed to open volume data file [/k/pods/u1/volumes/kubernetes.io~csi/pv1/vol_data.json]: open /k/pods/u1/volumes/kubernetes.io~csi/pv1/vol_data.json: no such file or directory"`
	tearDownFailed     = `E1205 10:00:03.000001    1 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/drv^h1 podName:u1 nodeName:}" failed. Error: UnmountVolume.TearDown failed for volume "data" (UniqueName: "kubernetes.io/csi/drv^h1") pod "u1" (UID: "u1") : rpc error: code = Internal`
	stillReferenced    = `E1205 10:01:00.000001    1 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/drv^h1 podName: nodeName:}" failed. Error: GetDeviceMountRefs check failed for volume "pv1" (UniqueName: "kubernetes.io/csi/drv^h1") on node "n" : the device mount path "/k/plugins/kubernetes.io/csi/drv/h1/globalmount" is still mounted by other references [/k/pods/u1/volumes/kubernetes.io~csi/pv1/mount]`
)

// What the witness starts of a hop whose error counter read 0 of the 1
// failure its log shows said (kubeletmetrics.RaceLoss): the counter moves,
// or it never does.
const (
	witnessCounted    = "reconstruct_volume_operations_errors_total is 0, but the kubelet's log since its start shows 1 failed reconstructions (2 (1 marked uncertain, 1 could not be constructed)); the same kubelet started again as a witness counted its failed reconstructions (witness start 1: counter 1, its log 2 (1 marked uncertain, 1 could not be constructed)), so the counter moves and this start lost its increments"
	witnessNeverMoves = "reconstruct_volume_operations_errors_total is 0, but the kubelet's log since its start shows 1 failed reconstructions (2 (1 marked uncertain, 1 could not be constructed)); the same kubelet started 2 more times as a witness, and no start counted the failed reconstructions its log shows (witness start 1: counter 0, its log 2 (1 marked uncertain, 1 could not be constructed); witness start 2: counter 0, its log 2 (1 marked uncertain, 1 could not be constructed)): a counter that never moves, not the metrics registration race, which drops a start's increments now and then, not on every start"
)

// volDataHop is what a v1.37.2 hop of vol-data-deleted shows, exactly its
// known bug's symptom: pod u1's dir and mount left, the two lines, each
// counter moved by the one planted volume.
func volDataHop() catalogue.Observation {
	return catalogue.Observation{
		Detail: "left by the old pods",
		Traces: []catalogue.Trace{
			{Kind: catalogue.Dir, Path: "pods/u1"},
			{Kind: catalogue.Mounted, Path: "pods/u1/volumes/kubernetes.io~csi/pv1/mount"},
		},
		Bind:   map[string][]string{catalogue.OldUID: {"u1"}, catalogue.PV: {"pv1"}, catalogue.Driver: {"drv"}, catalogue.VolumeHash: {"h1"}},
		Log:    strings.Join([]string{"I1205 start", couldNotConstruct, newUnmounterFailed}, "\n"),
		Logged: true,
		Counters: map[string]catalogue.Reading{
			kubeletmetrics.ReconstructVolumeOperations:       {Value: 2},
			kubeletmetrics.ReconstructVolumeOperationsErrors: {Value: 1},
			kubeletmetrics.ForceCleanedFailedVolumeOps:       {Value: 1},
			kubeletmetrics.ForceCleanedFailedVolumeOpErrors:  {Value: 1},
			kubeletmetrics.OrphanPodCleanedVolumesErrors:     {Value: 1},
		},
		Counts: map[catalogue.Count]int{catalogue.Unreconstructable: 1, catalogue.OldPodDirs: 1, catalogue.LocalVolumeDirs: 0},
	}
}

// A known bug counts as seen only on its exact symptom: anything it does
// not name fails the hop naming the thing and the expectation; a symptom
// in part fails too; nothing of it is said, as before.
func TestJudgeSymptom(t *testing.T) {
	volData, _ := CatalogueEntry("vol-data-deleted")
	v := version.MustParseSemantic("1.37.2")
	const cites = "which the expected #101791, #85280, KEP-6058 symptom (reconstruction failure) does not name"
	tests := []struct {
		name   string
		change func(o *catalogue.Observation)
		// want: "reproduced", "not seen", "unexpected" or "partial", and
		// what the verdict must say.
		want string
		says []string
	}{
		{name: "the exact symptom", change: func(*catalogue.Observation) {}, want: "reproduced",
			says: []string{"reconstruct_volume_operations_errors_total = 1", `logged "UnmountVolume.NewUnmounter failed*u1*vol_data.json*no such file or directory"`, "pods/u1/volumes/kubernetes.io~csi/<pv>/mount mounted"}},
		{name: "another leftover beside it", change: func(o *catalogue.Observation) {
			o.Traces = append(o.Traces, catalogue.Trace{Kind: catalogue.Mounted, Path: "pods/u1/volume-subpaths/host/workload/2"})
		}, want: "unexpected", says: []string{"left pods/u1/volume-subpaths/host/workload/2 mounted, " + cites}},
		{name: "a block map link left", change: func(o *catalogue.Observation) {
			o.Traces = append(o.Traces, catalogue.Trace{Kind: catalogue.File, Path: "plugins/kubernetes.io/csi/volumeDevices/pv1/dev/u1", Detail: "symlink"})
		}, want: "unexpected", says: []string{"left plugins/kubernetes.io/csi/volumeDevices/pv1/dev/u1 file (symlink)", cites}},
		{name: "the error counter moved by another amount", change: func(o *catalogue.Observation) {
			o.Counters[kubeletmetrics.ReconstructVolumeOperationsErrors] = catalogue.Reading{Value: 2}
		}, want: "unexpected", says: []string{"reconstruct_volume_operations_errors_total = 2, where the symptom names 1", cites}},
		{name: "the leak without the error counters (reconstructed from the dir name)", change: func(o *catalogue.Observation) {
			o.Counters[kubeletmetrics.ReconstructVolumeOperationsErrors] = catalogue.Reading{}
			o.Counters[kubeletmetrics.ForceCleanedFailedVolumeOps] = catalogue.Reading{}
			o.Counters[kubeletmetrics.ForceCleanedFailedVolumeOpErrors] = catalogue.Reading{}
			o.Log = "I1205 start\n" + newUnmounterFailed
		}, want: "partial", says: []string{"showed in part: pods/u1 dir", "but not log line \"Could not construct volume information*u1*vol_data.json*no such file or directory\"", "reconstruct_volume_operations_errors_total == 1 (" + string(catalogue.Unreconstructable) + "; it is 0)"}},
		{name: "the counters without the leak", change: func(o *catalogue.Observation) {
			o.Traces = nil
		}, want: "partial", says: []string{"but not pods/u1 dir; pods/u1/volumes/kubernetes.io~csi/<pv>/mount mounted"}},
		{name: "an error line about the old pod the symptom does not name", change: func(o *catalogue.Observation) {
			o.Log += "\n" + tearDownFailed
		}, want: "unexpected", says: []string{`logged "Operation for \"{volumeName:kubernetes.io/csi/drv^h1 podName:u1 nodeName:}\" failed. Error: UnmountVolume.TearDown failed`, cites}},
		{name: "the metrics registration race dropped the error", change: func(o *catalogue.Observation) {
			o.Counters[kubeletmetrics.ReconstructVolumeOperationsErrors] = catalogue.Reading{Lost: 1}
		}, want: "reproduced", says: []string{"the metrics registration race dropped up to 1 increments"}},
		{name: "the race dropped the error counter's increment alone, and a witness start counted it", change: func(o *catalogue.Observation) {
			o.Counters[kubeletmetrics.ReconstructVolumeOperationsErrors] = catalogue.Reading{Lost: 1, Race: witnessCounted}
		}, want: "reproduced", says: []string{"reconstruct_volume_operations_errors_total = 0, 1 short of 1: the metrics registration race dropped up to 1 increments; " + witnessCounted}},
		{name: "an error counter that never moves, on the witness starts too", change: func(o *catalogue.Observation) {
			o.Counters[kubeletmetrics.ReconstructVolumeOperationsErrors] = catalogue.Reading{Race: witnessNeverMoves}
		}, want: "partial", says: []string{"reconstruct_volume_operations_errors_total == 1 (" + string(catalogue.Unreconstructable) + "; it is 0; " + witnessNeverMoves + ")"}},
		{name: "the total's loss is not the error counter's", change: func(o *catalogue.Observation) {
			o.Counters[kubeletmetrics.ReconstructVolumeOperations] = catalogue.Reading{Value: 0, Lost: 2}
			o.Counters[kubeletmetrics.ReconstructVolumeOperationsErrors] = catalogue.Reading{}
		}, want: "partial", says: []string{"reconstruct_volume_operations_errors_total == 1 (" + string(catalogue.Unreconstructable) + "; it is 0)"}},
		{name: "a node without the kubelet's log", change: func(o *catalogue.Observation) {
			o.Log, o.Logged = "", false
		}, want: "reproduced", says: []string{"its lines are not judged"}},
		{name: "nothing of it", change: func(o *catalogue.Observation) {
			*o = catalogue.Observation{Detail: "old pods u1 cleaned", Bind: o.Bind, Logged: true, Log: "I1205 start",
				Counters: map[string]catalogue.Reading{kubeletmetrics.ReconstructVolumeOperationsErrors: {}, kubeletmetrics.ForceCleanedFailedVolumeOps: {}, kubeletmetrics.ForceCleanedFailedVolumeOpErrors: {}, kubeletmetrics.OrphanPodCleanedVolumesErrors: {}},
				Counts:   map[catalogue.Count]int{catalogue.Unreconstructable: 1, catalogue.OldPodDirs: 0}}
		}, want: "not seen", says: []string{"expected #101791, #85280, KEP-6058 reconstruction failure not seen on kubelet v1.37.2: fixed upstream?"}},
		{name: "only an earlier hop's pod dir, which moves the orphan gauge", change: func(o *catalogue.Observation) {
			o.Traces, o.Log = nil, "I1205 start"
			o.Counters[kubeletmetrics.ReconstructVolumeOperationsErrors] = catalogue.Reading{}
			o.Counters[kubeletmetrics.ForceCleanedFailedVolumeOps] = catalogue.Reading{}
			o.Counters[kubeletmetrics.ForceCleanedFailedVolumeOpErrors] = catalogue.Reading{}
		}, want: "not seen", says: []string{"(kubelet_orphan_pod_cleaned_volumes_errors = 1)", "not seen on kubelet v1.37.2"}},
		{name: "two old pods, one left", change: func(o *catalogue.Observation) {
			o.Bind[catalogue.OldUID] = []string{"u1", "u2"}
			o.Counts[catalogue.Unreconstructable] = 2
			o.Counters[kubeletmetrics.ReconstructVolumeOperationsErrors] = catalogue.Reading{Value: 2}
			o.Counters[kubeletmetrics.ForceCleanedFailedVolumeOps] = catalogue.Reading{Value: 2}
			o.Counters[kubeletmetrics.ForceCleanedFailedVolumeOpErrors] = catalogue.Reading{Value: 2}
		}, want: "partial", says: []string{"but not pods/u2 dir; pods/u2/volumes/kubernetes.io~csi/<pv>/mount mounted"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := volDataHop()
			tc.change(&o)
			d, err := catalogue.Judge(volData, v, nil, o)
			var got, text string
			var ue *catalogue.UnexpectedError
			var pe *catalogue.PartialError
			switch {
			case errors.As(err, &ue):
				got, text = "unexpected", err.Error()
			case errors.As(err, &pe):
				got, text = "partial", err.Error()
			case err != nil:
				t.Fatalf("Judge: %v", err)
			case d != nil && d.Reproduced():
				got, text = "reproduced", d.Observed+" | "+d.Reason+" | "+d.Expected
			case d != nil && d.IsExpected():
				got, text = "not seen", d.Observed+" | "+d.Reason
			default:
				got = "nothing"
			}
			if got != tc.want {
				t.Fatalf("verdict %s (%v %v), want %s", got, d, err, tc.want)
			}
			for _, s := range tc.says {
				if !strings.Contains(text, s) {
					t.Errorf("verdict says %q; want it to say %q", text, s)
				}
			}
		})
	}
}

// After the workload's deletion, the global mount an old pod's leftover
// holds is the vol-data bug's own; the same leak on a bug whose symptom
// names nothing then fails, naming it.
func TestJudgeAfterDelete(t *testing.T) {
	v := version.MustParseSemantic("1.37.2")
	bind := map[string][]string{catalogue.OldUID: {"u1"}, catalogue.PV: {"pv1"}, catalogue.Driver: {"drv"}, catalogue.VolumeHash: {"h1"}}
	leak := catalogue.Observation{Detail: "after the StatefulSet was deleted", Bind: bind, Logged: true, Log: stillReferenced,
		Traces: []catalogue.Trace{{Kind: catalogue.Mounted, Path: "plugins/kubernetes.io/csi/drv/h1/globalmount"}}}
	volData, _ := CatalogueEntry("vol-data-deleted")
	if d, err := catalogue.JudgeAfterDelete(volData, v, nil, leak); err != nil || d == nil || !d.Reproduced() || !strings.Contains(d.Reason, "after the workload's deletion") {
		t.Errorf("vol-data-deleted's leak after the deletion: %+v, %v", d, err)
	}
	noLine := leak
	noLine.Log = "I1205 start"
	if _, err := catalogue.JudgeAfterDelete(volData, v, nil, noLine); !errors.As(err, new(*catalogue.PartialError)) {
		t.Errorf("the leak without the kubelet refusing the unstage: %v", err)
	}
	if d, err := catalogue.JudgeAfterDelete(volData, v, nil, catalogue.Observation{Bind: bind, Logged: true}); err != nil || d == nil || d.Reproduced() || !strings.HasPrefix(d.Observed, "not seen: ") {
		t.Errorf("no leak after the deletion must be said: %+v, %v", d, err)
	}
	subpath, _ := CatalogueEntry("subpath")
	_, err := catalogue.JudgeAfterDelete(subpath, v, nil, leak)
	if !errors.As(err, new(*catalogue.UnexpectedError)) || !strings.Contains(err.Error(), "left plugins/kubernetes.io/csi/drv/h1/globalmount mounted, which the expected #135698, PR #135696 symptom (subpath rmdir busy leak) does not name") {
		t.Errorf("a global-mount leak on the subpath bug: %v", err)
	}
	if d, err := catalogue.JudgeAfterDelete(subpath, v, nil, catalogue.Observation{Bind: bind}); d != nil || err != nil {
		t.Errorf("nothing left on a bug that names nothing after the deletion: %+v, %v", d, err)
	}
}

// Each entry's symptom matches the lines the kubelet logs for it (as its
// source writes them), and a line its mechanism rules out fails.
func TestSymptomLines(t *testing.T) {
	bind := map[string][]string{catalogue.OldUID: {"u1"}, catalogue.UID: {"u1"}, catalogue.PV: {"pv1"}}
	for _, tc := range []struct {
		entry, kubelet, line string
	}{
		{"subpath", "1.37.2", `E1205 10:00:00.000001    1 kubelet_volumes.go:282] "There were many similar errors. Turn up verbosity to see them." err="orphaned pod \"u1\" found, but failed to remove subpath at path /k/pods/u1/volume-subpaths/host/workload/3: remove /k/pods/u1/volume-subpaths/host/workload/3: device or resource busy" numErrs=2`},
		{"subpath", "1.35.4", `E1205 10:00:00.000001    1 kubelet_volumes.go:282] "There were many similar errors. Turn up verbosity to see them." err="orphaned pod \"u1\" found, but failed to rmdir() subpath at path /k/pods/u1/volume-subpaths/host/workload/3: remove /k/pods/u1/volume-subpaths/host/workload/3: device or resource busy" numErrs=2`},
		{"file-for-dir", "1.37.2", `E1205 10:00:00.000001    1 kubelet_volumes.go:282] "There were many similar errors. Turn up verbosity to see them." err="orphaned pod \"u1\" found, but error occurred when trying to remove the volumes dir: not a directory" numErrs=1`},
		{"reboot-file-subpath", "1.28.5", `E1205 10:00:00.000001    1 kubelet_volumes.go:262] "There were many similar errors. Turn up verbosity to see them." err="orphaned pod \"u1\" found, but failed to rmdir() subpath at path /k/pods/u1/volume-subpaths/cfg/workload/1: not a directory" numErrs=1`},
		{"pvc-terminating", "1.32.2", `E1205 10:00:00.000001    1 desired_state_of_world_populator.go:304] "Error processing volume" err="error processing PVC ns/data-web-0: PVC is being deleted" pod="ns/web-0" volumeName="data"`},
		{"pvc-terminating", "1.26.15", `I1205 10:00:00.000001    1 reconciler_common.go:169] "operationExecutor.UnmountVolume started for volume \"data\" (UniqueName: \"kubernetes.io/csi/drv^h1\") pod \"u1\" (UID: \"u1\") "`},
		{"local-volume", "1.37.2", `I1205 10:00:00.000001    1 reconstruct.go:67] "Could not construct volume information" podName="u1" volumeSpecName="pv1" err="reconstructVolume.NewMounter failed for volume \"kubernetes.io/local-volume/pv1\" (spec.Name: \"pv1\") pod \"u1\" (UID: \"u1\") with: local volume source is nil or local path is not set"`},
	} {
		e, _ := CatalogueEntry(tc.entry)
		x, _ := e.ExpectationFor(version.MustParseSemantic(tc.kubelet))
		if !x.Symptom.LogMatches(tc.line, bind) {
			t.Errorf("%s on %s: no log line of its symptom %q matches %s", tc.entry, tc.kubelet, x.Symptom.Logs, tc.line)
		}
	}

	reboot, _ := CatalogueEntry("reboot")
	gates := map[string]bool{"NewVolumeManagerReconstruction": false}
	o := catalogue.Observation{Detail: "stuck", Traces: []catalogue.Trace{{Kind: catalogue.NotRunning}}, Bind: bind, Logged: true,
		Log: `E1205 10:00:00.000001    1 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/drv^h1}" failed. Error: MountVolume.SetUp failed for volume "pv1" (UniqueName: "kubernetes.io/csi/drv^h1") pod "web-0" (UID: "u2") : rpc error`}
	v := version.MustParseSemantic("1.28.15")
	if d, err := catalogue.Judge(reboot, v, gates, o); err != nil || d == nil || !d.Reproduced() {
		t.Errorf("#117513 as it shows: %+v, %v", d, err)
	}
	o.Log += "\n" + `I1205 10:00:01.000001    1 operation_generator.go:665] "MountVolume.MountDevice succeeded for volume \"pv1\" (UniqueName: \"kubernetes.io/csi/drv^h1\") pod \"web-0\" (UID: \"u2\") device mount path \"/k/plugins/kubernetes.io/csi/drv/h1/globalmount\""`
	if _, err := catalogue.Judge(reboot, v, gates, o); !errors.As(err, new(*catalogue.UnexpectedError)) || !strings.Contains(err.Error(), "which the bug's mechanism rules out") {
		t.Errorf("re-created pods stuck with their volume staged are not #117513: %v", err)
	}
}

// A clean expectation fails on any trace, as it did on the symptom in
// words.
func TestJudgeCleanOnTraces(t *testing.T) {
	reboot, _ := CatalogueEntry("reboot")
	_, err := catalogue.Judge(reboot, version.MustParseSemantic("1.37.2"), nil, catalogue.Observation{Traces: []catalogue.Trace{{Kind: catalogue.NotRunning, Detail: "MountVolume.SetUp failed"}}})
	var bse *catalogue.BugSeenError
	if !errors.As(err, &bse) || !strings.Contains(err.Error(), "re-created pods not running (MountVolume.SetUp failed)") {
		t.Errorf("a clean kubelet whose re-created pods did not run: %v", err)
	}
}

// pvc-terminating's bug, as v1.28.15 shows it (make test-history): the
// running pod's mount taken, so its file gone, the volume unstaged, and
// the unmount logged. All of it is the bug; a leftover of a deleted pod
// is not.
func TestPVCTerminatingSymptom(t *testing.T) {
	e, _ := CatalogueEntry("pvc-terminating")
	v := version.MustParseSemantic("1.28.15")
	bind := map[string][]string{catalogue.UID: {"u1"}, catalogue.PV: {"pv1"}, catalogue.Driver: {"drv"}, catalogue.VolumeHash: {"h1"}}
	o := catalogue.Observation{Bind: bind, Logged: true,
		Traces: []catalogue.Trace{
			{Kind: catalogue.Unmounted, Path: "pods/u1/volumes/kubernetes.io~csi/pv1/mount"},
			{Kind: catalogue.Unmounted, Path: "plugins/kubernetes.io/csi/drv/h1/globalmount"},
			{Kind: catalogue.ContentChanged, Path: "pods/u1/volumes/kubernetes.io~csi/pv1/mount/marker", Detail: `held "written by pod web-0", now "!cat: no such file"`},
			{Kind: catalogue.UnmountLogged, Detail: "the kubelet logged 5 unmounts of the running pods' volumes since its start"},
		},
		Log: `E1205 10:00:00.000001    1 desired_state_of_world_populator.go:304] "Error processing volume" err="error processing PVC ns/data-web-0: PVC is being deleted" pod="ns/web-0" volumeName="data"` + "\n" +
			`I1205 10:00:00.000002    1 reconciler_common.go:172] "operationExecutor.UnmountVolume started for volume \"data\" (UniqueName: \"kubernetes.io/csi/drv^h1\") pod \"u1\" (UID: \"u1\") "`,
	}
	if d, err := catalogue.Judge(e, v, nil, o); err != nil || d == nil || !d.Reproduced() {
		t.Fatalf("#130335 as v1.28.15 shows it: %+v, %v", d, err)
	}
	o.Traces = append(o.Traces, catalogue.Trace{Kind: catalogue.Dir, Path: "pods/u9"})
	if _, err := catalogue.Judge(e, v, nil, o); !errors.As(err, new(*catalogue.UnexpectedError)) {
		t.Errorf("a pod dir beside the bug's traces must be unexpected: %v", err)
	}
}
