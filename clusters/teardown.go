package clusters

import (
	"time"

	"sigs.k8s.io/skewtest/clusters/kops"
	"sigs.k8s.io/skewtest/clusters/timeouts"
)

// TeardownBound is the longest a run on provider takes to collect its
// logs and tear down after an interrupt, before timeouts.Scale: what a
// suite must wait after SIGINT or its own deadline before it exits, so
// that no cluster outlives it (a kops cluster left running costs money).
func TeardownBound(provider string) time.Duration {
	// Logs first, then Down.
	if provider == Kops {
		return timeouts.Logs + kops.DefaultTeardownTimeout
	}
	return timeouts.Logs + timeouts.Teardown
}
