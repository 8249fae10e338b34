package kubeletmetrics

import (
	"os"
	"strings"
	"testing"
)

func readLog(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newPathLog is cut from a real matrix tour's v1.34.4 kubelet (the
// race log); oldPathLog is a v1.27.16 kubelet's start with the gate off,
// its lines written from the format strings of reconstruct.go@v1.27.16 and
// reconciler.go@v1.27.16 (klog text, --v=2), one force-deleted pod with a
// CSI volume and its projected token.
const (
	newPathLog = "kubelet-v1.34.4-race.log"
	oldPathLog = "kubelet-v1.27.16-old-path.log"
)

func TestClassifyReconstructionPath(t *testing.T) {
	newLog, oldLog := readLog(t, newPathLog), readLog(t, oldPathLog)
	// The start of a kubelet logging at level 0: both paths log only
	// "Reconciler: start to sync state".
	quiet := `I1201 02:30:39.868784    4523 volume_manager.go:313] "Starting Kubelet Volume Manager"
I1201 02:30:39.870296    4523 reconciler.go:29] "Reconciler: start to sync state"
`
	// A kubelet in journald (kind, existing): the lines keep their
	// quoted messages after the journal's prefix.
	journal := `Dec 01 10:47:02 skewtest-worker kubelet[3354]: I1201 10:47:02.101010    3354 reconstruct.go:97] "Volume reconstruction finished"
Dec 01 10:47:02 skewtest-worker kubelet[3354]: I1201 10:47:02.101033    3354 reconciler.go:29] "Reconciler: start to sync state"
`
	// The JSON log format quotes the message too.
	jsonLog := `{"ts":1764585000.1,"caller":"reconciler/reconstruct.go:102","msg":"Reconciler sync states: could not find pod information in desired state, update it in actual state","v":2,"reconstructedVolume":"&{...}"}`
	// A local volume whose reconstruction fails on the old path: the
	// line is at level 0, and differs from the new path's own.
	oldFailed := `I1201 03:08:27.660933   20324 reconstruct.go:71] "Could not construct volume information, cleaning up mounts" podName="0d749d9d" volumeSpecName="skewtest-local-e1ae-0" err="reconstructVolume.NewMounter failed for volume"`
	newFailed := `I1201 03:08:27.660933   20324 reconstruct.go:67] "Could not construct volume information" podName="0d749d9d" volumeSpecName="skewtest-local-e1ae-0" err="reconstructVolume.NewMounter failed for volume"`

	for _, tc := range []struct {
		name, log      string
		volumes        int
		path, why      string
		newN, oldN     int
		sync           bool
		detailHas, not []string
	}{
		{name: "real new path", log: newLog, volumes: 6, path: PathNew, newN: 11, sync: true, detailHas: []string{"new reconstruction", "11 lines"}},
		{name: "old path", log: oldLog, volumes: 2, path: PathOld, oldN: 5, sync: true, detailHas: []string{"old reconstruction", "Reconciler sync states"}},
		{name: "two starts in one log", log: oldLog + newLog, volumes: 6, path: PathBoth, why: "lines of both paths", newN: 11, oldN: 5, sync: true,
			detailHas: []string{"11 new-path lines", "5 old-path lines", "Volume is marked as uncertain", "Reconciler sync states"}},
		{name: "journald", log: journal, volumes: 0, path: PathNew, newN: 1, sync: true},
		{name: "json", log: jsonLog, volumes: 1, path: PathOld, oldN: 1},
		{name: "old path failed reconstruction", log: oldFailed, volumes: 1, path: PathOld, oldN: 1},
		// The new path's failed reconstruction is not an old-path line
		// (on its own it proves nothing: the quoted messages differ).
		{name: "new path failed reconstruction alone", log: newFailed, volumes: 1, path: PathNoneSeen, why: "log level below 2"},
		{name: "level 0 with volumes", log: quiet, volumes: 3, path: PathNoneSeen, why: "log level below 2", sync: true,
			detailHas: []string{"3 volume directories of deleted pods", "logs below level 2"}, not: []string{"may not reach back"}},
		{name: "nothing to reconstruct", log: quiet, volumes: 0, path: PathNoneSeen, why: "no volumes to reconstruct", sync: true,
			detailHas: []string{"old reconstruction with nothing to do, or a kubelet logging below level 2"}},
		{name: "unknown volumes, no reconciler start", log: "I1201 kubelet.go:1] \"Started kubelet\"", volumes: -1, path: PathNoneSeen,
			why: "no volumes to reconstruct, or log level below 2", detailHas: []string{"may not reach back"}},
		{name: "empty", log: "", volumes: -1, path: PathNoneSeen, why: "no volumes to reconstruct, or log level below 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ClassifyReconstructionPath(tc.log, tc.volumes)
			if got.Path != tc.path || got.Why != tc.why {
				t.Errorf("path %q (%q), want %q (%q)\n%s", got.Path, got.Why, tc.path, tc.why, got.Evidence())
			}
			if got.NewCount != tc.newN || got.OldCount != tc.oldN || got.SyncStarted != tc.sync {
				t.Errorf("%d new, %d old, sync %t; want %d, %d, %t", got.NewCount, got.OldCount, got.SyncStarted, tc.newN, tc.oldN, tc.sync)
			}
			for _, s := range tc.detailHas {
				if !strings.Contains(got.Detail, s) {
					t.Errorf("detail %q lacks %q", got.Detail, s)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(got.Detail, s) {
					t.Errorf("detail %q has %q", got.Detail, s)
				}
			}
			if (got.Err() != nil) != (tc.path == PathBoth) {
				t.Errorf("Err() = %v for path %q", got.Err(), got.Path)
			}
		})
	}
}

// The device lines of each path are counted on their path, not taken for
// the other's: "marked device as uncertain" is new, "marked device as
// mounted" old.
func TestClassifyDeviceLines(t *testing.T) {
	got := ClassifyReconstructionPath(`I1 reconstruct.go:168] "Volume is marked device as mounted and added into the actual state" volumeName="v"`, 1)
	if got.Path != PathOld {
		t.Errorf("old device line: %s", got.Cell())
	}
	got = ClassifyReconstructionPath(`I1 reconstruct.go:144] "Volume is marked device as uncertain and added into the actual state" volumeName="v"`, 1)
	if got.Path != PathNew {
		t.Errorf("new device line: %s", got.Cell())
	}
}

func TestPathCellAndEvidence(t *testing.T) {
	for _, tc := range []struct {
		l    PathLog
		cell string
	}{
		{PathLog{Path: PathNew}, "new"},
		{PathLog{Path: PathOld}, "old"},
		{PathLog{Path: PathNoneSeen, Why: "log level below 2"}, "none seen (log level below 2)"},
		{PathLog{Path: PathBoth, Why: "lines of both paths"}, "both"},
	} {
		if got := tc.l.Cell(); got != tc.cell {
			t.Errorf("Cell() = %q, want %q", got, tc.cell)
		}
	}
	// The evidence keeps at most maxPathLines lines a path, and says so.
	log := strings.Repeat(`I1 reconstruct.go:130] "Volume is marked as uncertain and added into the actual state"`+"\n", maxPathLines+5)
	got := ClassifyReconstructionPath(log, 25)
	if len(got.New) != maxPathLines || got.NewCount != maxPathLines+5 {
		t.Fatalf("kept %d of %d lines", len(got.New), got.NewCount)
	}
	ev := got.Evidence()
	for _, want := range []string{"reconstruction path: new\n", "25 new-path lines (first 20):\n", "0 old-path lines:\n"} {
		if !strings.Contains(ev, want) {
			t.Errorf("evidence lacks %q:\n%s", want, ev)
		}
	}
}
