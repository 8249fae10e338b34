package signoff

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/reports"
)

// A mutation measurement as skewtest mutants leaves it: the catalogue's
// 15 entries, two placements, the control and 18 mutants (one
// equivalent). Of the 17 scored, 14 are killed in both placements, one
// survives both, one is killed in one placement and masked in the other,
// and one is killed in one and undecided in the other (an infrastructure
// failure). Killed mutants run their killer first, so most of their
// other cells were not run.

var mutationNight = time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)

var mutationEntries = []string{
	"csi-filesystem", "reboot", "vol-data-deleted", "vol-data-empty", "file-for-dir", "kill-during-publish",
	"kill-between-unpublish-unstage", "driver-registers-late", "apiserver-unreachable", "pvc-terminating",
	"replacement-pod", "restart-no-delete", "prestop-emptydir",
	"local-volume,subpath,emptydir-memory,projected-secret-configmap,generic-ephemeral,csi-inline-ephemeral", "block",
}

// mutantSpec is a fixture mutant: in each placement, the entry that kills
// it (-1: none) and the cells that did not look like the control's.
type mutantSpec struct {
	name, area, breaks, reverts, equivalent string
	// kill[p] is the entry that killed it in placement p, -1 when none;
	// before[p] how many entries ran (same as the control) before it.
	kill, before [2]int
	// other[p] marks one entry of a placement not killed: masked or error.
	other map[int]struct {
		entry   int
		outcome string
	}
}

func mutantSpecs() []mutantSpec {
	k := func(name, area, breaks, reverts string, k0, k1 int) mutantSpec {
		return mutantSpec{name: name, area: area, breaks: breaks, reverts: reverts, kill: [2]int{k0, k1}, before: [2]int{1, 0}}
	}
	specs := []mutantSpec{
		k("revert-130335-pvc-protection", "volume manager", "Unmounts a running pod's PVC volume when its PVC is terminating.", "kubernetes#130335", 9, 9),
		k("revert-114326-terminating-pod-volumes", "volume manager", "Keeps a terminating pod's volumes mounted after it is gone.", "kubernetes#114326", 12, 12),
		k("revert-122211-reconstructed-device-error", "reconstruction", "Drops a reconstructed volume whose device is not found.", "kubernetes#122211", 4, 4),
		k("revert-122807-atomic-writer", "atomic writer", "Leaves the projected volume's data dir half written.", "kubernetes#122807", 13, 13),
		k("revert-123052-file-subpath", "subpath", "Never unmounts a subPath bind mount of a file.", "kubernetes#123052", 13, 13),
		k("block-never-scanned", "reconstruction", "Does not scan block volumes at start.", "none", 14, 14),
		k("csi-inline-ephemeral-reconstructed-as-persistent", "CSI plugin", "Reconstructs an inline ephemeral volume as a persistent one.", "none", 13, 13),
		k("csi-unpublish-final-error-ignored", "CSI plugin", "Forgets a volume whose NodeUnpublish failed for good.", "none", 6, 6),
		k("device-reconstruction-needs-pod-mount", "reconstruction", "Skips a device whose pod mount is gone.", "none", 2, 2),
		k("emptydir-memory-remounted-at-start", "emptyDir", "Mounts a memory emptyDir again at start.", "none", 12, 13),
		k("file-subpath-never-unmounted", "subpath", "Leaves a file subPath mounted after its pod.", "none", 13, 13),
		k("orphan-pod-dir-kept", "kubelet pods", "Keeps an orphaned pod's directory forever.", "none", 0, 0),
		k("reconstructed-never-unmounted", "reconstruction", "Never unmounts a reconstructed volume.", "none", 1, 1),
		k("vol-data-missing-from-dir-name", "reconstruction", "Cannot reconstruct a volume without vol_data.json.", "none", 2, 3),
		{name: "reconstruct-counter-never-incremented", area: "metrics", breaks: "The reconstruct counter never moves.", reverts: "none", kill: [2]int{-1, -1}},
		{name: "unmount-before-desired-state-populated", area: "volume manager", breaks: "Unmounts before the desired state is populated.", reverts: "none", kill: [2]int{7, -1},
			other: map[int]struct {
				entry   int
				outcome string
			}{1: {8, reports.MutantMasked}}},
		{name: "reconstruction-metrics-unregistered", area: "metrics", breaks: "Does not register the reconstruction metrics.", reverts: "none", kill: [2]int{-1, 1},
			other: map[int]struct {
				entry   int
				outcome string
			}{0: {3, reports.CellError}}},
		{name: "emptydir-memory-medium-from-spec", area: "emptyDir", breaks: "Takes a memory emptyDir's medium from the spec only.", reverts: "none",
			equivalent: "the medium it reads is the same on every kubelet of the plan"},
	}
	return specs
}

