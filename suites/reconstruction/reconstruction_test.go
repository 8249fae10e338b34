package reconstruction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// OldestSkewPlan goes down to the oldest kubelet the skew policy allows
// against a v1.37 API server.
const OldestSkewPlan = "v1.37.2,v1.34.4,v1.37.2"

type matrixEntry struct {
	plan string
	kind string
}

// matrix is what `make test-skew` runs: with PLAN set, that plan on
// VOLUME_KIND; otherwise, on a provider whose clusters come up in seconds
// here (Descriptor.QuickClusters: local), the manual sign-off's plan and
// the oldest-skew plan on CSI volumes, and the sign-off plan on local
// volumes; on the others, the sign-off plan.
func matrix() []matrixEntry {
	kind := os.Getenv("VOLUME_KIND")
	if p := os.Getenv("PLAN"); p != "" {
		return []matrixEntry{{plan: p, kind: orDefault(kind, "csi")}}
	}
	if !providerOf(os.Getenv("PROVIDER")).QuickClusters {
		return []matrixEntry{{plan: plan.Default, kind: orDefault(kind, "csi")}}
	}
	if kind != "" {
		return []matrixEntry{{plan: plan.Default, kind: kind}, {plan: OldestSkewPlan, kind: kind}}
	}
	return []matrixEntry{
		{plan: plan.Default, kind: "csi"},
		{plan: OldestSkewPlan, kind: "csi"},
		{plan: plan.Default, kind: "local"},
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// providerName is PROVIDER, or the default provider's name.
func providerName() string { return orDefault(os.Getenv("PROVIDER"), clusters.Default().Name) }

// providerOf is the descriptor of the named provider (empty: the
// default). What the suite asks of a provider it asks of its descriptor's
// properties, never of its name. An unknown name has none, so specs that
// need one skip, and runs fail validation, naming it.
func providerOf(name string) clusters.Descriptor {
	name = orDefault(name, clusters.Default().Name)
	if d, err := clusters.Lookup(name); err == nil {
		return d
	}
	return clusters.Descriptor{Name: name}
}

// providersWhere are the names of the providers that have a property,
// for skip messages and labels.
func providersWhere(has func(clusters.Descriptor) bool) []string {
	var out []string
	for _, d := range clusters.Providers() {
		if has(d) {
			out = append(out, d.Name)
		}
	}
	return out
}

// labelsFor derives Ginkgo labels from a plan: skew and disruptive always,
// upgrade and downgrade from its hops, the volume kind and the provider.
func labelsFor(e matrixEntry) Labels {
	l := Labels{"skew", "disruptive", providerName()}
	if e.kind == "local" {
		l = append(l, "local-volume")
	} else {
		l = append(l, "csi")
	}
	// The sign-off plans are the catalogue's baseline shapes.
	if entry, ok := reconstruction.CatalogueEntry(baselineEntries[e.kind]); ok {
		l = append(l, catalogue.CatalogueLabel, entry.Label())
	}
	if p, err := plan.Parse(e.plan); err == nil {
		seen := map[string]bool{}
		for _, h := range p.Hops() {
			if !seen[h.Direction] {
				seen[h.Direction] = true
				l = append(l, h.Direction)
			}
		}
	}
	return append(l, kubeletLabels(e.plan)...)
}

// kubeletLabelPrefix starts the label of each kubelet version a spec
// runs: -ginkgo.label-filter='!kubelet-v1.34.4' leaves out the specs
// that need that kubelet built (CI on a cold machine does).
const kubeletLabelPrefix = "kubelet-"

// kubeletLabels are the labels of the distinct kubelet versions of a
// comma-separated plan, in plan order.
func kubeletLabels(planText string) []string {
	var out []string
	for _, v := range strings.Split(planText, ",") {
		if l := kubeletLabelPrefix + strings.TrimSpace(v); v != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// signoffText is the container text of the sign-off plans' specs.
const signoffText = "kubelet volume reconstruction across versions"

var _ = Describe(signoffText, func() {
	for _, e := range matrix() {
		name := fmt.Sprintf("cleans up force-deleted pods' %s volumes on plan %s", e.kind, e.plan)
		key := inBatch(fmt.Sprintf("plan %s %s", e.plan, e.kind), signoffText+" "+name, labelsFor(e), func() *skewrun.Options {
			o := envOptions(e.plan, "")
			o.VolumeKind = e.kind
			return o
		})
		It(name, labelsFor(e), func(ctx SpecContext) {
			res := checkBatchRun(batchResult(ctx, key))
			Expect(res.Run.Verdict).To(BeElementOf(reports.Pass, reports.PassWithExpectedDeviations), res.Run.Failure)
			Expect(res.Run.Hops).To(HaveLen(len(strings.Split(e.plan, ","))-1), "every hop of the plan ran")
			for _, h := range res.Run.Hops {
				Expect(phases(h)).To(ContainElements("old mounts gone", "old pod dirs gone"), "hop %d recorded its time-to-cleanup", h.Number)
			}
			if e.kind == "csi" {
				Expect(unexplainedDeviations(res.Run)).To(BeEmpty(), "CSI volumes allow no deviation but the metrics registration race")
			}
		})
	}
})

// unexplainedDeviations are a run's expected deviations other than the
// kubelet's metrics registration race, which any run may meet.
func unexplainedDeviations(r *reports.Run) []string {
	var out []string
	for _, d := range reports.ExpectedDeviations(r) {
		if !strings.Contains(d.Reason, kubeletmetrics.MetricsRegistrationRace) {
			out = append(out, fmt.Sprintf("%s: %s", d.Check, d.Reason))
		}
	}
	return out
}

func phases(h reports.Hop) []string {
	var out []string
	for _, t := range h.Timings {
		out = append(out, t.Phase)
	}
	return out
}

// runJudged is skewrun.Run with scenarios.ControlPlaneRetries, for the runs
// outside the suite's batch; a kept cluster's run is never run again. Each
// attempt keeps its report and JUnit in its own artifacts directory, and
// the spec's report names the first.
func runJudged(ctx context.Context, o skewrun.Options) (*skewrun.Result, error) {
	for attempt := 1; ; attempt++ {
		res, err := skewrun.Run(ctx, o)
		if attempt > scenarios.ControlPlaneRetries || o.KeepClusterOnFailure || ctx.Err() != nil || !errors.Is(err, scenarios.ErrControlPlane) {
			return res, err
		}
		msg := fmt.Sprintf("attempt %d failed because the control plane did not act, not the kubelet (exit %d); running the plan once more. Its report: %s. Its error: %v", attempt, exitcode.Of(err), artifactsOf(res), err)
		AddReportEntry("control plane failure, run again", msg)
		fmt.Fprintln(GinkgoWriter, msg)
	}
}

// addRunReport puts the run's report path and summary into Ginkgo's report
// (and its JUnit), when a run was started.
func addRunReport(res *skewrun.Result) {
	if res != nil {
		AddReportEntry("report", res.ArtifactsDir+"/report.md")
		AddReportEntry("summary", reports.Summary(res.Run))
	}
}

func artifactsOf(res *skewrun.Result) string {
	if res == nil {
		return "(no run was started)"
	}
	return res.ArtifactsDir
}

// footprint counts what runs of providers that make their cluster on this
// host (Descriptor.ClusterOnHost: local, kind) make here; the others'
// runs make nothing here, so theirs is empty.
func takeFootprint(ctx context.Context, o skewrun.Options) footprint.Footprint {
	if !providerOf(o.Provider).ClusterOnHost {
		return footprint.Footprint{}
	}
	return footprint.Take(ctx)
}
