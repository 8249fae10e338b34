package reconstruction

import (
	"log/slog"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/reports"
	skewmatrix "sigs.k8s.io/skewtest/scenarios/matrix"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// The matrix tour (`make test-matrix`, -ginkgo.label-filter=matrix): every
// directed pair of MATRIX's versions once, on one cluster, its trails on
// MATRIX_NODES nodes at once. `make test-skew` leaves it out.
var _ = Describe("matrix tour", Label("matrix"), func() {
	needsBinaries(Label("matrix"), func() *skewrun.Options {
		// Every version of the tour, as a plan: one kubelet of each, and
		// the control plane at the newest.
		return envOptions(orDefault(os.Getenv("MATRIX"), skewmatrix.Default), "")
	})
	It("cleans up force-deleted pods' volumes on every (from, to) pair of MATRIX", func(ctx SpecContext) {
		o, err := skewrun.OptionsFromEnv(nil)
		Expect(err).NotTo(HaveOccurred())
		o.Logger = slog.New(slog.NewTextHandler(GinkgoWriter, nil))
		o.Out = GinkgoWriter
		vs, trails, err := o.CheckMatrix()
		Expect(err).NotTo(HaveOccurred(), "MATRIX, MATRIX_NODES")
		before := takeFootprint(ctx, o)

		res, err := skewrun.RunMatrix(ctx, o)

		addRunReport(res)
		Expect(err).NotTo(HaveOccurred(), "see the report in %s", artifactsOf(res))
		r := res.Run
		Expect(r.Verdict).To(BeElementOf(reports.Pass, reports.PassWithExpectedDeviations), r.Failure)
		Expect(r.Unreached).To(BeEmpty(), "every pair was reached")
		Expect(r.Hops).To(HaveLen(vs.Pairs()), "one hop per ordered pair")
		visited := map[string]int{}
		nodes := map[string]bool{}
		for _, h := range r.Hops {
			visited[h.From+" → "+h.To]++
			nodes[h.Node] = true
			Expect(phases(h)).To(ContainElements("old mounts gone", "old pod dirs gone"), "hop %d recorded its time-to-cleanup", h.Number)
		}
		for _, from := range vs {
			for _, to := range vs {
				if !from.EqualTo(to) {
					Expect(visited).To(HaveKeyWithValue("v"+from.String()+" → v"+to.String(), 1), "pair visited exactly once")
				}
			}
		}
		Expect(r.Trails).To(HaveLen(trails), "one trail per node")
		Expect(nodes).To(HaveLen(trails), "the trails ran on distinct nodes")
		if orDefault(o.VolumeKind, "csi") == "csi" {
			Expect(unexplainedDeviations(r)).To(BeEmpty(), "CSI volumes allow no deviation but the metrics registration race")
		}
		if !o.KeepClusterOnFailure && providerOf(o.Provider).ClusterOnHost {
			Expect(footprint.Diff(before, takeFootprint(ctx, o))).To(BeEmpty(), "the tour left nothing behind")
		}
	})
})
