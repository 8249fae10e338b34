package signoff

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"sigs.k8s.io/skewtest/reports"
)

// How strong the verdicts are: the mutation measurements (make
// test-mutants) found beside the runs. Each ran the catalogue on kubelets
// broken on purpose beside an unmutated control; a verdict is as strong
// as the broken kubelets it fails. The mutants' own runs belong to the
// measurement, not to the sign-off: they are left out of the runs, the
// matrices and the verdict, and shown in the measurement's grids.

// mutationResult is one mutation measurement the page shows.
type mutationResult struct {
	M *reports.Mutation
	// Link is its own page (mutation.md), BatchLink its batch's schedule
	// (batch.md), relative to the output dir; "" without one.
	Link, BatchLink string
	// MutantRuns is how many runs of mutants it holds (left out of the
	// runs).
	MutantRuns int
	Grids      []mutationGrid
	// link is a cell's report link, as the grids' cells have it.
	link func(report string) string
}

// mutationGrid is one placement's mutant × entry grid, its cells linked
// to their runs' reports relative to the output dir.
type mutationGrid struct {
	reports.MutationPlacement
	Rows []reports.MutationGridRow
}

// ID is a stable fragment id for the measurement.
func (r mutationResult) ID() string { return "mutation-" + slug(r.M.ID) }

// Anchor is the fragment id of a mutant's row in the measurement's table.
func (r mutationResult) Anchor(mutant string) string { return r.ID() + "-" + slug(mutant) }

// Title names the measurement: the kubelet mutated, its partner, the
// provider and when.
func (r mutationResult) Title() string {
	return fmt.Sprintf("Kubelet %s mutants (partner %s) on %s, %s", r.M.Base, r.M.Partner, orUnknown(r.M.Provider), reports.FormatTime(r.M.Started))
}

// Equivalent are the mutants not scored, each with its reason.
func (r mutationResult) Equivalent() []reports.MutantRecord {
	var out []reports.MutantRecord
	for _, mt := range r.M.Mutants {
		if mt.Outcome == reports.MutantEquivalent {
			out = append(out, mt)
		}
	}
	return out
}

// mutationScore is where the mutants stand over every measurement on the
// page: each mutant's newest decided outcome (killed, masked, survived)
// per provider and base version, else its newest (undecided). It is
// what the page's first line says beside the runs' verdict.
type mutationScore struct {
	Killed, Scored int
	// Through are the scored mutants not killed, in the order the
	// measurements list them.
	Through []mutantThrough
}

// mutantThrough is a mutant the checks did not kill.
type mutantThrough struct {
	Mutant reports.MutantRecord
	// Measurement is the ID of the measurement its outcome is from;
	// Anchor its row there on the HTML page.
	Measurement, Anchor string
}

// Text is "16 of 18 mutants killed in every placement (1 survived, 1
// masked)".
func (s *mutationScore) Text() string {
	noun := "mutants"
	if s.Scored == 1 {
		noun = "mutant"
	}
	t := fmt.Sprintf("%d of %d %s killed in every placement", s.Killed, s.Scored, noun)
	var parts []string
	for _, o := range []string{reports.MutantSurvived, reports.MutantMasked, reports.MutantUndecided} {
		n := 0
		for _, th := range s.Through {
			if th.Mutant.Outcome == o {
				n++
			}
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, o))
		}
	}
	if len(parts) > 0 {
		t += " (" + strings.Join(parts, ", ") + ")"
	}
	return t
}

// LoadAll reads the runs and the mutation measurements under dir. The
// runs of the measurements' mutants are left out of the runs; the
// control's stay, as runs of unmutated kubelets. A dir whose only
// run.json files are mutants' (or that has none, beside a measurement)
// gives no runs and no error. A mutation.json that cannot be read is an
// error naming it, as a run.json is.
func LoadAll(dir string) ([]Source, []*reports.Mutation, error) {
	srcs, err := load(dir)
	if err != nil && !errors.Is(err, ErrNoRuns) {
		return nil, nil, err
	}
	muts, merr := reports.FindMutations(dir)
	if merr != nil {
		return nil, nil, merr
	}
	if err != nil && len(muts) == 0 {
		return nil, nil, err
	}
	return withoutMutantRuns(srcs, muts), muts, nil
}

// withoutMutantRuns leaves out the runs whose report directory a
// measurement's mutant cell names (a run's directory is named by its ID).
func withoutMutantRuns(srcs []Source, muts []*reports.Mutation) []Source {
	mutant := map[string]bool{}
	for _, m := range muts {
		for _, dir := range mutantRunDirs(m) {
			mutant[filepath.Base(dir)] = true
		}
	}
	var out []Source
	for _, s := range srcs {
		if !mutant[s.Run.ID] {
			out = append(out, s)
		}
	}
	return out
}

// mutantRunDirs are the directories of a measurement's mutants' runs.
func mutantRunDirs(m *reports.Mutation) []string {
	var out []string
	for _, mt := range m.Mutants {
		for _, p := range mt.Placements {
			for _, c := range p.Cells {
				if c.Report != "" {
					out = append(out, m.RunDir(c.Report))
				}
			}
		}
	}
	return out
}

