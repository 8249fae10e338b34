package reconstruction

import (
	"log/slog"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// binaryNeed is what the runs of one spec build: its labels, to tell
// whether the label filter selected it, and its run's settings, made when
// the suite starts (nil when the spec will not run on this provider).
type binaryNeed struct {
	labels  Labels
	options func() *skewrun.Options
}

var binaryNeeds []binaryNeed

// needsBinaries registers a spec's run settings for the suite's prefetch;
// each spec calls it beside its It.
func needsBinaries(labels Labels, options func() *skewrun.Options) {
	binaryNeeds = append(binaryNeeds, binaryNeed{labels: labels, options: options})
}

// envOptions are the suite's settings from the environment, with plan
// and, when given, scenario.
func envOptions(plan, scenario string) *skewrun.Options {
	o, err := skewrun.OptionsFromEnv(nil)
	Expect(err).NotTo(HaveOccurred())
	o.Plan, o.Scenario = plan, scenario
	return &o
}

// Every binary the selected specs will run is built (or found in the
// cache) once, here, with progress, before the first spec: a spec's
// deadline then bounds only what it tests, never a cold build of a kubelet,
// the control plane, containerd or the node image. A build that fails here
// fails the suite, naming it.
var _ = BeforeSuite(func(ctx SpecContext) {
	var runs []skewrun.Options
	var plans []string
	for _, n := range binaryNeeds {
		if !n.labels.MatchesLabelFilter(GinkgoLabelFilter()) {
			continue
		}
		o := n.options()
		if o == nil {
			continue
		}
		o.Logger = slog.New(slog.NewTextHandler(GinkgoWriter, nil))
		o.Out = GinkgoWriter
		runs = append(runs, *o)
		plans = append(plans, orDefault(o.Plan, plan.Default)+orDefault(" "+o.Scenario, ""))
	}
	if len(runs) == 0 {
		return
	}
	start := time.Now()
	By("building, or finding in the cache, the binaries of " + strings.Join(plans, "; "))
	for _, o := range runs {
		Expect(o.Prefetch(ctx)).To(Succeed(), "the binaries of plan %s", orDefault(o.Plan, plan.Default))
	}
	AddReportEntry("binaries ready before the first spec", time.Since(start).Round(time.Second).String())
})
