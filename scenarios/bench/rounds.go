// Package bench measures skewtest's own runs: rounds of one plan with each
// phase's minimum, median and maximum, the matrix tour at two node counts,
// the catalogue one run after another and as one batch (Rounds), and what
// reconstruction costs on a busy node (Scale). The skewtest command's bench
// and bench-scale verbs parse flags and print; everything else is here.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/matrix"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// phases maps what the benchmark reports to where a run records it:
// run-level timings, or hop timings (one sample per hop).
var phases = []struct{ name, runPhase, hopPhase string }{
	{name: "bring-up", runPhase: "cluster up"},
	{name: "workload Running", runPhase: "workload Running"},
	{name: "kubelet stop", hopPhase: reports.PhaseKubeletStop},
	{name: "swap to Ready", hopPhase: reports.PhaseNodeReady},
	{name: "old mounts gone", hopPhase: reports.PhaseMountsGone},
	{name: "old pod dirs gone", hopPhase: reports.PhasePodDirsGone},
	{name: "teardown", runPhase: "teardown"},
	{name: "whole round", runPhase: wholeRunPhase},
}

// PhaseStats is one phase over all rounds, in seconds.
type PhaseStats struct {
	Phase   string    `json:"phase"`
	Samples []float64 `json:"samples"`
	Min     float64   `json:"min"`
	Median  float64   `json:"median"`
	Max     float64   `json:"max"`
}

// Result is what Rounds measured, written as JSON by WriteJSON.
type Result struct {
	Provider     string       `json:"provider"`
	Plan         string       `json:"plan"`
	Rounds       int          `json:"rounds"`
	PollInterval string       `json:"pollInterval"`
	Phases       []PhaseStats `json:"phases"`
	RunIDs       []string     `json:"runIds"`
	// Matrix are the matrix tour's timings, one entry per node count
	// (MATRIX_NODES or the default, then 1).
	Matrix []MatrixStats `json:"matrix,omitempty"`
	// Catalogue are the whole-run times of each catalogue fault that runs
	// on the provider, and their sum.
	Catalogue      []PhaseStats `json:"catalogue,omitempty"`
	CatalogueTotal float64      `json:"catalogueTotal,omitempty"`
	// TourRatio is the tour on the default nodes over the tour on one
	// node, medians of this bench (tourRatio).
	TourRatio float64 `json:"tourRatio,omitempty"`
	// CatalogueBatch is the same catalogue as one batch, in the same
	// bench, with its ratio to CatalogueTotal.
	CatalogueBatch *BatchStats `json:"catalogueBatch,omitempty"`
}

// MatrixStats is the matrix tour at one node count over its rounds: the
// tour itself (every trail, from the first hop's start to the last
// trail's end) and the whole run (bring-up to teardown).
type MatrixStats struct {
	Matrix   string     `json:"matrix"`
	Nodes    int        `json:"nodes"`
	Pairs    int        `json:"pairs"`
	Tour     PhaseStats `json:"tour"`
	WholeRun PhaseStats `json:"wholeRun"`
	RunIDs   []string   `json:"runIds"`
}

// BatchStats is the catalogue run as one batch (make test-skew's way):
// its wall time from the first bring-up to the last teardown, the sum of
// its runs' own times, and its ratio to the same runs one after another,
// measured in the same bench.
type BatchStats struct {
	BatchID string `json:"batchId"`
	Nodes   int    `json:"nodes"`
	Runs    int    `json:"runs"`
	// Clusters the batch brought up (a second when runs need another CSI
	// driver mode, or no node was left clean for them).
	Clusters  int     `json:"clusters"`
	Took      float64 `json:"took"`
	SumOfRuns float64 `json:"sumOfRuns"`
	// Sequential is the sum of the catalogue's runs one after another
	// (CatalogueTotal), and Ratio is Took / Sequential.
	Sequential float64 `json:"sequential"`
	Ratio      float64 `json:"ratio"`
}

// Options are what Rounds runs: Run's plan Rounds times, then the matrix
// tour MatrixRounds times per node count and each catalogue run
// CatalogueRounds times (0: none), with a line per round on Progress.
type Options struct {
	Run                                   skewrun.Options
	Rounds, MatrixRounds, CatalogueRounds int
	Progress                              io.Writer
}

// tourRatio is the median tour on the most nodes over the median tour on
// one node, both of this bench; false without both.
func (r Result) tourRatio() (float64, bool) {
	if len(r.Matrix) < 2 || r.Matrix[len(r.Matrix)-1].Nodes != 1 || r.Matrix[len(r.Matrix)-1].Tour.Median == 0 {
		return 0, false
	}
	return r.Matrix[0].Tour.Median / r.Matrix[len(r.Matrix)-1].Tour.Median, true
}

// wholeRunPhase is the run timing of a whole run, bring-up to teardown.
const wholeRunPhase = "whole run"