// AddMutations puts the mutation measurements found under the runs' dir
// on the page, oldest first, with links relative to outDir, and sets the
// page's MutantScore.
func (p *Page) AddMutations(muts []*reports.Mutation, outDir string) {
	for _, m := range muts {
		r := mutationResult{M: m, MutantRuns: len(mutantRunDirs(m)), link: func(report string) string {
			return relLink(outDir, filepath.Join(m.RunDir(report), reports.MarkdownFileName))
		}}
		if m.Dir != "" {
			r.Link = relLink(outDir, filepath.Join(m.Dir, reports.MutationMarkdownFileName))
		}
		if m.Batch != "" {
			r.BatchLink = relLink(outDir, filepath.Join(m.RunDir(m.Batch), reports.BatchMarkdownFileName))
		}
		for _, pl := range m.Placements {
			r.Grids = append(r.Grids, mutationGrid{MutationPlacement: pl, Rows: reports.MutationGridRows(m, pl.Name, r.link)})
		}
		p.Mutations = append(p.Mutations, r)
	}
	p.MutantScore = mutantScore(p.Mutations)
}

// mutantScore folds the measurements (oldest first) into each mutant's
// standing: a newer decided outcome replaces an older one, an undecided
// one (a run that could not be judged) replaces only another undecided
// one. Equivalent mutants are not scored. Nil without measurements.
func mutantScore(results []mutationResult) *mutationScore {
	if len(results) == 0 {
		return nil
	}
	type key struct{ provider, base, name string }
	var order []key
	standing := map[key]mutantThrough{}
	for _, r := range results {
		for _, mt := range r.M.Mutants {
			k := key{r.M.Provider, r.M.Base, mt.Name}
			old, seen := standing[k]
			if !seen {
				order = append(order, k)
			} else if mt.Outcome == reports.MutantUndecided && old.Mutant.Outcome != reports.MutantUndecided {
				continue
			}
			standing[k] = mutantThrough{Mutant: mt, Measurement: r.M.ID, Anchor: r.Anchor(mt.Name)}
		}
	}
	s := &mutationScore{}
	for _, k := range order {
		st := standing[k]
		switch st.Mutant.Outcome {
		case reports.MutantEquivalent:
			continue
		case reports.MutantKilled:
			s.Killed++
		default:
			s.Through = append(s.Through, st)
		}
		s.Scored++
	}
	return s
}

// writeMutationMarkdown is the page's section of the mutation
// measurements, each as its own mutation.md shows it, with links
// relative to the page.
func writeMutationMarkdown(b *strings.Builder, p *Page) {
	if len(p.Mutations) == 0 {
		return
	}
	text, code := reports.MarkdownText, reports.MarkdownCode
	b.WriteString("## " + mutationHeading + "\n\n")
	b.WriteString("Mutation testing (`make test-mutants`): the catalogue run on kubelets broken on purpose, each beside an unmutated control built the same way. " +
		"A mutant is killed in a placement when one of its runs fails on a check the control's same run passed, and counts as killed when every placement killed it; " +
		"masked when it passed with deviations other than the control's; survived when its runs looked like the control's. " +
		"Equivalent mutants change nothing a node keeps and are not scored. " +
		"The mutants' runs are only here, not in the matrices or the verdict; the control's are ordinary runs and count with the others.\n\n")
	for _, r := range p.Mutations {
		fmt.Fprintf(b, "### %s\n\n", text(r.Title()))
		fmt.Fprintf(b, "**%s.** %s %s of mutants.", text(r.M.ScoreText()), text(reports.MutationSummaryLine(r.M)), plural(r.MutantRuns, "run"))
		if r.Link != "" {
			fmt.Fprintf(b, " [Its page](%s).", r.Link)
		}
		if r.BatchLink != "" {
			fmt.Fprintf(b, " [The batch's schedule](%s).", r.BatchLink)
		}
		b.WriteString("\n\n")
		if r.M.Failure != "" {
			fmt.Fprintf(b, "**%s**\n\n", text(r.M.Failure))
		}
		if eq := r.Equivalent(); len(eq) > 0 {
			b.WriteString("Not scored, equivalent (they change nothing a node keeps):\n\n")
			for _, mt := range eq {
				fmt.Fprintf(b, "- %s: %s\n", code(mt.Name), text(mt.Equivalent))
			}
			b.WriteString("\n")
		}
		b.WriteString(reports.MarkdownTable(reports.MutantTable(r.M)))
		for _, g := range r.Grids {
			fmt.Fprintf(b, "#### %s\n\n%s: %s.\n\n", text(g.Name), text(g.Says), text(g.Plan))
			b.WriteString(reports.MarkdownTable(reports.MutationGrid(r.M, g.Name, r.link)))
		}
		b.WriteString(reports.MutationLegend + "\n\n")
	}
}

// writeMutantsThroughMarkdown is the warning at the top of the page when
// the checks did not kill a mutant.
func writeMutantsThroughMarkdown(b *strings.Builder, p *Page) {
	s := p.MutantScore
	if s == nil || len(s.Through) == 0 {
		return
	}
	code, text := reports.MarkdownCode, reports.MarkdownText
	b.WriteString("> [!WARNING]\n")
	fmt.Fprintf(b, "> The checks did not kill %s: %s. The sign-off rests on checks that let these regressions through (an undecided one could not be judged: measure again); the runs' verdict is unchanged ([%s](#%s)).\n",
		plural(len(s.Through), "mutant"), text(s.Text()), mutationHeading, slug(mutationHeading))
	for _, th := range s.Through {
		fmt.Fprintf(b, "> - %s %s (measurement %s): %s\n", code(th.Mutant.Name), reports.MutantOutcomeLabel(th.Mutant.Outcome), code(th.Measurement), text(th.Mutant.Breaks))
	}
	b.WriteString("\n")
}

// mutationHeading is the title of the page's mutation section.
const mutationHeading = "How strong the verdicts are"
