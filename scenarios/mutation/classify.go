package mutation

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// Results are a batch's job results by job name (JobName).
type Results map[string]skewrun.JobResult

// Classify compares each mutant's runs with the control's same runs:
//   - a run that failed on a kubelet check (exit 1) where the control's
//     passed kills the mutant in that placement;
//   - a run that passed with other deviations than the control's (more,
//     fewer or other) masks it;
//   - the same verdict and deviations: the mutant survived that run;
//   - a run not judged (an infrastructure failure, an interrupt, the
//     control failing the same run) leaves it undecided, unless another
//     run killed it.
//
// A mutant is killed when it is killed in every placement; otherwise its
// outcome is its weakest placement's: undecided, then survived, then
// masked. The registration race's deviations are left out of the
// comparison: the race comes and goes on any kubelet.
func Classify(kubelets []Kubelet, entries []Entry, res Results, artifactsRoot string) (control reports.MutantRecord, mutants []reports.MutantRecord) {
	control = reports.MutantRecord{Name: ControlName}
	for _, p := range Placements {
		pr := reports.MutantPlacementRecord{Placement: p.Name}
		for _, e := range entries {
			r := res[JobName(ControlName, p.Name, e.Name)]
			c := reports.MutantCell{Entry: e.Name, Report: reportDir(r, artifactsRoot)}
			switch {
			case r.Result == nil:
				c.Outcome, c.Detail = reports.CellError, firstNonEmpty(r.Skipped, errText(r.Err), "not run")
			case exitcode.Of(r.Err) == exitcode.Pass:
				c.Outcome, c.Verdict = reports.CellSame, r.Result.Run.Verdict
			default:
				c.Outcome, c.Verdict, c.Detail = reports.CellControlFailed, r.Result.Run.Verdict, r.Result.Run.Failure
			}
			pr.Cells = append(pr.Cells, c)
		}
		control.Placements = append(control.Placements, pr)
	}
	for _, k := range kubelets {
		if k.Mutant == nil {
			continue
		}
		rec := record(*k.Mutant)
		for _, p := range Placements {
			pr := reports.MutantPlacementRecord{Placement: p.Name}
			for _, e := range entries {
				c := cell(res[JobName(ControlName, p.Name, e.Name)], res[JobName(k.Name, p.Name, e.Name)], artifactsRoot)
				c.Entry = e.Name
				if c.Outcome == reports.MutantKilled && pr.KilledBy == "" {
					pr.KilledBy = e.Name + ": " + c.Detail
				}
				pr.Cells = append(pr.Cells, c)
			}
			pr.Outcome = placementOutcome(pr.Cells)
			rec.Placements = append(rec.Placements, pr)
		}
		rec.Outcome = mutantOutcome(rec.Placements)
		mutants = append(mutants, rec)
	}
	return control, mutants
}

// record is a mutant's row before its runs.
func record(m Mutant) reports.MutantRecord {
	return reports.MutantRecord{Name: m.Name, Breaks: m.Breaks, Reverts: m.Reverts, Area: m.Area, Way: m.Way, Equivalent: m.Equivalent}
}

// cell judges one run of a mutant against the control's same run.
func cell(ctrl, mut skewrun.JobResult, artifactsRoot string) reports.MutantCell {
	c := reports.MutantCell{Report: reportDir(mut, artifactsRoot)}
	if mut.Result != nil {
		c.Verdict = mut.Result.Run.Verdict
	}
	switch {
	case mut.Skipped != "":
		c.Outcome, c.Detail = reports.CellNotRun, mut.Skipped
		return c
	case mut.Result == nil || exitcode.Of(mut.Err) != exitcode.Pass && exitcode.Of(mut.Err) != exitcode.Kubelet:
		c.Outcome, c.Detail = reports.CellError, firstNonEmpty(errText(mut.Err), "not run")
		return c
	case ctrl.Result == nil || exitcode.Of(ctrl.Err) != exitcode.Pass:
		c.Outcome, c.Detail = reports.CellControlFailed, "the control's same run did not pass: "+firstNonEmpty(runFailure(ctrl), errText(ctrl.Err), "not run")
		return c
	case exitcode.Of(mut.Err) == exitcode.Kubelet:
		c.Outcome, c.Detail = reports.MutantKilled, firstNonEmpty(mut.Result.Run.Failure, errText(mut.Err))
		return c
	}
	if d := diffDeviations(signature(ctrl.Result.Run), signature(mut.Result.Run)); d != "" || passVerdict(ctrl.Result.Run) != passVerdict(mut.Result.Run) {
		c.Outcome = reports.MutantMasked
		c.Detail = fmt.Sprintf("passed %s where the control passed %s", mut.Result.Run.Verdict, ctrl.Result.Run.Verdict)
		if d != "" {
			c.Detail += "; " + d
		}
		return c
	}
	c.Outcome = reports.CellSame
	return c
}

