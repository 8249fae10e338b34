package reconstruction

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

// The kubelet's lines of a vol-data-deleted hop on v1.37.2 for old pod u1
// and its PV pv1 (kubelet root /k).
const (
	volDataConstructLine = `I1205 10:00:00.000001    1 reconstruct.go:67] "Could not construct volume information" podName="u1" volumeSpecName="pv1" err="kubernetes.io/csi: plugin.ConstructVolumeSpec failed loading volume data using [/k/pods/u1/volumes/kubernetes.io~csi/pv1]: kubernetes.io/csi: failed to open volume data file [/k/pods/u1/volumes/kubernetes.io~csi/pv1/vol_data.json]: open /k/pods/u1/volumes/kubernetes.io~csi/pv1/vol_data.json: no such file or directory"`
	volDataUnmounterLine = `E1205 10:00:02.000001    1 reconstruct_common.go:171] "volumeHandler.UnmountVolumeHandler for UnmountVolume failed for volume \"pv1\" (UniqueName: \"pv1\") pod \"u1\" (UID: \"u1\") : UnmountVolume.NewUnmounter failed for volume \"pv1\" (UniqueName: \"pv1\") pod \"u1\" (UID: \"u1\") : kubernetes.io/csi: unmounter failed to load volume data file [/k/pods/u1/volumes/kubernetes.io~csi/pv1/mount]: kubernetes.io/csi: failed to open volume data file [/k/pods/u1/volumes/kubernetes.io~csi/pv1/vol_data.json]: open /k/pods/u1/volumes/kubernetes.io~csi/pv1/vol_data.json: no such file or directory"`
)

// volDataJudged runs the judge step of a vol-data-deleted hop on kubelet
// v1.37.2 whose old pod u1 left what left says, whose kubelet logged log,
// and whose counters read as counters, with one vol_data.json planted;
// it returns the step's record and error.
func volDataJudged(t *testing.T, left []nodestate.Leftover, log string, counters map[string]float64) (*reports.Step, error) {
	t.Helper()
	f, err := LookupFault("vol-data-deleted")
	if err != nil {
		t.Fatal(err)
	}
	node := &gatedNode{log: log}
	s := &Scenario{cfg: Config{Fault: &f}, node: node, hop: &reports.Hop{To: "v1.37.2"}, oldUIDs: []string{"u1"}, left: left,
		volumes: storage.Volumes{PVs: []storage.PV{{Name: "pv1", Driver: "drv", VolumeHandle: "h1"}}}}
	entries := []nodestate.Entry{{Path: "pods/new", Type: nodestate.TypeDir}}
	for _, l := range left {
		if l.Kind == nodestate.LeftoverPodDir {
			entries = append(entries, nodestate.Entry{Path: l.Path, Type: nodestate.TypeDir})
		}
	}
	s.leftSnap = &nodestate.Snapshot{ResolvedRoot: "/k", Entries: entries}
	s.unreconstructable = 1
	for m, v := range counters {
		s.metricResults = append(s.metricResults, kubeletmetrics.Result{Metric: m, Name: m, Value: v, Present: true})
	}
	r, err := run(t, node, scenarios.Step{Name: "hop 1: catalogue fault vol-data-deleted on kubelet v1.37.2", Run: s.judge(version.MustParseGeneric("1.37.2"))})
	return &r.Steps[0], err
}

