package mutation

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

func TestPlacements(t *testing.T) {
	base, partner, err := Versions()
	if err != nil {
		t.Fatal(err)
	}
	if base != "v1.37.2" || partner != "v1.36.3" {
		t.Errorf("Versions() = %s, %s; want the default plan's newest and its partner", base, partner)
	}
	for _, tc := range []struct {
		p         Placement
		plan      string
		specs     string
		underTest int
	}{
		{Placements[0], "v1.37.2,v1.36.3,v1.37.2", "module:v1.37.2,module:v1.36.3,patch:m.diff@v1.37.2", 2},
		{Placements[1], "v1.36.3,v1.37.2,v1.36.3", "module:v1.36.3,patch:m.diff@v1.37.2,module:v1.36.3", 1},
	} {
		pl, specs := tc.p.Plan(base, partner, "patch:m.diff@v1.37.2")
		if pl != tc.plan || strings.Join(specs, ",") != tc.specs {
			t.Errorf("%s: plan %s kubelets %v; want %s and %s", tc.p.Name, pl, specs, tc.plan, tc.specs)
		}
	}
}

// Every entry runs for the control and each mutant in each placement; a
// mutant's runs in one placement are one group, its killers ranked first;
// the control's runs have no group.
func TestJobs(t *testing.T) {
	m := Mutant{Name: "m", Killers: []string{"subpath"}}
	entries := []Entry{{Name: "csi-filesystem", Covers: []string{"csi-filesystem"}}, {Name: "reboot", Covers: []string{"reboot"}},
		{Name: "block", Covers: []string{"block"}}, {Name: "shapes", Covers: []string{"subpath", "emptydir-memory"}}}
	jobs := Jobs("v1.37.2", "v1.36.3", []Kubelet{{Name: ControlName, Spec: "patch:c@v1.37.2"}, {Name: "m", Spec: "patch:m@v1.37.2", Mutant: &m}}, entries)
	if len(jobs) != 2*len(Placements)*len(entries) {
		t.Fatalf("%d jobs, want %d", len(jobs), 2*len(Placements)*len(entries))
	}
	for _, j := range jobs {
		control := strings.HasPrefix(j.Name, "control ")
		if control != (j.Group == "") {
			t.Errorf("job %q has group %q; want none for the control's, one per placement for a mutant's", j.Name, j.Group)
		}
		wantRank := 1
		if control || strings.HasSuffix(j.Name, " shapes") {
			wantRank = 0
		}
		if j.Rank != wantRank {
			t.Errorf("job %q rank %d, want %d", j.Name, j.Rank, wantRank)
		}
		if !strings.Contains(strings.Join(j.Options.Kubelets, ","), "patch:") {
			t.Errorf("job %q runs no kubelet under test: %v", j.Name, j.Options.Kubelets)
		}
	}
}

// run is a finished job: its verdict, its error's class and deviations.
func run(v reports.Verdict, err error, devs ...reports.Deviation) skewrun.JobResult {
	r := &reports.Run{Verdict: v, ArtifactsDir: "/a/run"}
	if err != nil {
		r.Failure = err.Error()
	}
	r.Steps = []reports.Step{{Hop: 1, Deviations: devs}}
	return skewrun.JobResult{Result: &skewrun.Result{Run: r, ArtifactsDir: "/a/run"}, Err: err}
}

var (
	knownBug = reports.Deviation{Check: "catalogue fault vol-data-deleted", Expected: "known bug", Observed: "pods/x left", Reason: "known bug #101791"}
	race     = reports.Deviation{Check: "metric " + kubeletmetrics.ReconstructVolumeOperations, Expected: ">= 1", Observed: "0", Reason: "log shows 1; " + kubeletmetrics.MetricsRegistrationRace}
	metric   = reports.Deviation{Check: "metric reconstruct_volume_operations_errors_total", Expected: "== 0", Observed: "1", Reason: "planted"}
	kill     = fmt.Errorf("old pods not cleaned up: %w", exitcode.ErrKubelet)
	infra    = fmt.Errorf("node gone: %w", exitcode.ErrInfrastructure)
)