// killerChecks are failures a killed run records, picked by entry.
var killerChecks = []string{
	"old pod dirs gone: pods/6f1c… still on disk 60s after the kubelet started",
	"mounts gone: /var/lib/kubelet/pods/6f1c…/volumes/kubernetes.io~csi/pvc-1/mount still mounted",
	"no volume lost: web-0 lost /data while running (its sentinel file is gone)",
	"reconstruct counter: volume_manager_reconstruct_volume_operations_total did not move",
	"the kubelet log shows no \"Volume reconstructed\" for pvc-1",
}

// writeMutation writes a measurement under root as skewtest mutants does:
// each run's dir beside the measurement's (root/<run-id>), the batch's
// schedule (root/<batch-id>) and root/mutation-<id>. The control's runs
// pass; withControlRuns writes their run.json too.
func writeMutation(t *testing.T, root, id string, start time.Time, withControlRuns bool) *reports.Mutation {
	t.Helper()
	m := &reports.Mutation{ID: id, Started: start, Finished: start.Add(40 * time.Minute), Provider: "local", Base: "v1.37.2", Partner: "v1.36.3",
		Placements: []reports.MutationPlacement{
			{Name: "upgrade-target", Says: "the mutant is the upgrade target: base → partner → mutant, starting on what the older kubelet left", Plan: "module:v1.37.2 → module:v1.36.3 → kubelet under test (v1.37.2)"},
			{Name: "middle", Says: "the mutant is in the middle: partner → mutant → partner, where a clean kubelet starts on what the mutant left", Plan: "module:v1.36.3 → kubelet under test (v1.37.2) → module:v1.36.3"},
		},
		Entries: mutationEntries, Batch: id + "-batch", BatchTook: 30 * time.Minute, SumOfRuns: 150 * time.Minute, Builds: 8 * time.Minute}
	seq := 0
	run := func(kubelet string, p, e int, v reports.Verdict, failure string, write bool) string {
		seq++
		runID := fmt.Sprintf("%s-r%03d", id, seq)
		plan := []string{"v1.37.2", "v1.36.3", "v1.37.2"}
		if p == 1 {
			plan = []string{"v1.36.3", "v1.37.2", "v1.36.3"}
		}
		r := &reports.Run{ID: runID, Scenario: reports.ReconstructionScenarioPrefix + mutationEntries[e], Provider: "local", Plan: plan,
			Started: start.Add(time.Duration(seq) * time.Second), Finished: start.Add(time.Duration(seq)*time.Second + 150*time.Second), Failure: failure,
			Environment: []reports.KeyValue{{Key: reports.EnvVolumeKind, Value: "csi"}, {Key: "kubelet under test", Value: kubelet}},
			Verdict:     v,
			Hops: []reports.Hop{
				{Number: 1, From: plan[0], To: plan[1], Verdict: reports.Pass},
				{Number: 2, From: plan[1], To: plan[2], Verdict: v},
			}}
		if v == "" {
			r.Verdict = reports.Fail
		}
		if write {
			if _, err := reports.WriteAll(filepath.Join(root, runID), r); err != nil {
				t.Fatal(err)
			}
		}
		return runID
	}
	m.Control = reports.MutantRecord{Name: "control"}
	for p, pl := range m.Placements {
		pr := reports.MutantPlacementRecord{Placement: pl.Name}
		for e, entry := range mutationEntries {
			v := reports.Pass
			if entry == "reboot" {
				v = reports.PassWithExpectedDeviations
			}
			pr.Cells = append(pr.Cells, reports.MutantCell{Entry: entry, Outcome: reports.CellSame, Verdict: v, Report: run("control", p, e, v, "", withControlRuns)})
		}
		m.Control.Placements = append(m.Control.Placements, pr)
	}
	for _, s := range mutantSpecs() {
		rec := reports.MutantRecord{Name: s.name, Area: s.area, Breaks: s.breaks, Reverts: s.reverts, Equivalent: s.equivalent}
		if s.equivalent != "" {
			rec.Outcome = reports.MutantEquivalent
			m.Mutants = append(m.Mutants, rec)
			continue
		}
		for p, pl := range m.Placements {
			pr := reports.MutantPlacementRecord{Placement: pl.Name, Outcome: reports.MutantSurvived}
			other, hasOther := s.other[p]
			for e, entry := range mutationEntries {
				c := reports.MutantCell{Entry: entry, Outcome: reports.CellSame, Verdict: reports.Pass}
				switch {
				case e == s.kill[p]:
					c.Outcome, c.Verdict = reports.MutantKilled, reports.Fail
					c.Detail = "hop 2: " + killerChecks[e%len(killerChecks)]
					pr.Outcome, pr.KilledBy = reports.MutantKilled, entry+": "+c.Detail
				case s.kill[p] >= 0 && e >= s.before[p]:
					c.Outcome, c.Verdict, c.Detail = reports.CellNotRun, "", "killed in this placement by "+mutationEntries[s.kill[p]]
				case hasOther && e == other.entry:
					c.Outcome = other.outcome
					if other.outcome == reports.CellError {
						c.Verdict, c.Detail = "", "the cluster did not come up: etcd did not answer in 60s"
						pr.Outcome = reports.MutantUndecided
					} else {
						c.Verdict, c.Detail = reports.PassWithExpectedDeviations, "passed pass-with-expected-deviations where the control passed pass"
						pr.Outcome = reports.MutantMasked
					}
				}
				if c.Outcome != reports.CellNotRun {
					failure := ""
					if c.Outcome == reports.MutantKilled {
						failure = c.Detail
					}
					c.Report = run(s.name, p, e, c.Verdict, failure, true)
				}
				pr.Cells = append(pr.Cells, c)
			}
			rec.Placements = append(rec.Placements, pr)
		}
		rec.Outcome = reports.MutantKilled
		for _, o := range []string{reports.MutantUndecided, reports.MutantSurvived, reports.MutantMasked} {
			for _, pr := range rec.Placements {
				if pr.Outcome == o && rec.Outcome == reports.MutantKilled {
					rec.Outcome = o
				}
			}
		}
		m.Mutants = append(m.Mutants, rec)
	}
	m.Dir = filepath.Join(root, "mutation-"+id)
	if _, err := reports.WriteMutation(m.Dir, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// nightWithMutation is the night's runs with a measurement beside them
// (without the control's runs, so that the night's matrices stay as the
// other tests know them; the mutants' runs are written and must be left
// out), read and built as skewtest signoff does.
func nightWithMutation(t *testing.T) (*Page, string, *reports.Mutation) {
	t.Helper()
	dir := t.TempDir()
	writeRuns(t, dir, nightRuns(t))
	m := writeMutation(t, dir, "20261205-200000-mut1", mutationNight, false)
	srcs, muts, err := LoadAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := Build(srcs, dir)
	p.AddMutations(muts, dir)
	return p, dir, m
}
