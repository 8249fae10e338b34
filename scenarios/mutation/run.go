package mutation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/timeouts"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// Options are one measurement's.
type Options struct {
	// Run holds the settings every run of the batch shares (provider,
	// artifacts, cache, BATCH_NODES, CLEANUP_TIMEOUT, ...).
	Run skewrun.Options
	// Mutants names the mutants to run (MUTANTS, comma-separated); empty
	// for the whole set.
	Mutants string
}

// CleanupTimeout is each hop's cleanup bound in a measurement, unless
// CLEANUP_TIMEOUT says otherwise: a mutant that leaks fails a run only
// when that bound ends, and the runs' default (3 minutes) held the
// batch's longest runs. The control's slowest cleanup, 12 nodes at once
// on 2 cores, took 16 s; this leaves it more than five times that.
const CleanupTimeout = 90 * time.Second

// runOptions are the batch's settings: o, with CleanupTimeout unless
// CLEANUP_TIMEOUT set one.
func runOptions(o skewrun.Options) skewrun.Options {
	if o.CleanupTimeout == 0 {
		o.CleanupTimeout = timeouts.Scale(CleanupTimeout, o.TimeoutFactor)
	}
	return o
}

// ErrWeak marks a measurement in which some mutant was not killed in
// every placement: the catalogue let a broken kubelet through (exit 1,
// as a failed check).
var ErrWeak = errors.New("the catalogue let a mutant through")

// Run measures the catalogue's strength: it builds the control and the
// chosen mutants of the base kubelet (patch sources of the module build),
// runs every entry for each of them in each placement as one batch, on
// one cluster's nodes at once, classifies each mutant against the
// control, and writes mutation.json and mutation.md into the artifacts
// root. The error is nil only when every mutant was killed in every
// placement; ErrWeak (exit 1) when one survived or was masked; an
// infrastructure error (exit 3) when some could not be decided.
func Run(ctx context.Context, o Options) (*reports.Mutation, error) {
	start := time.Now()
	set, err := Set()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", exitcode.ErrHarness, err)
	}
	chosen, err := Select(set, o.Mutants)
	if err != nil {
		return nil, fmt.Errorf("%w: MUTANTS=%s: %w", exitcode.ErrInvalid, o.Mutants, err)
	}
	base, partner, err := Versions()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", exitcode.ErrHarness, err)
	}
	logger := o.Run.Logger
	o.Run = runOptions(o.Run)
	// The patches go to a directory of this run's alone, removed at the
	// end: the binaries are cached by the patches' content, not by where
	// they were.
	dir, err := os.MkdirTemp("", "skewtest-mutants-")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", exitcode.ErrInfrastructure, err)
	}
	defer os.RemoveAll(dir)
	kubelets := []Kubelet{{Name: ControlName}}
	for i := range chosen {
		if chosen[i].Equivalent != "" {
			continue
		}
		kubelets = append(kubelets, Kubelet{Name: chosen[i].Name, Mutant: &chosen[i]})
	}
	for i := range kubelets {
		var patch []byte
		if kubelets[i].Mutant != nil {
			patch = kubelets[i].Mutant.Patch()
		}
		file := filepath.Join(dir, kubelets[i].Name+".diff")
		if err := os.WriteFile(file, patch, 0o600); err != nil {
			return nil, fmt.Errorf("%w: %w", exitcode.ErrInfrastructure, err)
		}
		kubelets[i].Spec = "patch:" + file + "@" + base
	}
	m := &reports.Mutation{ID: reports.NewRunID(start), Started: start, Provider: o.Run.Provider, Base: base, Partner: partner}
	for _, p := range Placements {
		pl, specs := p.Plan(base, partner, "UNDER-TEST")
		m.Placements = append(m.Placements, reports.MutationPlacement{Name: p.Name, Says: p.Says,
			Plan: strings.Replace(strings.Join(specs, " → "), "UNDER-TEST", "kubelet under test ("+strings.Split(pl, ",")[p.at]+")", 1)})
	}
	entries := Entries(o.Run)
	for _, e := range entries {
		m.Entries = append(m.Entries, e.Name)
	}
	jobs := Jobs(base, partner, kubelets, entries)
	// Every run's settings are checked before the first build, and the
	// builds use the checked settings (the cache's default among them).
	checked, err := o.Run.CheckBatch(jobs)
	if err != nil {
		return nil, err
	}
	built, err := build(ctx, checked[0], kubelets)
	m.Builds = time.Since(start)
	if err != nil {
		return nil, err
	}
	logger.Info("mutation batch starts", "mutants", len(kubelets)-1, "placements", len(Placements), "entries", len(entries),
		"runs", len(kubelets)*len(Placements)*len(entries), "built in", m.Builds.Round(time.Second))
	batch, batchErr := skewrun.RunBatch(ctx, o.Run, jobs)
	root := o.Run.ArtifactsDir
	res := Results{}
	if batch != nil {
		root = filepath.Dir(batch.Dir)
		m.Batch, _ = filepath.Rel(root, batch.Dir)
		m.BatchTook, m.SumOfRuns = batch.Record.Took(), batch.Record.SumOfRuns()
		for _, j := range batch.Jobs {
			res[j.Job.Name] = j
		}
	}
	m.Control, m.Mutants = Classify(kubelets, entries, res, root)
	m.Control.Source, m.Control.SHA256 = built[ControlName].Source, built[ControlName].SHA256
	for i := range m.Mutants {
		b := built[m.Mutants[i].Name]
		m.Mutants[i].Source, m.Mutants[i].SHA256, m.Mutants[i].Build = b.Source, b.SHA256, b.took
	}
	for _, mt := range chosen {
		if mt.Equivalent != "" {
			r := record(mt)
			r.Outcome = reports.MutantEquivalent
			m.Mutants = append(m.Mutants, r)
		}
	}
	m.Finished = time.Now()
	if batch == nil && batchErr != nil {
		m.Failure = batchErr.Error()
	}
	m.Dir = filepath.Join(root, "mutation-"+m.ID)
	files, werr := reports.WriteMutation(m.Dir, m)
	if werr != nil {
		return m, fmt.Errorf("%w: %w", exitcode.ErrInfrastructure, werr)
	}
	killed, scored := m.Score()
	logger.Info("mutation score", "killed", killed, "of", scored, "report", files[0], "took", m.Finished.Sub(start).Round(time.Second))
	return m, verdict(ctx, m, batch, batchErr)
}