// passVerdict is a passing run's verdict without the metrics registration
// race: a run whose only deviations are the race's passed as a plain pass
// would have.
func passVerdict(run *reports.Run) reports.Verdict {
	if run.Verdict == reports.PassWithExpectedDeviations && len(signature(run)) == 0 {
		return reports.Pass
	}
	return run.Verdict
}

// signature is what a passing run's verdict rests on beyond its pass:
// each deviation it recorded, by hop, check, what was expected and
// whether a known bug showed, without the values that differ from run to
// run (UIDs, times). The metrics registration race is left out.
func signature(run *reports.Run) []string {
	var out []string
	for _, st := range run.Steps {
		for _, d := range st.Deviations {
			if strings.Contains(d.Reason, kubeletmetrics.MetricsRegistrationRace) {
				continue
			}
			seen := "seen"
			if !d.Reproduced() {
				seen = "not seen"
			}
			out = append(out, fmt.Sprintf("hop %d %s (expected %s; %s)", st.Hop, d.Check, d.Expected, seen))
		}
	}
	slices.Sort(out)
	return out
}

// diffDeviations says which deviations one run has and the other lacks.
func diffDeviations(ctrl, mut []string) string {
	var only, lacks []string
	for _, d := range mut {
		if i := slices.Index(ctrl, d); i >= 0 {
			ctrl = slices.Delete(slices.Clone(ctrl), i, i+1)
			continue
		}
		only = append(only, d)
	}
	lacks = ctrl
	var parts []string
	if len(only) > 0 {
		parts = append(parts, "deviations the control lacks: "+strings.Join(only, "; "))
	}
	if len(lacks) > 0 {
		parts = append(parts, "the control's deviations it lacks: "+strings.Join(lacks, "; "))
	}
	return strings.Join(parts, "; ")
}

// placementOutcome folds a placement's cells: killed by any kill; else
// undecided if a cell was not judged; else masked if any was masked;
// else survived.
func placementOutcome(cells []reports.MutantCell) string {
	has := func(o string) bool {
		return slices.ContainsFunc(cells, func(c reports.MutantCell) bool { return c.Outcome == o })
	}
	switch {
	case has(reports.MutantKilled):
		return reports.MutantKilled
	case has(reports.CellError), has(reports.CellControlFailed), has(reports.CellNotRun):
		return reports.MutantUndecided
	case has(reports.MutantMasked):
		return reports.MutantMasked
	}
	return reports.MutantSurvived
}

// mutantOutcome is killed when every placement killed it, else the
// weakest placement's outcome.
func mutantOutcome(ps []reports.MutantPlacementRecord) string {
	for _, o := range []string{reports.MutantUndecided, reports.MutantSurvived, reports.MutantMasked} {
		if slices.ContainsFunc(ps, func(p reports.MutantPlacementRecord) bool { return p.Outcome == o }) {
			return o
		}
	}
	return reports.MutantKilled
}

func reportDir(r skewrun.JobResult, root string) string {
	if r.Result == nil || r.Result.ArtifactsDir == "" {
		return ""
	}
	if rel, err := filepath.Rel(root, r.Result.ArtifactsDir); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return r.Result.ArtifactsDir
}

func runFailure(r skewrun.JobResult) string {
	if r.Result == nil {
		return ""
	}
	return r.Result.Run.Failure
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
