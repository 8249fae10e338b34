package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/mutation"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// mutantsCmd measures the catalogue's strength against the project's
// mutants (scenarios/mutation), as make test-mutants runs it, with the
// settings of skewtest run and MUTANTS. The exit code is 0 when every
// mutant was killed in every placement, 1 when one survived or was
// masked, 3 when one could not be decided.
func mutantsCmd(ctx context.Context, s streams, _ []string) error {
	o, err := skewrun.OptionsFromEnv(nil)
	if err != nil {
		return err
	}
	if o.Scenario != "" || o.Plan != "" || len(o.Kubelets) > 0 {
		return fmt.Errorf("%w: skewtest mutants runs the whole catalogue on plans of its own; unset SCENARIO, PLAN and KUBELETS", exitcode.ErrInvalid)
	}
	o.Logger, o.Out = s.logger, s.out
	m, err := mutation.Run(ctx, mutation.Options{Run: o, Mutants: os.Getenv("MUTANTS")})
	if m != nil {
		killed, scored := m.Score()
		fmt.Fprintf(s.out, "mutation score: %d of %d mutants killed in every placement. %s\n", killed, scored, reports.MutationSummaryLine(m))
		for _, r := range m.Mutants {
			fmt.Fprintf(s.out, "%-50s %s\n", r.Name, reports.MutantOutcomeLabel(r.Outcome))
		}
		fmt.Fprintf(s.out, "report: %s\n", filepath.Join(m.Dir, reports.MutationMarkdownFileName))
	}
	return err
}