// Each cell against the control's same run; each placement and mutant
// folded from them.
func TestClassify(t *testing.T) {
	entries := []Entry{{Name: "e1"}, {Name: "e2"}}
	mut := func(name string) Kubelet { return Kubelet{Name: name, Mutant: &Mutant{Name: name}} }
	kubelets := []Kubelet{{Name: ControlName}, mut("killed"), mut("masked"), mut("survived"), mut("racy"), mut("undecided"), mut("halfkilled")}
	res := Results{}
	set := func(k, e string, up, mid skewrun.JobResult) {
		res[JobName(k, "upgrade-target", e)] = up
		res[JobName(k, "middle", e)] = mid
	}
	pass := run(reports.Pass, nil)
	dev := run(reports.PassWithExpectedDeviations, nil, knownBug)
	set(ControlName, "e1", pass, pass)
	set(ControlName, "e2", dev, dev)
	// Killed in both: by e1 in one, e2 then e1 in the other.
	set("killed", "e1", run(reports.Fail, kill), run(reports.Fail, kill))
	set("killed", "e2", skewrun.JobResult{Skipped: "not run: killed"}, run(reports.Fail, kill))
	// Masked: e2 passes without the known bug's deviation, or with one
	// more.
	set("masked", "e1", run(reports.PassWithExpectedDeviations, nil, metric), pass)
	set("masked", "e2", run(reports.Pass, nil), run(reports.Pass, nil))
	set("survived", "e1", pass, pass)
	set("survived", "e2", dev, dev)
	// The race is noise: not a masking deviation.
	set("racy", "e1", run(reports.PassWithExpectedDeviations, nil, race), pass)
	set("racy", "e2", run(reports.PassWithExpectedDeviations, nil, knownBug, race), dev)
	set("undecided", "e1", run(reports.Fail, infra), pass)
	set("undecided", "e2", dev, dev)
	set("halfkilled", "e1", run(reports.Fail, kill), pass)
	set("halfkilled", "e2", dev, dev)

	_, mutants := Classify(kubelets, entries, res, "/a")
	want := map[string]string{
		"killed": reports.MutantKilled, "masked": reports.MutantMasked, "survived": reports.MutantSurvived,
		"racy": reports.MutantSurvived, "undecided": reports.MutantUndecided, "halfkilled": reports.MutantSurvived,
	}
	for _, m := range mutants {
		if m.Outcome != want[m.Name] {
			t.Errorf("mutant %s: %s, want %s (%+v)", m.Name, m.Outcome, want[m.Name], m.Placements)
		}
	}
	k := mutants[0]
	if k.Placements[0].KilledBy == "" || !strings.HasPrefix(k.Placements[1].KilledBy, "e1: ") || k.Placements[0].Cells[1].Outcome != reports.CellNotRun {
		t.Errorf("killed: %+v", k.Placements)
	}
	if d := mutants[1].Placements[1].Cells[1].Detail; !strings.Contains(d, "the control's deviations it lacks") {
		t.Errorf("masked by a missing deviation: detail %q", d)
	}
	if d := mutants[1].Placements[0].Cells[0].Detail; !strings.Contains(d, "deviations the control lacks") {
		t.Errorf("masked by an extra deviation: detail %q", d)
	}
	if got := mutants[5].Placements[0].Outcome; got != reports.MutantKilled {
		t.Errorf("halfkilled's upgrade-target placement: %s, want killed", got)
	}
	if c := mutants[3].Placements[0].Cells[0]; mutants[3].Name != "racy" || c.Outcome != reports.CellSame {
		t.Errorf("racy's upgrade-target e1, the race where the control passed: %+v, want the same as the control", c)
	}
	if r := mutants[0].Placements[0].Cells[0].Report; r != "run" {
		t.Errorf("report dir %q, want relative to the artifacts root", r)
	}

	// A kill where the control's same run failed too proves nothing: the
	// control's cell says so, and the mutant is undecided.
	res = Results{}
	set(ControlName, "e1", pass, pass)
	set(ControlName, "e2", dev, run(reports.Fail, kill))
	set("both", "e1", pass, pass)
	set("both", "e2", dev, run(reports.Fail, kill))
	control, mutants := Classify([]Kubelet{{Name: ControlName}, mut("both")}, entries, res, "/a")
	if got := control.Placements[1].Cells[1].Outcome; got != reports.CellControlFailed {
		t.Errorf("the control's failed run: %q", got)
	}
	if got := mutants[0].Outcome; got != reports.MutantUndecided {
		t.Errorf("a mutant failing only where the control fails: %s, want undecided", got)
	}
}

func TestVerdict(t *testing.T) {
	ctx := context.Background()
	m := func(outcomes ...string) *reports.Mutation {
		r := &reports.Mutation{}
		for i, o := range outcomes {
			r.Mutants = append(r.Mutants, reports.MutantRecord{Name: fmt.Sprint("m", i), Outcome: o})
		}
		return r
	}
	if err := verdict(ctx, m(reports.MutantKilled, reports.MutantEquivalent), nil, nil); err != nil {
		t.Errorf("all killed: %v", err)
	}
	if err := verdict(ctx, m(reports.MutantKilled, reports.MutantMasked, reports.MutantUndecided), nil, nil); exitcode.Of(err) != exitcode.Kubelet || !strings.Contains(err.Error(), "m1 (masked)") {
		t.Errorf("masked: %v (exit %d), want exit 1 naming it", err, exitcode.Of(err))
	}
	if err := verdict(ctx, m(reports.MutantKilled, reports.MutantUndecided), nil, nil); exitcode.Of(err) != exitcode.Infrastructure {
		t.Errorf("undecided: %v, want exit 3", err)
	}
	// Interrupted, the measurement is no score: the interrupt's exit code
	// wins, whatever the mutants it ran showed.
	stopped, stop := context.WithCancelCause(ctx)
	stop(&exitcode.Interrupted{Signal: syscall.SIGINT})
	if err := verdict(stopped, m(reports.MutantKilled), nil, nil); exitcode.Of(err) != 130 {
		t.Errorf("all killed, then interrupted: %v (exit %d), want exit 130", err, exitcode.Of(err))
	}
	if err := verdict(stopped, m(reports.MutantMasked), nil, nil); exitcode.Of(err) != 130 || !strings.Contains(err.Error(), "m0 (masked)") {
		t.Errorf("masked, then interrupted: %v (exit %d), want exit 130 naming it", err, exitcode.Of(err))
	}
}

// The runs of each kubelet in each placement: the sign-off's baseline,
// then every catalogue job of the provider, the shapes as one.
func TestEntries(t *testing.T) {
	entries := Entries(skewrun.Options{Provider: "local"})
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name] = true
		if len(e.Covers) == 0 {
			t.Errorf("entry %s covers no catalogue entry", e.Name)
		}
	}
	if entries[0].Name != "csi-filesystem" || entries[0].Job.Options.Scenario != "" {
		t.Errorf("first entry %+v, want the baseline force-delete", entries[0])
	}
	for _, want := range []string{"reboot", "pvc-terminating", "vol-data-deleted", "shapes", "block"} {
		if !names[want] {
			t.Errorf("no entry %s among %v", want, names)
		}
	}
	if len(entries) != len(skewrun.Options{Provider: "local"}.CatalogueJobs())+1 {
		t.Errorf("%d entries, want the catalogue's jobs and the baseline", len(entries))
	}
}
