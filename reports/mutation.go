package reports

import (
	"fmt"
	"path/filepath"
	"time"
)

// Outcomes of a mutant in one placement, and of one of its runs.
const (
	// MutantKilled: a run failed on a check the control's same run
	// passed. Only killed counts.
	MutantKilled = "killed"
	// MutantMasked: every run passed, but with a deviation, or an
	// expected observation, the control's same run lacks (or without one
	// it has).
	MutantMasked = "masked"
	// MutantSurvived: the same verdicts and deviations as the control.
	MutantSurvived = "survived"
	// MutantUndecided: no run killed it, and some could not be judged (an
	// infrastructure failure, the control failing the same run, an
	// interrupt): run it again.
	MutantUndecided = "undecided"
	// MutantEquivalent: the mutant changes nothing a node keeps (its
	// reason is on record); it is not run and not scored.
	MutantEquivalent = "equivalent"
)

// Outcomes of one cell of the grid, beyond MutantKilled and
// MutantMasked.
const (
	// CellSame: the run's verdict and deviations are the control's.
	CellSame = "same"
	// CellNotRun: the mutant was killed in this placement before the run
	// started.
	CellNotRun = "not run"
	// CellControlFailed: the control's same run did not pass, so this one
	// proves nothing.
	CellControlFailed = "control failed"
	// CellError: the run failed on its infrastructure or was interrupted.
	CellError = "error"
)

// Mutation is one measurement of the catalogue's strength against the
// project's mutants (mutation.json).
type Mutation struct {
	ID       string    `json:"id"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Provider string    `json:"provider"`
	// Base is the kubelet version the mutants change; Partner the version
	// the plans hop to.
	Base    string `json:"base"`
	Partner string `json:"partner"`
	// Placements are where a mutant's kubelet runs in a plan.
	Placements []MutationPlacement `json:"placements"`
	// Entries are the runs of each kubelet in each placement, in order.
	Entries []string `json:"entries"`
	// Control is the unmutated kubelet, built as the mutants are; its
	// cells hold the verdicts the mutants' are compared with.
	Control MutantRecord   `json:"control"`
	Mutants []MutantRecord `json:"mutants"`
	// Batch is the batch's directory (its schedule, relative to the
	// artifacts root); BatchTook its wall time, and SumOfRuns what its
	// runs took one after another.
	Batch     string        `json:"batch,omitempty"`
	BatchTook time.Duration `json:"batchTook"`
	SumOfRuns time.Duration `json:"sumOfRuns"`
	// Builds is the wall time of building the control and the mutants.
	Builds time.Duration `json:"builds"`
	// Failure is what kept the measurement from finishing, if anything.
	Failure string `json:"failure,omitempty"`
	// Dir is where it was written (not recorded in it).
	Dir string `json:"-"`
}

// MutationPlacement is one placement of a Mutation.
type MutationPlacement struct {
	Name string `json:"name"`
	Says string `json:"says"`
	// Plan is the placement's plan, with the kubelet under test marked.
	Plan string `json:"plan"`
}

// MutantRecord is one kubelet under test: a mutant, or the control.
type MutantRecord struct {
	Name       string `json:"name"`
	Breaks     string `json:"breaks,omitempty"`
	Reverts    string `json:"reverts,omitempty"`
	Area       string `json:"area,omitempty"`
	Way        string `json:"way,omitempty"`
	Equivalent string `json:"equivalent,omitempty"`
	// Source, SHA256, PatchSHA256 and PatchFiles name the kubelet built.
	Source      string   `json:"source,omitempty"`
	SHA256      string   `json:"sha256,omitempty"`
	PatchSHA256 string   `json:"patchSha256,omitempty"`
	PatchFiles  []string `json:"patchFiles,omitempty"`
	// Build is how long its build took (warm: only what the patch
	// touched and its importers).
	Build time.Duration `json:"build"`
	// Outcome is MutantKilled when it was killed in every placement, else
	// the weakest of its placements' (survived, masked, undecided).
	Outcome    string                  `json:"outcome"`
	Placements []MutantPlacementRecord `json:"placements"`
}

// MutantPlacementRecord is a kubelet's runs in one placement.
type MutantPlacementRecord struct {
	Placement string `json:"placement"`
	Outcome   string `json:"outcome"`
	// KilledBy names the first entry that killed it, and the check.
	KilledBy string       `json:"killedBy,omitempty"`
	Cells    []MutantCell `json:"cells"`
}

// MutantCell is one run of the grid.
type MutantCell struct {
	Entry   string  `json:"entry"`
	Outcome string  `json:"outcome"`
	Verdict Verdict `json:"verdict,omitempty"`
	// Detail is the failure that killed it, the deviations that differ
	// from the control's, or why it was not judged.
	Detail string `json:"detail,omitempty"`
	// Report is the run's directory, relative to the artifacts root.
	Report string `json:"report,omitempty"`
}

// Score counts the mutants killed in every placement, of those scored
// (all but the equivalent ones).
func (m *Mutation) Score() (killed, scored int) {
	for _, r := range m.Mutants {
		if r.Outcome == MutantEquivalent {
			continue
		}
		scored++
		if r.Outcome == MutantKilled {
			killed++
		}
	}
	return killed, scored
}

// ScoreText is the score in words: "16 of 18 mutants killed in every
// placement".
func (m *Mutation) ScoreText() string {
	killed, scored := m.Score()
	noun := "mutants"
	if scored == 1 {
		noun = "mutant"
	}
	return fmt.Sprintf("%d of %d %s killed in every placement", killed, scored, noun)
}

// RunDir is the directory of a cell's run (its Report, relative to the
// artifacts root the measurement's own Dir is in).
func (m *Mutation) RunDir(report string) string {
	if report == "" || filepath.IsAbs(report) {
		return report
	}
	return filepath.Join(filepath.Dir(m.Dir), report)
}
