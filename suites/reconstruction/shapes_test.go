package reconstruction

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// plantedShapes are the catalogue shapes the scenario plants into its
// workload (the sign-off plans run csi-filesystem and local-volume).
func plantedShapes() []catalogue.Entry {
	var out []catalogue.Entry
	for _, e := range catalogue.All() {
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
		case !e.RunsOn(provider):
			elsewhere = append(elsewhere, fmt.Sprintf("%s (runs on %s)", e.Name, strings.Join(e.Providers, ", ")))
		default:
			run = append(run, e.Name)
		}
	}
	return run, elsewhere
}

// The catalogue's shapes go into one workload on one cluster, to keep the
// catalogue cheap: one spec carries every shape's label, and runs the
// shapes the label filter selects (all of them under
// label-filter=catalogue; only the block shape under
// label-filter=shape-block). Each shape is still checked and judged on
// steps of its own after every hop.
var _ = Describe("reconstruction catalogue shapes", Label(catalogue.CatalogueLabel), func() {
	provider := providerName()
	entries := plantedShapes()
	var labels []string
	var names []string
	for _, e := range entries {
		labels = append(labels, e.Label())
		names = append(names, e.Name)
	}
	needsBinaries(Label(append([]string{catalogue.CatalogueLabel}, labels...)...), func() *skewrun.Options {
		run, _ := selectedShapes(entries, provider)
		if len(run) == 0 {
			return nil
		}
		o := envOptions(orDefault(os.Getenv("PLAN"), skewrun.DefaultPlan), strings.Join(run, ","))
		o.Replicas = skewrun.CatalogueReplicas
		return o
	})
	It(fmt.Sprintf("shapes %s in one workload, force-deleted while the kubelet is down", strings.Join(names, ", ")), Label(labels...), func(ctx SpecContext) {
		run, elsewhere := selectedShapes(entries, provider)
		if len(elsewhere) > 0 {
			AddReportEntry("shapes not run on PROVIDER="+provider, strings.Join(elsewhere, "; "))
		}
		if len(run) == 0 {
			Skip(fmt.Sprintf("catalogue shapes: none selected runs on PROVIDER=%s (%s); not run, not passed", provider, strings.Join(elsewhere, "; ")))
		}
		o, err := skewrun.OptionsFromEnv(nil)
		Expect(err).NotTo(HaveOccurred())
		if os.Getenv("PLAN") == "" {
			o.Plan = skewrun.DefaultPlan
		}
		o.Scenario, o.Replicas = strings.Join(run, ","), skewrun.CatalogueReplicas
		o.Logger = slog.New(slog.NewTextHandler(GinkgoWriter, nil))
		o.Out = GinkgoWriter
		before := takeFootprint(ctx, o)

		res, err := runJudged(ctx, o)

		addRunReport(res)
		Expect(err).NotTo(HaveOccurred(), "see the report in %s", artifactsOf(res))
		r := res.Run
		Expect(r.Verdict).To(BeElementOf(reports.Pass, reports.PassWithExpectedDeviations), r.Failure)
		Expect(r.CatalogueEntry()).To(Equal(strings.Join(run, ",")))
		Expect(r.Hops).To(HaveLen(len(strings.Split(o.Plan, ","))-1), "every hop of the plan ran")
		for _, name := range run {
			judged := 0
			for _, s := range r.Steps {
				if strings.Contains(s.Name, "catalogue shape "+name+" on kubelet") {
					judged++
					Expect(s.Verdict).NotTo(Equal(reports.Fail), s.Error)
				}
			}
			Expect(judged).To(Equal(len(r.Hops)), "shape %s judged after each hop against the catalogue's expectation", name)
		}
		if !o.KeepClusterOnFailure {
			Expect(footprint.Diff(before, takeFootprint(ctx, o))).To(BeEmpty(), "the run left nothing behind")
		}
	})
})