// Rounds runs o.Rounds rounds of one plan (the default, or o.Run.Plan) and
// reports each phase's minimum, median and maximum, then the matrix and
// catalogue rounds. Cleanup phases are measured from the kubelet's start;
// the harness notices a change within one poll interval of it happening.
// Bad counts are bad input before any run.
func Rounds(ctx context.Context, o Options) (*Result, error) {
	if o.Rounds < 1 {
		return nil, fmt.Errorf("%w: -rounds %d: want at least 1", exitcode.ErrInvalid, o.Rounds)
	}
	if o.MatrixRounds < 0 {
		return nil, fmt.Errorf("%w: -matrix-rounds %d: want 0 or more", exitcode.ErrInvalid, o.MatrixRounds)
	}
	if o.CatalogueRounds < 0 {
		return nil, fmt.Errorf("%w: -catalogue-rounds %d: want 0 or more", exitcode.ErrInvalid, o.CatalogueRounds)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	samples := map[string][]float64{}
	res := &Result{Provider: o.Run.Provider, Plan: o.Run.Plan, Rounds: o.Rounds, PollInterval: "250ms"}
	if o.Run.PollInterval > 0 {
		res.PollInterval = o.Run.PollInterval.String()
	}
	for i := 1; i <= o.Rounds; i++ {
		fmt.Fprintf(o.Progress, "=== bench round %d/%d\n", i, o.Rounds)
		r, err := skewrun.Run(ctx, o.Run)
		if err != nil {
			return nil, fmt.Errorf("bench round %d: %w", i, err)
		}
		res.RunIDs = append(res.RunIDs, r.Run.ID)
		res.Plan, res.Provider = strings.Join(r.Run.Plan, ","), r.Run.Provider
		collect(samples, r.Run)
	}
	for _, p := range phases {
		res.Phases = append(res.Phases, stats(p.name, samples[p.name]))
	}
	var err error
	if o.MatrixRounds > 0 {
		// The matrix settings are the tour's own: PLAN is the plan rounds'.
		mo := o.Run
		mo.Plan = ""
		if res.Matrix, err = benchMatrix(ctx, mo, o.MatrixRounds, o.Progress); err != nil {
			return nil, err
		}
		res.TourRatio, _ = res.tourRatio()
	}
	if o.CatalogueRounds > 0 {
		co := o.Run
		co.Plan = ""
		if res.Catalogue, res.CatalogueTotal, err = benchCatalogue(ctx, co, o.CatalogueRounds, o.Progress); err != nil {
			return nil, err
		}
		if res.CatalogueBatch, err = benchCatalogueBatch(ctx, co, res.CatalogueTotal, o.Progress); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// Print writes the result's tables: the phases, the matrix tour per node
// count, the catalogue's runs and the batch.
func (res *Result) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "skewtest bench: provider %s, plan %s, %d rounds, poll every %s (seconds)\n", res.Provider, res.Plan, res.Rounds, res.PollInterval)
	fmt.Fprintln(tw, "phase\tn\tmin\tmedian\tmax\t")
	for _, p := range res.Phases {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t\n", p.Phase, len(p.Samples), p.Min, p.Median, p.Max)
	}
	tw.Flush()
	if len(res.Matrix) > 0 {
		m := res.Matrix[0]
		fmt.Fprintf(w, "\nmatrix tour %s: %d pairs, %d rounds per node count (seconds)\n", m.Matrix, m.Pairs, len(m.RunIDs))
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "nodes\ttour min\tmedian\tmax\twhole run min\tmedian\tmax\t")
		for _, m := range res.Matrix {
			fmt.Fprintf(tw, "%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", m.Nodes, m.Tour.Min, m.Tour.Median, m.Tour.Max, m.WholeRun.Min, m.WholeRun.Median, m.WholeRun.Max)
		}
		tw.Flush()
		if r, ok := res.tourRatio(); ok {
			fmt.Fprintf(w, "tour on %d nodes / on 1 node, medians of this bench: %.2f\n", res.Matrix[0].Nodes, r)
		}
	}
	if len(res.Catalogue) > 0 {
		fmt.Fprintf(w, "\ncatalogue faults and shapes (one run for all shapes), whole run each (seconds); one round of all: %.1f\n", res.CatalogueTotal)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "fault\tn\tmin\tmedian\tmax\t")
		for _, p := range res.Catalogue {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t\n", p.Phase, len(p.Samples), p.Min, p.Median, p.Max)
		}
		tw.Flush()
	}
	if b := res.CatalogueBatch; b != nil {
		fmt.Fprintf(w, "\ncatalogue as one batch (batch %s): %d runs on %d nodes, %d clusters: %.1f s, against %.1f s one after another in this bench: ratio %.2f (its runs' own times add up to %.1f s)\n",
			b.BatchID, b.Runs, b.Nodes, b.Clusters, b.Took, b.Sequential, b.Ratio, b.SumOfRuns)
	}
}