// builtKubelet is one kubelet under test, built.
type builtKubelet struct {
	binaries.Binary
	took time.Duration
}

// build resolves every kubelet under test, one after another, saying how
// far it is: a patch that does not apply or build is bad input (exit 2),
// as the run's own resolve would find.
func build(ctx context.Context, o skewrun.Options, kubelets []Kubelet) (map[string]builtKubelet, error) {
	resolver := o.Resolver()
	out := map[string]builtKubelet{}
	for i, k := range kubelets {
		start := time.Now()
		o.Logger.Info(fmt.Sprintf("building kubelet %d of %d", i+1, len(kubelets)), "name", k.Name)
		b, err := resolver.Resolve(ctx, "kubelet", k.Spec)
		if err != nil {
			class := exitcode.ErrInfrastructure
			if errors.Is(err, binaries.ErrBadSource) {
				class = exitcode.ErrInvalid
			}
			return nil, fmt.Errorf("%w: mutant %s: %w", class, k.Name, err)
		}
		out[k.Name] = builtKubelet{Binary: b, took: time.Since(start)}
	}
	return out, nil
}

// verdict is the measurement's error: nil when every mutant was killed in
// every placement and nothing interrupted the batch. An interrupted
// measurement is no score, even when the mutants it ran were all
// killed: its error carries the interruption, which wins the exit code
// (exitcode.Of: 130 for SIGINT).
func verdict(ctx context.Context, m *reports.Mutation, batch *skewrun.BatchResult, batchErr error) error {
	err := score(m, batch, batchErr)
	if ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if err == nil {
		return fmt.Errorf("%w: the measurement was interrupted before its end (mutation.md has what it decided)", cause)
	}
	return fmt.Errorf("%w: %w", cause, err)
}

// score is the error of a measurement that ran to its end.
func score(m *reports.Mutation, batch *skewrun.BatchResult, batchErr error) error {
	var weak, undecided []string
	for _, r := range m.Mutants {
		switch r.Outcome {
		case reports.MutantSurvived, reports.MutantMasked:
			weak = append(weak, r.Name+" ("+r.Outcome+")")
		case reports.MutantUndecided:
			undecided = append(undecided, r.Name)
		}
	}
	switch {
	case len(weak) > 0:
		return fmt.Errorf("%w: %w: %s", exitcode.ErrKubelet, ErrWeak, strings.Join(weak, ", "))
	case len(undecided) > 0:
		return fmt.Errorf("%w: mutants not decided (see mutation.md): %s: %w", exitcode.ErrInfrastructure, strings.Join(undecided, ", "), errors.Join(batchErr, errors.New("run them again")))
	case batch == nil && batchErr != nil:
		return batchErr
	}
	return nil
}