// The vol-data-deleted hop's judge: its exact symptom is the known bug;
// another leftover beside it, a counter moved by another amount, or the
// leak without its counters fail the hop, each naming what it saw and the
// expectation; nothing of it is said, not passed.
func TestJudgeStepHoldsTheSymptom(t *testing.T) {
	dir := nodestate.Leftover{UID: "u1", Kind: nodestate.LeftoverPodDir, Path: "pods/u1", Detail: `dir still present (6 entries), kept by "volumes/kubernetes.io~csi/pv1/mount" (mounted)`}
	mount := nodestate.Leftover{UID: "u1", Kind: nodestate.LeftoverMount, Path: "/k/pods/u1/volumes/kubernetes.io~csi/pv1/mount", Detail: "tmpfs from tmpfs"}
	exact := map[string]float64{
		kubeletmetrics.ReconstructVolumeOperationsErrors: 1, kubeletmetrics.ForceCleanedFailedVolumeOps: 1,
		kubeletmetrics.ForceCleanedFailedVolumeOpErrors: 1, kubeletmetrics.OrphanPodCleanedVolumesErrors: 1,
	}
	with := func(m string, v float64) map[string]float64 {
		out := map[string]float64{}
		for k, x := range exact {
			out[k] = x
		}
		out[m] = v
		return out
	}
	lines := volDataConstructLine + "\n" + volDataUnmounterLine
	const names = "which the expected #101791, #85280, KEP-6058 symptom (reconstruction failure) does not name"
	for _, tc := range []struct {
		name     string
		left     []nodestate.Leftover
		log      string
		counters map[string]float64
		fails    string // "" for a pass
		observed string
	}{
		{name: "the exact symptom", left: []nodestate.Leftover{dir, mount}, log: lines, counters: exact,
			observed: "the symptom showed: pods/u1 dir; pods/u1/volumes/kubernetes.io~csi/<pv>/mount mounted"},
		{name: "a subPath bind of another volume left too", left: []nodestate.Leftover{dir, mount, {UID: "u1", Kind: nodestate.LeftoverMount, Path: "/k/pods/u1/volume-subpaths/host/workload/2", Detail: "ext4 from /dev/vda"}},
			log: lines, counters: exact, fails: "left pods/u1/volume-subpaths/host/workload/2 mounted (ext4 from /dev/vda), " + names},
		{name: "a block map link left too", left: []nodestate.Leftover{dir, mount, {UID: "u1", Kind: nodestate.LeftoverPluginEntry, Path: "plugins/kubernetes.io/csi/volumeDevices/pv1/dev/u1", Detail: "symlink"}},
			log: lines, counters: exact, fails: "left plugins/kubernetes.io/csi/volumeDevices/pv1/dev/u1 file (symlink), " + names},
		{name: "the error counter moved by another amount", left: []nodestate.Leftover{dir, mount}, log: lines,
			counters: with(kubeletmetrics.ReconstructVolumeOperationsErrors, 3), fails: "reconstruct_volume_operations_errors_total = 3, where the symptom names 1"},
		{name: "the leak with the error counter at 0", left: []nodestate.Leftover{dir, mount}, log: volDataUnmounterLine,
			counters: with(kubeletmetrics.ReconstructVolumeOperationsErrors, 0), fails: "showed in part"},
		{name: "nothing of it", log: "I1205 nothing", counters: map[string]float64{kubeletmetrics.ReconstructVolumeOperationsErrors: 0, kubeletmetrics.OrphanPodCleanedVolumesErrors: 0},
			observed: "not seen: old pods u1 cleaned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := volDataJudged(t, tc.left, tc.log, tc.counters)
			if tc.fails != "" {
				if err == nil || st.Verdict != reports.Fail || !strings.Contains(err.Error(), tc.fails) {
					t.Fatalf("verdict %s, error %v; want a failure saying %q", st.Verdict, err, tc.fails)
				}
				return
			}
			if err != nil || st.Verdict != reports.PassWithExpectedDeviations || len(st.Deviations) != 1 || !strings.Contains(st.Deviations[0].Observed, tc.observed) {
				t.Fatalf("verdict %s, error %v, deviations %+v; want an expected deviation observing %q", st.Verdict, err, st.Deviations, tc.observed)
			}
		})
	}
}

