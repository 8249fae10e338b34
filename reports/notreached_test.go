package reports

import (
	"strings"
	"testing"
)

// A run whose hop 2 was restored before it began, and whose hop 3 was not
// reached, says both in its report, summary and JUnit, and keeps the
// verdict of the hops it judged.
func TestReportsSayRestoredAndNotReached(t *testing.T) {
	known := Deviation{Check: "catalogue fault pvc-terminating", Expected: "known bug", Observed: "pod web-0: unmounted", Reason: "known bug PR #130335 reproduces on kubelet v1.31.0"}
	run := &Run{
		Scenario: "pvc-terminating", Plan: []string{"v1.34.4", "v1.31.0", "v1.34.4", "v1.31.0"},
		Steps: []Step{
			{Index: 1, Hop: 1, Name: "hop 1: catalogue fault pvc-terminating on kubelet v1.31.0", Verdict: PassWithExpectedDeviations, Deviations: []Deviation{known}},
			{Index: 2, Hop: 2, Name: "hop 2: restore the pods", Verdict: Pass},
			{Index: 3, Hop: 2, Name: "hop 2: catalogue fault pvc-terminating on kubelet v1.34.4", Verdict: Pass},
			{Index: 4, Hop: 3, Name: "hop 3: restore the pods", Verdict: Skipped, Error: "hop not reached: the pods did not come back"},
			{Index: 5, Hop: 3, Name: "hop 3: stop kubelet", Verdict: Skipped, Notes: []string{"not run: step 4 found hop 3 cannot be reached"}},
		},
		Hops: []Hop{
			{Number: 1, From: "v1.34.4", To: "v1.31.0"},
			{Number: 2, From: "v1.31.0", To: "v1.34.4", Restored: "kubelet v1.31.0's known bug left pod web-0 (uid u0): its volume pv-0 unmounted; so the pods were re-created"},
		},
		Unreached: []UnreachedHop{{Number: 3, From: "v1.34.4", To: "v1.31.0", Reason: "the pods did not come back"}},
	}
	run.ComputeVerdict()
	if run.Verdict != PassWithExpectedDeviations {
		t.Fatalf("verdict %s (%s), want %s", run.Verdict, run.Failure, PassWithExpectedDeviations)
	}
	md := string(render(t, WriteMarkdown, run))
	for _, want := range []string{
		"1 hop of the plan not reached, so not judged",
		"- Before hop 2, restored: kubelet v1.31.0's known bug left pod web-0",
		"the pods did not come back",
		"**Not reached:** hop not reached: the pods did not come back",
		"- not run: step 4 found hop 3 cannot be reached",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	sum := Summary(run)
	for _, want := range []string{"Before hop 2, restored: kubelet v1.31.0's known bug", "Not reached: hop 3 v1.34.4 → v1.31.0: the pods did not come back."} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary %q lacks %q", sum, want)
		}
	}
	junit := string(render(t, WriteJUnit, run))
	for _, want := range []string{`message="not reached: hop not reached: the pods did not come back"`, `message="not run: step 4 found hop 3 cannot be reached"`} {
		if !strings.Contains(junit, want) {
			t.Errorf("JUnit lacks %q", want)
		}
	}
	if strings.Contains(junit, "<failure") {
		t.Errorf("JUnit of a run that judged every hop it reached has a failure:\n%s", junit)
	}
}
