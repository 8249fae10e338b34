package main

import (
	"context"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
)

// scenariosCmd writes the reconstruction catalogue: every shape and
// fault, expected outcome per kubelet version.
func scenariosCmd(_ context.Context, s streams, _ []string) error {
	return catalogue.Write(s.out, reconstruction.Catalogue(), func(e catalogue.Entry) []string { return clusters.RunningOn(e.Needs) })
}
