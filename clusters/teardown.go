package clusters

import (
	"time"

	"sigs.k8s.io/skewtest/clusters/timeouts"
)

// TeardownBound is the longest a run on provider takes to collect its
// logs and tear down after an interrupt, before timeouts.Scale: what a
// suite must wait after SIGINT or its own deadline before it exits, so
// that no cluster outlives it (a kops cluster left running costs money).
// An unknown provider gets the bound of a cluster on this host.
func TeardownBound(provider string) time.Duration {
	// Logs first, then Down.
	if d, err := Lookup(provider); err == nil && d.TeardownTimeout > 0 {
		return timeouts.Logs + d.TeardownTimeout
	}
	return timeouts.Logs + timeouts.Teardown
}
