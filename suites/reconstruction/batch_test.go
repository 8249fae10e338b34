package reconstruction

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// The sign-off plans, the catalogue's faults and its shapes run as one
// batch (skewrun.RunBatch): on clusters shared among them, several runs at
// once on a provider that makes several nodes (BATCH_NODES), one after
// another on one cluster on kind. Each spec keeps its name, labels and
// assertions and reads its own run's result: the first selected spec to
// run starts the batch of every selected spec (batchSpecs), and the host's
// footprint is compared around the whole batch.

// batchSpec is one run of a spec, a job of the suite's batch.
type batchSpec struct {
	// key names the run in the batch ("fault reboot"), unique in the
	// suite.
	key string
	// text is the spec's full text (its containers' and its own), which
	// -ginkgo.focus and -ginkgo.skip match.
	text   string
	labels Labels
	// options are its run's settings; nil when the spec will skip on this
	// provider.
	options func() *skewrun.Options
}

var (
	batchSpecs []batchSpec
	batchOnce  sync.Once
	// batchResults are the jobs' results by spec text, once the batch ran.
	batchResults map[string]*skewrun.JobResult
	// batchLeft is what the batch left on the host (footprint.Diff).
	batchLeft []string
	// batchDir is the batch's schedule and cluster logs.
	batchDir string
)

// inBatch registers a run, named key, of the spec of full text and labels
// as a job of the suite's batch (and its binaries for the suite's
// prefetch), and returns the key its It reads its result with
// (batchResult). A spec may have several runs.
func inBatch(key, text string, labels Labels, options func() *skewrun.Options) string {
	batchSpecs = append(batchSpecs, batchSpec{key: key, text: text, labels: labels, options: options})
	needsBinaries(labels, options)
	return key
}

// willRun tells whether Ginkgo will run the spec of full text and labels:
// its label filter, focus and skip expressions. A spec selected some
// other way (a programmatic focus) still runs: alone (batchResult).
func willRun(text string, labels Labels) bool {
	sc, _ := GinkgoConfiguration()
	if !labels.MatchesLabelFilter(sc.LabelFilter) {
		return false
	}
	match := func(exprs []string) bool {
		for _, e := range exprs {
			if re, err := regexp.Compile(e); err == nil && re.MatchString(text) {
				return true
			}
		}
		return false
	}
	if len(sc.FocusStrings) > 0 && !match(sc.FocusStrings) {
		return false
	}
	return len(sc.SkipStrings) == 0 || !match(sc.SkipStrings)
}

// batchResult is the result of the spec's run: the first call runs the
// batch of every spec that will run, and returns the result of key's.
func batchResult(ctx SpecContext, key string) *skewrun.JobResult {
	batchOnce.Do(func() {
		var jobs []skewrun.Job
		for _, s := range batchSpecs {
			if !willRun(s.text, s.labels) {
				continue
			}
			if o := s.options(); o != nil {
				jobs = append(jobs, job(s.key, o))
			}
		}
		batchResults = runBatch(ctx, jobs)
	})
	if r, ok := batchResults[key]; ok {
		return r
	}
	// Selected in a way the batch could not read ahead: it runs alone.
	for _, s := range batchSpecs {
		if s.key == key {
			return runBatch(ctx, []skewrun.Job{job(key, s.options())})[key]
		}
	}
	Fail("no batch job for spec " + key)
	return nil
}

// job is the run named key, with the suite's logger and output.
func job(key string, o *skewrun.Options) skewrun.Job {
	o.Logger = slog.New(slog.NewTextHandler(GinkgoWriter, nil))
	o.Out = GinkgoWriter
	return skewrun.Job{Name: key, Options: *o}
}

// runBatch runs jobs as one batch, with the host's footprint taken
// around it, and returns their results by name.
func runBatch(ctx SpecContext, jobs []skewrun.Job) map[string]*skewrun.JobResult {
	Expect(jobs).NotTo(BeEmpty(), "the batch has a job for the running spec")
	o, err := skewrun.OptionsFromEnv(nil)
	Expect(err).NotTo(HaveOccurred())
	o.Logger = slog.New(slog.NewTextHandler(GinkgoWriter, nil))
	o.Out = GinkgoWriter
	By(fmt.Sprintf("running %d runs as one batch on BATCH_NODES nodes at once", len(jobs)))
	before := takeFootprint(ctx, o)
	res, err := skewrun.RunBatch(ctx, o, jobs)
	if res == nil {
		// Refused before anything was made: every spec fails with why.
		Expect(err).NotTo(HaveOccurred(), "the batch of %d runs", len(jobs))
	}
	batchDir = res.Dir
	AddReportEntry("batch", fmt.Sprintf("%s: %d runs in %s (one after another %s); schedule %s/batch.md",
		res.Record.ID, len(jobs), res.Record.Took().Round(100*time.Millisecond), res.Record.SumOfRuns().Round(100*time.Millisecond), res.Dir))
	if !o.KeepClusterOnFailure {
		batchLeft = footprint.Diff(before, takeFootprint(ctx, o))
	}
	out := map[string]*skewrun.JobResult{}
	for i := range res.Jobs {
		out[res.Jobs[i].Job.Name] = &res.Jobs[i]
	}
	return out
}

// checkBatchRun asserts what every batch spec asserts of its run: it ran
// and passed (possibly with expected deviations) and the batch left
// nothing on the host. It returns the run's result.
func checkBatchRun(r *skewrun.JobResult) *skewrun.Result {
	res := r.Result
	addRunReport(res)
	if r.Attempts > 1 {
		AddReportEntry("control plane failure, run again", fmt.Sprintf("%d attempts; each kept its own report in %s", r.Attempts, strings.TrimSuffix(artifactsOf(res), "/")))
	}
	AddReportEntry("batch schedule", batchDir+"/batch.md")
	Expect(r.Err).NotTo(HaveOccurred(), "see the report in %s and the batch's schedule in %s", artifactsOf(res), batchDir)
	Expect(batchLeft).To(BeEmpty(), "the batch left nothing behind")
	return res
}
