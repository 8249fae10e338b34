package main

import (
	"context"
	"fmt"

	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// catalogueCmd runs every catalogue entry that runs on PROVIDER as one
// batch (skewrun.Options.CatalogueJobs, skewrun.RunBatch), with the settings of
// skewtest run; each entry writes its own report, and the batch its
// schedule. The exit code is the worst of the runs'.
func catalogueCmd(ctx context.Context, s streams, _ []string) error {
	o, err := skewrun.OptionsFromEnv(nil)
	if err != nil {
		return err
	}
	if o.Scenario != "" {
		return fmt.Errorf("%w: SCENARIO=%s is set, but skewtest catalogue runs every entry; unset it, or run that one with skewtest run", exitcode.ErrInvalid, o.Scenario)
	}
	o.Logger, o.Out = s.logger, s.out
	res, err := skewrun.RunBatch(ctx, o, o.CatalogueJobs())
	if res != nil {
		for _, j := range res.Jobs {
			fmt.Fprintf(s.out, "%-40s exit %d\t%s\n", j.Job.Name, exitcode.Of(j.Err), reportOf(j))
		}
	}
	return err
}

// reportOf is where a batch job's report is, or why it has none.
func reportOf(j skewrun.JobResult) string {
	if j.Result == nil {
		return "not run"
	}
	return j.Result.ArtifactsDir + "/report.md"
}
