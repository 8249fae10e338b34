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

// plantedShapes are the catalogue shapes the scenario plants into its
// workload (the sign-off plans run csi-filesystem and local-volume).
func plantedShapes() []catalogue.Entry {
	var out []catalogue.Entry
	for _, e := range reconstruction.Catalogue() {
		if _, ok := reconstruction.Shapes()[e.Name]; ok {
			out = append(out, e)
		}
	}
	return out
}

// selectedShapes are the shapes the label filter selects that run on
// provider, and those it selects that run elsewhere, saying where.
func selectedShapes(entries []catalogue.Entry, provider string) (run, elsewhere []string) {
	for _, e := range entries {
		switch {
		case !Label(catalogue.CatalogueLabel, e.Label()).MatchesLabelFilter(GinkgoLabelFilter()):
		case !e.RunsOn(providerOf(provider).NodeCapabilities):
			elsewhere = append(elsewhere, fmt.Sprintf("%s (runs on %s)", e.Name, strings.Join(clusters.RunningOn(e.Needs), ", ")))
		default:
			run = append(run, e.Name)
		}
	}
	return run, elsewhere
}

// The catalogue's shapes go into one spec, to keep the catalogue cheap:
// it carries every shape's label, and runs the shapes the label filter
// selects (all of them under label-filter=catalogue; only the block shape
// under label-filter=shape-block) in one workload per CSI driver mode
// they need (reconstruction.ShapeGroups): the block shape on a cluster of the
// driver's ebs mode, the others beside the batch's other runs. Each shape
// is still checked and judged on steps of its own after every hop.

// shapesText is the container text of the shapes' spec.
const shapesText = "reconstruction catalogue shapes"

var _ = Describe(shapesText, Label(catalogue.CatalogueLabel), func() {
	provider := providerName()
	entries := plantedShapes()
	var labels []string
	var names []string
	for _, e := range entries {
		labels = append(labels, e.Label())
		names = append(names, e.Name)
	}
	name := fmt.Sprintf("shapes %s, force-deleted while the kubelet is down", strings.Join(names, ", "))
	text := shapesText + " " + name
	// Two runs: the selected shapes without raw block volumes, and those
	// with (ebs mode).
	var keys [2]string
	for g := range keys {
		keys[g] = inBatch("shapes, "+shapeGroupNames[g], text, Label(append([]string{catalogue.CatalogueLabel}, labels...)...), func() *skewrun.Options {
			group := shapeGroup(entries, provider, g)
			if len(group) == 0 {
				return nil
			}
			o := envOptions(orDefault(os.Getenv("PLAN"), plan.Default), strings.Join(group, ","))
			o.Replicas = catalogue.Replicas
			return o
		})
	}
	It(name, Label(labels...), func(ctx SpecContext) {
		run, elsewhere := selectedShapes(entries, provider)
		if len(elsewhere) > 0 {
			AddReportEntry("shapes not run on PROVIDER="+provider, strings.Join(elsewhere, "; "))
		}
		if len(run) == 0 {
			Skip(fmt.Sprintf("catalogue shapes: none selected runs on PROVIDER=%s (%s); not run, not passed", provider, strings.Join(elsewhere, "; ")))
		}
		for g, key := range keys {
			group := shapeGroup(entries, provider, g)
			if len(group) == 0 {
				continue
			}
			By(fmt.Sprintf("shapes %s (%s)", strings.Join(group, ", "), shapeGroupNames[g]))
			res := checkBatchRun(batchResult(ctx, key))
			r := res.Run
			Expect(r.Verdict).To(BeElementOf(reports.Pass, reports.PassWithExpectedDeviations), r.Failure)
			Expect(r.CatalogueEntry()).To(Equal(strings.Join(group, ",")))
			Expect(r.Hops).To(HaveLen(len(r.Plan)-1), "every hop of the plan ran")
			for _, name := range group {
				judged := 0
				for _, s := range r.Steps {
					if strings.Contains(s.Name, "catalogue shape "+name+" on kubelet") {
						judged++
						Expect(s.Verdict).NotTo(Equal(reports.Fail), s.Error)
					}
				}
				Expect(judged).To(Equal(len(r.Hops)), "shape %s judged after each hop against the catalogue's expectation", name)
			}
		}
	})
})

// shapeGroupNames name the shapes' two runs (reconstruction.ShapeGroups).
var shapeGroupNames = [2]string{"tmpfs mode", "raw block, ebs mode"}

// shapeGroup is the g-th of the selected shapes' runs on provider
// (reconstruction.ShapeGroups): 0 without raw block volumes, 1 with.
func shapeGroup(entries []catalogue.Entry, provider string, g int) []string {
	run, _ := selectedShapes(entries, provider)
	plain, block := reconstruction.ShapeGroups(run)
	return [2][]string{plain, block}[g]
}
