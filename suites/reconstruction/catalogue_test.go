package reconstruction

import (
	"fmt"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// baselineEntries are the catalogue's shapes that the sign-off plans above
// run (labelsFor gives them the catalogue labels).
var baselineEntries = map[string]string{"csi": "csi-filesystem", "local": "local-volume"}

// The reconstruction catalogue (go run ./cmd/skewtest scenarios):
// -ginkgo.label-filter=catalogue runs every entry; each has its own label
// (fault-reboot, ...). An entry skewtest does not run yet, or not on this
// provider, is a skipped spec that says why, never a pass.
// catalogueText is the container text of the catalogue's specs.
const catalogueText = "reconstruction catalogue"

var _ = Describe(catalogueText, Label(catalogue.CatalogueLabel), func() {
	provider := providerName()
	for _, e := range reconstruction.Catalogue() {
		if e.Name == baselineEntries["csi"] || e.Name == baselineEntries["local"] {
			continue
		}
		if _, planted := reconstruction.Shapes()[e.Name]; planted {
			continue // shapes_test.go runs them in one workload
		}
		name := fmt.Sprintf("%s %s: %s", e.Kind, e.Name, e.Plants)
		key := inBatch(string(e.Kind)+" "+e.Name, catalogueText+" "+name, Label(catalogue.CatalogueLabel, e.Label()), func() *skewrun.Options {
			if !e.RunsOn(providerOf(provider).NodeCapabilities) {
				return nil
			}
			o := envOptions(orDefault(os.Getenv("PLAN"), plan.Default), e.Name)
			o.Replicas = catalogue.Replicas
			return o
		})
		It(name, Label(e.Label()), func(ctx SpecContext) {
			switch {
			case e.Status != catalogue.Runs:
				why := string(e.Status)
				if e.Waits != "" {
					why += ": " + e.Waits
				}
				Skip(fmt.Sprintf("catalogue %s %s: %s; not run, not passed", e.Kind, e.Name, why))
			case !e.RunsOn(providerOf(provider).NodeCapabilities):
				Skip(fmt.Sprintf("catalogue %s %s runs on %s, not PROVIDER=%s", e.Kind, e.Name, strings.Join(clusters.RunningOn(e.Needs), ", "), provider))
			}
			res := checkBatchRun(batchResult(ctx, key))
			r := res.Run
			Expect(r.Verdict).To(BeElementOf(reports.Pass, reports.PassWithExpectedDeviations), r.Failure)
			Expect(r.CatalogueEntry()).To(Equal(e.Name))
			Expect(r.Hops).To(HaveLen(len(r.Plan)-1), "every hop of the plan ran")
			judged := 0
			for _, s := range r.Steps {
				if strings.Contains(s.Name, "catalogue "+string(e.Kind)+" "+e.Name) {
					judged++
					Expect(s.Verdict).NotTo(Equal(reports.Fail), s.Error)
				}
			}
			Expect(judged).To(Equal(len(r.Hops)), "each hop judged against the catalogue's expectation")
		})
	}
})