// The metric step holds a known-bug hop's counters to the symptom: the
// value it names is an expected deviation; another value fails, and the
// failure names what the symptom says.
func TestSymptomMetrics(t *testing.T) {
	f, err := LookupFault("file-for-dir")
	if err != nil {
		t.Fatal(err)
	}
	s := &Scenario{cfg: Config{Fault: &f}, node: &gatedNode{}, hop: &reports.Hop{To: "v1.37.2"}, oldUIDs: []string{"u1"}, unreconstructable: 1,
		left:     []nodestate.Leftover{{UID: "u1", Kind: nodestate.LeftoverPodDir, Path: "pods/u1"}},
		leftSnap: &nodestate.Snapshot{ResolvedRoot: "/k", Entries: []nodestate.Entry{{Path: "pods/u1", Type: nodestate.TypeDir}}}}
	to := version.MustParseGeneric("1.37.2")
	scrape := func(errs, orphans string) *kubeletmetrics.Scrape {
		sc, err := kubeletmetrics.Parse([]byte("# TYPE reconstruct_volume_operations_total counter\nreconstruct_volume_operations_total 2\n" +
			"# TYPE reconstruct_volume_operations_errors_total counter\nreconstruct_volume_operations_errors_total " + errs + "\n" +
			"# TYPE force_cleaned_failed_volume_operations_total counter\nforce_cleaned_failed_volume_operations_total 1\n" +
			"# TYPE force_cleaned_failed_volume_operation_errors_total counter\nforce_cleaned_failed_volume_operation_errors_total 1\n" +
			"# TYPE kubelet_orphan_pod_cleaned_volumes_errors gauge\nkubelet_orphan_pod_cleaned_volumes_errors " + orphans + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	verdicts := func(sc *kubeletmetrics.Scrape) map[string]kubeletmetrics.Result {
		out := map[string]kubeletmetrics.Result{}
		exps, err := s.symptomMetrics(t.Context(), nil, sc, kubeletmetrics.CSIExpectations(2), to)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := kubeletmetrics.Evaluate(sc, s.hop.To, exps)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			out[r.Metric] = r
		}
		return out
	}
	got := verdicts(scrape("1", "1"))
	for _, m := range []string{kubeletmetrics.ReconstructVolumeOperationsErrors, kubeletmetrics.ForceCleanedFailedVolumeOps, kubeletmetrics.ForceCleanedFailedVolumeOpErrors, kubeletmetrics.OrphanPodCleanedVolumesErrors} {
		if r := got[m]; r.Verdict != kubeletmetrics.PassWithExpectedDeviations || !strings.Contains(r.Reason, "#105536") || r.Expected != "== 0 (expected deviation: == 1)" {
			t.Errorf("%s on the exact symptom: %+v", m, r)
		}
	}
	got = verdicts(scrape("2", "1"))
	if r := got[kubeletmetrics.ReconstructVolumeOperationsErrors]; r.Verdict != kubeletmetrics.Fail {
		t.Errorf("two reconstruction errors where the symptom names one: %+v", r)
	}
	if note := s.symptomNote(to); !strings.Contains(note, "the expected #105536, #111933, #119919, #114698 symptom (orphaned pod \"not a directory\" leak) of fault file-for-dir names only reconstruct_volume_operations_errors_total == "+string(catalogue.Unreconstructable)) {
		t.Errorf("the failure's note: %q", note)
	}
	// A kubelet where the fault is clean keeps every counter at its
	// value without the bug; one with the bug gets the symptom's.
	rfs, err := LookupFault("reboot-file-subpath")
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.Fault = &rfs
	for v, want := range map[string]bool{"1.28.15": false, "1.28.5": true} {
		s.hop.To = "v" + v
		exps, err := s.symptomMetrics(t.Context(), nil, scrape("0", "1"), kubeletmetrics.CSIExpectations(2), version.MustParseGeneric(v))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range exps {
			if e.Metric == kubeletmetrics.OrphanPodCleanedVolumesErrors && (e.Deviation != nil) != want {
				t.Errorf("reboot-file-subpath on %s: orphan errors expected as %+v", v, e)
			}
		}
	}
}

// A pod dir left is kept by what lies below its volume dirs: a file there
// is a trace of its own (an empty vol_data.json, a stray file), an empty
// dir or what the sweep leaves beside (containers/) is not.
func TestOldPodTraces(t *testing.T) {
	snap := &nodestate.Snapshot{ResolvedRoot: "/k", Entries: []nodestate.Entry{
		{Path: "pods/u1", Type: nodestate.TypeDir},
		{Path: "pods/u1/containers", Type: nodestate.TypeDir},
		{Path: "pods/u1/etc-hosts", Type: nodestate.TypeFile},
		{Path: "pods/u1/volumes/kubernetes.io~csi", Type: nodestate.TypeDir},
		{Path: "pods/u1/volumes/kubernetes.io~csi/" + strayName, Type: nodestate.TypeFile},
		{Path: "pods/u1/volume-subpaths/host/workload", Type: nodestate.TypeDir},
		{Path: "pods/u1/volume-subpaths/host/workload/2", Type: nodestate.TypeDir},
	}}
	left := []nodestate.Leftover{
		{UID: "u1", Kind: nodestate.LeftoverPodDir, Path: "pods/u1"},
		{UID: "u1", Kind: nodestate.LeftoverMount, Path: "/k/pods/u1/volume-subpaths/host/workload/2"},
	}
	var got []string
	for _, tr := range oldPodTraces(snap, left) {
		got = append(got, string(tr.Kind)+" "+tr.Path)
	}
	want := []string{"dir pods/u1", "file pods/u1/volumes/kubernetes.io~csi/" + strayName, "mounted pods/u1/volume-subpaths/host/workload/2"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("traces %q, want %q", got, want)
	}
}