// WriteJSON writes the result as indented JSON to path.
func (res *Result) WriteJSON(path string) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func collect(samples map[string][]float64, run *reports.Run) {
	for _, p := range phases {
		if p.runPhase != "" {
			for _, t := range run.Timings {
				if t.Phase == p.runPhase {
					samples[p.name] = append(samples[p.name], t.Duration.Seconds())
				}
			}
			continue
		}
		for _, h := range run.Hops {
			for _, t := range h.Timings {
				if t.Phase == p.hopPhase {
					samples[p.name] = append(samples[p.name], t.Duration.Seconds())
				}
			}
		}
	}
}

func stats(name string, xs []float64) PhaseStats {
	s := PhaseStats{Phase: name, Samples: append([]float64(nil), xs...)}
	if len(xs) == 0 {
		return s
	}
	sorted := append([]float64(nil), xs...)
	sort.Float64s(sorted)
	s.Min, s.Max = sorted[0], sorted[len(sorted)-1]
	if n := len(sorted); n%2 == 1 {
		s.Median = sorted[n/2]
	} else {
		s.Median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	return s
}

// benchMatrix runs the matrix tour rounds times at o's node count (or the
// default), then rounds times on one node, and returns the tour's and the
// whole run's timings for each.
func benchMatrix(ctx context.Context, o skewrun.Options, rounds int, progress io.Writer) ([]MatrixStats, error) {
	counts := []int{o.MatrixNodes}
	if counts[0] == 0 {
		counts[0] = matrix.DefaultNodes
	}
	if counts[0] != 1 {
		counts = append(counts, 1)
	}
	var out []MatrixStats
	for _, n := range counts {
		o.MatrixNodes = n
		var tour, whole []float64
		ms := MatrixStats{Nodes: n}
		for i := 1; i <= rounds; i++ {
			fmt.Fprintf(progress, "=== bench matrix tour on %d nodes, round %d/%d\n", n, i, rounds)
			r, err := skewrun.RunMatrix(ctx, o)
			if err != nil {
				return nil, fmt.Errorf("bench matrix tour on %d nodes, round %d: %w", n, i, err)
			}
			ms.RunIDs = append(ms.RunIDs, r.Run.ID)
			ms.Pairs = len(r.Run.Hops)
			for _, kv := range r.Run.Environment {
				if kv.Key == "Matrix" {
					ms.Matrix = kv.Value
				}
			}
			for _, t := range r.Run.Timings {
				switch t.Phase {
				case reports.PhaseTour:
					tour = append(tour, t.Duration.Seconds())
				case wholeRunPhase:
					whole = append(whole, t.Duration.Seconds())
				}
			}
		}
		ms.Tour, ms.WholeRun = stats(reports.PhaseTour, tour), stats(wholeRunPhase, whole)
		out = append(out, ms)
	}
	return out, nil
}

// benchCatalogue runs each catalogue run on o's provider
// (skewrun.Options.CatalogueJobs: the faults, and the shapes in one workload)
// rounds times, one after another, each with its own cluster, and returns
// each run's whole-run time and the sum of their medians: what the
// catalogue took before it ran as a batch.
func benchCatalogue(ctx context.Context, o skewrun.Options, rounds int, progress io.Writer) ([]PhaseStats, float64, error) {
	var out []PhaseStats
	total := 0.0
	for _, j := range o.CatalogueJobs() {
		var whole []float64
		for i := 1; i <= rounds; i++ {
			fmt.Fprintf(progress, "=== bench catalogue one after another: %s, round %d/%d\n", j.Name, i, rounds)
			r, err := skewrun.Run(ctx, j.Options)
			if err != nil {
				return nil, 0, fmt.Errorf("bench catalogue %s, round %d: %w", j.Name, i, err)
			}
			for _, t := range r.Run.Timings {
				if t.Phase == wholeRunPhase {
					whole = append(whole, t.Duration.Seconds())
				}
			}
		}
		st := stats(j.Options.Scenario, whole)
		total += st.Median
		out = append(out, st)
	}
	return out, total, nil
}

// benchCatalogueBatch runs the catalogue as one batch and compares it
// with sequential seconds of the same runs one after another.
func benchCatalogueBatch(ctx context.Context, o skewrun.Options, sequential float64, progress io.Writer) (*BatchStats, error) {
	jobs := o.CatalogueJobs()
	fmt.Fprintf(progress, "=== bench catalogue as one batch: %d runs\n", len(jobs))
	res, err := skewrun.RunBatch(ctx, o, jobs)
	if err != nil {
		return nil, fmt.Errorf("bench catalogue as one batch: %w", err)
	}
	b := res.Record
	st := &BatchStats{BatchID: b.ID, Nodes: b.Nodes, Runs: len(b.Jobs), Clusters: len(b.Clusters),
		Took: b.Took().Seconds(), SumOfRuns: b.SumOfRuns().Seconds(), Sequential: sequential}
	if sequential > 0 {
		st.Ratio = st.Took / sequential
	}
	return st, nil
}

// defaultProvider is p, or the default provider's name when p is empty.
func defaultProvider(p string) string {
	if p == "" {
		return clusters.Default().Name
	}
	return p
}
