package reconstruction

import (
	"fmt"
	"log/slog"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/history"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// The kubelet's history (make test-history; scenarios/history): each run
// under its own control plane, judged by the catalogue, and more strictly
// than make test-skew judges it: a known bug the catalogue expects of a
// hop's kubelet must reproduce there ("not seen" fails the spec, so a
// check that cannot see the bug it exists for is found), and each kubelet
// must report the reconstruction path the history lists, from its own
// log. The runs need a provider that creates its cluster at APISERVER.
var _ = Describe("kubelet history", Label(history.Label), func() {
	d := providerOf(providerName())
	for _, h := range history.Runs() {
		options := func() *skewrun.Options {
			o := envOptions(h.Plan, h.Scenario)
			o.APIServer = h.APIServer
			if h.Scenario != "" {
				o.Replicas = catalogue.Replicas
			}
			return o
		}
		runs := d.CreatesCluster
		if e, ok := reconstruction.CatalogueEntry(h.Scenario); ok && !e.RunsOn(d.NodeCapabilities) {
			runs = false
		}
		needsBinaries(Label(history.Label, h.Label()), func() *skewrun.Options {
			if !runs {
				return nil
			}
			return options()
		})
		It(fmt.Sprintf("%s: %s under kube-apiserver %s, %s", h.Name, h.Plan, h.APIServer, orDefault(h.Scenario, "the baseline force-delete")), Label(h.Label()), func(ctx SpecContext) {
			if !d.CreatesCluster {
				Skip(fmt.Sprintf("history run %s needs a cluster made at kube-apiserver %s; PROVIDER=%s attaches to one", h.Name, h.APIServer, d.Name))
			}
			if !runs {
				Skip(fmt.Sprintf("history run %s: catalogue entry %s does not run on PROVIDER=%s", h.Name, h.Scenario, d.Name))
			}
			checks, err := h.Checks()
			Expect(err).NotTo(HaveOccurred())
			o := options()
			o.Logger = slog.New(slog.NewTextHandler(GinkgoWriter, nil))
			o.Out = GinkgoWriter
			before := takeFootprint(ctx, *o)

			res, err := runJudged(ctx, *o)

			addRunReport(res)
			Expect(err).NotTo(HaveOccurred(), "see the report in %s", artifactsOf(res))
			r := res.Run
			Expect(r.Verdict).To(BeElementOf(reports.Pass, reports.PassWithExpectedDeviations), r.Failure)
			Expect(r.Unreached).To(BeEmpty(), "every hop of the plan was reached")
			Expect(r.Hops).To(HaveLen(len(checks)), "every hop of the plan ran")
			if h.Paths != nil {
				got := []string{r.InitialReconstructionPath}
				for _, hop := range r.Hops {
					got = append(got, hop.ReconstructionPath)
				}
				Expect(got).To(Equal(h.Paths), "the reconstruction path each kubelet reports in its log")
			}
			for i, c := range checks {
				if !c.Covered {
					continue
				}
				devs := catalogueDeviations(r, i+1, h.Scenario)
				switch c.Expectation.Outcome {
				case catalogue.KnownBug:
					Expect(devs).NotTo(BeEmpty(), "hop %d: kubelet %s has %s (%s) but the hop has no deviation for it", i+1, c.Kubelet, c.Expectation.RefIDs(), c.Expectation.Bug)
					for _, dv := range devs {
						Expect(dv.Reproduced()).To(BeTrue(), "hop %d: kubelet %s has %s (%s), which did not reproduce: %s", i+1, c.Kubelet, c.Expectation.RefIDs(), c.Expectation.Bug, dv.Observed)
					}
					AddReportEntry(fmt.Sprintf("hop %d: %s reproduced on %s", i+1, c.Expectation.RefIDs(), c.Kubelet), devs[0].Observed)
					if f, err := reconstruction.LookupFault(h.Scenario); err == nil && f.BugLasts && i+1 < len(r.Hops) {
						Expect(r.Hops[i+1].Restored).NotTo(BeEmpty(), "hop %d follows %s on %s, whose damage lasts: it restores the pods first", i+2, c.Expectation.RefIDs(), c.Kubelet)
						AddReportEntry(fmt.Sprintf("hop %d: restored first", i+2), r.Hops[i+1].Restored)
					}
				case catalogue.Clean:
					Expect(devs).To(BeEmpty(), "hop %d: kubelet %s is clean of %s", i+1, c.Kubelet, h.Scenario)
				}
			}
			if !o.KeepClusterOnFailure {
				Expect(footprint.Diff(before, takeFootprint(ctx, *o))).To(BeEmpty(), "the run left nothing behind")
			}
		})
	}
})

// catalogueDeviations are the deviations hop's judging step of entry
// recorded.
func catalogueDeviations(r *reports.Run, hop int, entry string) []reports.Deviation {
	var out []reports.Deviation
	for _, s := range r.Steps {
		if s.Hop == hop && s.JudgesEntry(entry) {
			out = append(out, s.Deviations...)
		}
	}
	return out
}
