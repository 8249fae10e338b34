package main

import (
	"context"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

// scenariosCmd writes the reconstruction catalogue: every shape and
// fault, expected outcome per kubelet version.
func scenariosCmd(_ context.Context, s streams, _ []string) error {
	return catalogue.Write(s.out, catalogue.All(), func(e catalogue.Entry) []string { return clusters.RunningOn(e.Needs) })
}
