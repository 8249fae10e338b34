package signoff

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/reports"
)

// The fixtures start from the reports package's golden runs (a passing CSI
// run, a local-volume run with documented deviations, a failed run) and
// recast them as one night of skew runs on several providers and volume
// kinds, plus a matrix tour.

var night = time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// golden reads one of the reports package's golden runs.
func golden(t *testing.T, name string) *reports.Run {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", name+".json.golden"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := reports.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// recast makes run a skew run of the given provider and volume kind, as
// skewrun names them.
func recast(r *reports.Run, id, provider, kind string, startMin int) *reports.Run {
	shift := night.Add(time.Duration(startMin) * time.Minute).Sub(r.Started)
	r.ID, r.Provider, r.Scenario = id, provider, reports.ReconstructionScenarioPrefix+kind
	r.Started, r.Finished = r.Started.Add(shift), r.Finished.Add(shift)
	r.ArtifactsDir = ""
	env := []reports.KeyValue{{Key: "API server", Value: "v1.37.2"}}
	for _, kv := range r.Environment {
		if kv.Key != reports.EnvVolumeKind && kv.Key != "API server" {
			env = append(env, kv)
		}
	}
	r.Environment = append(env, reports.KeyValue{Key: reports.EnvVolumeKind, Value: kind})
	return r
}

// setTiming sets a hop's phase.
func setTiming(h *reports.Hop, phase string, s float64) {
	for i := range h.Timings {
		if h.Timings[i].Phase == phase {
			h.Timings[i].Duration = secs(s)
			return
		}
	}
	h.Timings = append(h.Timings, reports.Timing{Phase: phase, Duration: secs(s)})
}

// tourHop is a matrix tour hop on node with the scenario's four phases.
func tourHop(n int, node, from, to, dir string, stop, ready, mounts, dirs float64, v reports.Verdict) reports.Hop {
	return reports.Hop{Number: n, Node: node, From: from, To: to, Direction: dir, Verdict: v, Timings: []reports.Timing{
		{Phase: reports.PhaseKubeletStop, Duration: secs(stop)},
		{Phase: reports.PhaseNodeReady, Duration: secs(ready)},
		{Phase: reports.PhaseMountsGone, Duration: secs(mounts)},
		{Phase: reports.PhasePodDirsGone, Duration: secs(dirs)},
	}}
}

// nightRuns is one night: three local CSI runs of the sign-off plan (one
// failing its first hop), a local-volume run with expected deviations, a
// kind CSI run, and a local matrix tour on two nodes, one of whose hops
// fails and leaves a planned hop unreached.
//
// The local · csi matrix then has: v1.37.2→v1.36.3 fail ×3, v1.36.3→v1.37.2
// pass ×2 plus one skipped, v1.37.2→v1.34.4 and v1.34.4→v1.37.2 pass,
// v1.36.3→v1.34.4 fail, v1.34.4→v1.36.3 unreached.
func nightRuns(t *testing.T) []*reports.Run {
	r1 := recast(golden(t, "pass_csi"), "20261201-010000-aaaa", "local", "csi", 0)
	r2 := recast(golden(t, "pass_csi"), "20261201-010500-bbbb", "local", "csi", 5)
	setTiming(&r2.Hops[0], reports.PhasePodDirsGone, 4.5)
	setTiming(&r2.Hops[1], reports.PhasePodDirsGone, 11.0)
	r3 := recast(golden(t, "fail_csi_block"), "20261201-011000-cccc", "local", "csi", 10)
	r4 := recast(golden(t, "expected_deviations_local"), "20261201-011500-dddd", "local", "local", 15)
	r5 := recast(golden(t, "pass_csi"), "20261201-012000-eeee", "kind", "csi", 20)

	tour := recast(golden(t, "pass_csi"), "20261201-013000-ffff", "local", "csi", 30)
	tour.Node, tour.Plan = "", nil
	tour.Steps = tour.Steps[:2] // bring-up steps; the tour's hop steps are not needed here
	tour.Trails = []reports.Trail{
		{Node: "skewtest-a", Plan: []string{"v1.37.2", "v1.34.4", "v1.37.2"}, Verdict: reports.Pass},
		{Node: "skewtest-b", Plan: []string{"v1.36.3", "v1.34.4", "v1.36.3"}, Verdict: reports.Fail},
	}
	// A tour numbers the hops of all its trails in one sequence.
	tour.Hops = []reports.Hop{
		tourHop(1, "skewtest-a", "v1.37.2", "v1.34.4", "downgrade", 0.05, 0.8, 1.9, 4.9, ""),
		tourHop(2, "skewtest-a", "v1.34.4", "v1.37.2", "upgrade", 0.04, 0.7, 1.7, 4.6, ""),
		tourHop(3, "skewtest-b", "v1.36.3", "v1.34.4", "downgrade", 0.05, 0.9, 2.1, 5.2, reports.Fail),
	}
	tour.Unreached = []reports.UnreachedHop{{Node: "skewtest-b", From: "v1.34.4", To: "v1.36.3", Reason: "node skewtest-b stayed NotReady after hop 3 failed"}}
	tour.Verdict, tour.Failure = "", ""
	tour.ComputeVerdict()
	return []*reports.Run{r1, r2, r3, r4, r5, tour}
}

// baselineRuns is an earlier night: the sign-off plan on local CSI, whose
// v1.37.2→v1.36.3 hop cleaned up in 2.0 s (now a median of 4.2 s: a
// slowdown) and v1.36.3→v1.37.2 in 11.5 s (now 11.67 s: not one).
func baselineRuns(t *testing.T) []*reports.Run {
	b := recast(golden(t, "pass_csi"), "20261130-010000-base", "local", "csi", -24*60)
	setTiming(&b.Hops[0], reports.PhasePodDirsGone, 2.0)
	setTiming(&b.Hops[1], reports.PhasePodDirsGone, 11.5)
	return []*reports.Run{b}
}

// writeRuns writes each run's artifacts as a run does, into
// dir/<run-id>/, and points dir/latest at the last one.
func writeRuns(t *testing.T, dir string, runs []*reports.Run) {
	t.Helper()
	for _, r := range runs {
		if _, err := reports.WriteAll(filepath.Join(dir, r.ID), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(runs[len(runs)-1].ID, filepath.Join(dir, "latest")); err != nil {
		t.Fatal(err)
	}
}

// compareWithBaseline writes the baseline night into a fresh dir and
// compares p (built for outDir) with it. The page names the baseline
// name, or its dir when name is "".
func compareWithBaseline(t *testing.T, p *Page, outDir, name string) {
	t.Helper()
	dir := t.TempDir()
	writeRuns(t, dir, baselineRuns(t))
	srcs, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if name == "" {
		name = dir
	}
	p.Compare(Build(srcs, outDir), name)
}
