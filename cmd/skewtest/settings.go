package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// settingsCmd lists the environment variables with their defaults.
func settingsCmd(_ context.Context, s streams, _ []string) error {
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	for _, st := range skewrun.AllSettings() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", st.Name, st.Default, st.Help)
	}
	return tw.Flush()
}
