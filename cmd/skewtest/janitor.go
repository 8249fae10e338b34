package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/skewtest/clusters/kops"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// janitorAWS lists the AWS resources of kops runs whose expiry tag has
// passed, in AWS_REGION, and deletes them with -dry-run=false (make
// janitor-aws DRY_RUN=false). A region or credentials missing is bad
// input (exit 2); AWS failing is infrastructure (exit 3).
func janitorAWSCmd(ctx context.Context, s streams, args []string) error {
	fs := flag.NewFlagSet("janitor-aws", flag.ContinueOnError)
	dryRun := fs.Bool("dry-run", true, "list only; false deletes")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", exitcode.ErrInvalid, err)
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = os.Getenv("AWS_DEFAULT_REGION")
	}
	c, err := kops.JanitorClients(ctx, region)
	if err != nil {
		return fmt.Errorf("%w: %v", exitcode.ErrInvalid, err)
	}
	if _, err := kops.Janitor(ctx, c, kops.JanitorConfig{Region: region, DryRun: *dryRun, Out: s.out}); err != nil {
		return infrastructure(err)
	}
	return nil
}
