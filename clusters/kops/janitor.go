package kops

import (
	"context"
	"fmt"
	"io"
	"time"
)

// JanitorConfig is one `make janitor-aws` pass.
type JanitorConfig struct {
	// Region is the region swept (AWS_REGION).
	Region string
	// DryRun lists without deleting; DRY_RUN=false deletes.
	DryRun bool
	// Now is the time expiries are compared with; zero means now.
	Now time.Time
	Out io.Writer
}

// expired selects skewtest's resources (those with a run ID) whose expiry
// tag is before now; a run-ID-tagged resource with a missing or unreadable
// expiry counts as expired, since nothing else will ever delete it.
func expired(now time.Time) match {
	return func(t map[string]string) bool {
		if t[tagRunID] == "" {
			return false
		}
		exp, err := time.Parse(time.RFC3339, t[tagExpiry])
		return err != nil || exp.Before(now)
	}
}

// Janitor lists every resource skewtest tagged whose expiry has passed
// (instances, volumes, security groups, load balancers, state store
// buckets) and, unless DryRun, deletes them in dependency order. It
// prints one line per resource and returns what it found. Only resources
// carrying skewtest's run-ID tag are ever considered, so nothing else in
// the account is touched.
func Janitor(ctx context.Context, c *awsClients, cfg JanitorConfig) ([]resource, error) {
	now := cfg.Now
	if now.IsZero() {
		now = time.Now()
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	found, err := list(ctx, c, expired(now))
	if err != nil {
		return found, fmt.Errorf("janitor-aws: %w", err)
	}
	mode := "dry run: nothing deleted (DRY_RUN=false deletes)"
	if !cfg.DryRun {
		mode = "deleting"
	}
	fmt.Fprintf(out, "janitor-aws: %d expired skewtest resources in %s (tag %s, expiry before %s); %s\n", len(found), cfg.Region, tagRunID, now.UTC().Format(time.RFC3339), mode)
	if !cfg.DryRun && len(found) > 0 {
		err = remove(ctx, c, found)
	}
	for _, r := range found {
		verb := "would delete"
		if !cfg.DryRun {
			verb = "deleted"
			if !r.Deleted {
				verb = "NOT deleted"
			}
		}
		fmt.Fprintf(out, "  %s %s (run %s, owner %s)\n", verb, r, r.Tags[tagRunID], r.Tags[tagOwner])
	}
	if err != nil {
		return found, fmt.Errorf("janitor-aws: %w", err)
	}
	return found, nil
}

// JanitorClients makes the AWS clients for the janitor from the SDK's
// default chain.
func JanitorClients(ctx context.Context, region string) (*awsClients, error) {
	if region == "" {
		return nil, fmt.Errorf("janitor-aws: no AWS region: set AWS_REGION")
	}
	cfg, err := loadAWS(ctx, region, nil)
	if err != nil {
		return nil, fmt.Errorf("janitor-aws: %w: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", err)
	}
	return newClients(cfg, ""), nil
}
