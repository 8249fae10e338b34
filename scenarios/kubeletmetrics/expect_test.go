package kubeletmetrics

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		c    Check
		v    float64
		want bool
		str  string
	}{
		{Equal(0), 0, true, "== 0"},
		{Equal(0), 1, false, "== 0"},
		{AtLeast(3), 3, true, ">= 3"},
		{AtLeast(3), 2, false, ">= 3"},
		{AtMost(3), 3, true, "<= 3"},
		{AtMost(3), 4, false, "<= 3"},
		{Any(), 12345, true, "any"},
		{Check{Op: "!="}, 1, false, "!= 0"},
	}
	for _, tc := range tests {
		if got := tc.c.Holds(tc.v); got != tc.want {
			t.Errorf("%s holds for %v = %v, want %v", tc.c, tc.v, got, tc.want)
		}
		if got := tc.c.String(); got != tc.str {
			t.Errorf("String = %q, want %q", got, tc.str)
		}
	}
}

func byMetric(t *testing.T, rs []Result) map[string]Result {
	t.Helper()
	m := map[string]Result{}
	for _, r := range rs {
		if _, dup := m[r.Metric]; dup {
			t.Fatalf("duplicate result for %s", r.Metric)
		}
		m[r.Metric] = r
	}
	return m
}

type want struct {
	verdict   string
	present   bool
	value     float64
	name      string // "" = the canonical metric name when present
	reasonHas string
}

func checkResults(t *testing.T, rs []Result, wants map[string]want) {
	t.Helper()
	got := byMetric(t, rs)
	for metric, w := range wants {
		r, ok := got[metric]
		if !ok {
			t.Errorf("no result for %s", metric)
			continue
		}
		name := w.name
		if name == "" && w.present {
			name = metric
		}
		if r.Verdict != w.verdict || r.Present != w.present || r.Value != w.value || r.Name != name {
			t.Errorf("%s: got verdict %q present %v value %v name %q; want %q %v %v %q (reason %q)",
				metric, r.Verdict, r.Present, r.Value, r.Name, w.verdict, w.present, w.value, name, r.Reason)
		}
		if !strings.Contains(r.Reason, w.reasonHas) {
			t.Errorf("%s: reason %q does not contain %q", metric, r.Reason, w.reasonHas)
		}
		if r.Expected == "" {
			t.Errorf("%s: empty Expected", metric)
		}
	}
}

func TestEvaluateFixture(t *testing.T) {
	s := parseFixture(t) // local-volume swap: 3 reconstructions, all failed and force-cleaned

	t.Run("local volumes: expected deviations", func(t *testing.T) {
		rs := evaluate(t, s, "v1.37.2", LocalVolumeExpectations(3))
		checkResults(t, rs, map[string]want{
			ReconstructVolumeOperationsErrors: {verdict: PassWithExpectedDeviations, present: true, value: 3, reasonHas: "cannot reconstruct kubernetes.io/local-volume PVs"},
			ForceCleanedFailedVolumeOps:       {verdict: PassWithExpectedDeviations, present: true, value: 3, reasonHas: "kubernetes#121675"},
			ForceCleanedFailedVolumeOpErrors:  {verdict: Pass, present: true, value: 0},
			OrphanPodCleanedVolumesErrors:     {verdict: Pass, present: true, value: 0},
			ReconstructVolumeOperations:       {verdict: Pass, present: true, value: 3},
			OrphanedRuntimePods:               {verdict: Pass, present: true, value: 3, reasonHas: "recorded: 3"},
		})
		if v := Verdict(rs); v != PassWithExpectedDeviations {
			t.Errorf("Verdict = %q, want %q", v, PassWithExpectedDeviations)
		}
		if e := byMetric(t, rs)[ReconstructVolumeOperationsErrors].Expected; e != "== 0 (expected deviation: <= 3)" {
			t.Errorf("Expected = %q", e)
		}
	})

	t.Run("local volumes: more errors than volumes fails", func(t *testing.T) {
		rs := evaluate(t, s, "v1.37.2", LocalVolumeExpectations(2))
		checkResults(t, rs, map[string]want{
			ReconstructVolumeOperationsErrors: {verdict: Fail, present: true, value: 3, reasonHas: "reconstruct_volume_operations_errors_total is 3, want == 0 (expected deviation: <= 2)"},
			ReconstructVolumeOperations:       {verdict: Pass, present: true, value: 3},
		})
		if v := Verdict(rs); v != Fail {
			t.Errorf("Verdict = %q, want fail", v)
		}
	})

	t.Run("local volumes: fewer reconstructions than volumes fails", func(t *testing.T) {
		rs := evaluate(t, s, "v1.37.2", LocalVolumeExpectations(4))
		checkResults(t, rs, map[string]want{
			ReconstructVolumeOperations: {verdict: Fail, present: true, value: 3, reasonHas: "is 3, want >= 4"},
		})
	})

	t.Run("csi: reconstruction errors fail", func(t *testing.T) {
		rs := evaluate(t, s, "v1.37.2", CSIExpectations(3))
		checkResults(t, rs, map[string]want{
			ReconstructVolumeOperationsErrors: {verdict: Fail, present: true, value: 3, reasonHas: "is 3, want == 0"},
			ForceCleanedFailedVolumeOps:       {verdict: Pass, present: true, value: 3, reasonHas: "recorded"},
			ReconstructVolumeOperations:       {verdict: Pass, present: true, value: 3},
		})
		if v := Verdict(rs); v != Fail {
			t.Errorf("Verdict = %q, want fail", v)
		}
	})
}

func TestEvaluateCSIClean(t *testing.T) {
	s := mustParse(t, `# TYPE reconstruct_volume_operations_total counter
reconstruct_volume_operations_total 4
# TYPE reconstruct_volume_operations_errors_total counter
reconstruct_volume_operations_errors_total 0
# TYPE force_cleaned_failed_volume_operations_total counter
force_cleaned_failed_volume_operations_total 0
# TYPE force_cleaned_failed_volume_operation_errors_total counter
force_cleaned_failed_volume_operation_errors_total 0
# TYPE kubelet_orphan_pod_cleaned_volumes gauge
kubelet_orphan_pod_cleaned_volumes 2
# TYPE kubelet_orphan_pod_cleaned_volumes_errors gauge
kubelet_orphan_pod_cleaned_volumes_errors 0
# TYPE kubelet_orphaned_runtime_pods_total counter
kubelet_orphaned_runtime_pods_total 2
`)
	rs := evaluate(t, s, "v1.37.2", CSIExpectations(4))
	for _, r := range rs {
		if r.Verdict != Pass || !r.Present {
			t.Errorf("%s: verdict %q present %v (%s)", r.Metric, r.Verdict, r.Present, r.Reason)
		}
	}
	if v := Verdict(rs); v != Pass {
		t.Errorf("Verdict = %q, want pass", v)
	}
	// The same clean scrape also passes the local-volume set without deviations.
	for _, r := range evaluate(t, s, "v1.37.2", LocalVolumeExpectations(4)) {
		if r.Verdict != Pass {
			t.Errorf("local %s: verdict %q (%s)", r.Metric, r.Verdict, r.Reason)
		}
	}
}

func TestEvaluateOrphanErrorsFail(t *testing.T) {
	s := mustParse(t, `# TYPE kubelet_orphan_pod_cleaned_volumes_errors gauge
kubelet_orphan_pod_cleaned_volumes_errors 1
# TYPE force_cleaned_failed_volume_operation_errors_total counter
force_cleaned_failed_volume_operation_errors_total 2
`)
	rs := evaluate(t, s, "v1.37.2", LocalVolumeExpectations(3))
	checkResults(t, rs, map[string]want{
		OrphanPodCleanedVolumesErrors:    {verdict: Fail, present: true, value: 1, reasonHas: "want == 0"},
		ForceCleanedFailedVolumeOpErrors: {verdict: Fail, present: true, value: 2, reasonHas: "want == 0"},
	})
}

// evaluate is Evaluate, failing the test on its error.
func evaluate(t *testing.T, s *Scrape, kubelet string, exps []Expectation) []Result {
	t.Helper()
	rs, err := Evaluate(s, kubelet, exps)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(exps) {
		t.Fatalf("got %d results for %d expectations", len(rs), len(exps))
	}
	return rs
}

// A metric the kubelet's version registers and the scrape lacks fails,
// naming the metric, the version and the file the table read; "not
// exposed" passes only where the version registers none.
func TestEvaluateMissingButExposed(t *testing.T) {
	// A kubelet whose volume manager never registered its counters: the
	// mutant that passed every metric check.
	s := mustParse(t, `# TYPE kubelet_orphan_pod_cleaned_volumes gauge
kubelet_orphan_pod_cleaned_volumes 2
# TYPE kubelet_orphan_pod_cleaned_volumes_errors gauge
kubelet_orphan_pod_cleaned_volumes_errors 0
# TYPE kubelet_orphaned_runtime_pods_total counter
kubelet_orphaned_runtime_pods_total 2
`)
	rs := evaluate(t, s, "v1.37.2", CSIExpectations(2))
	missing := "is missing from the scrape of kubelet v1.37.2, which registers it (k8s.io/kubernetes v1.27.9 to v1.37.2, pkg/kubelet/volumemanager/metrics/metrics.go)"
	checkResults(t, rs, map[string]want{
		ReconstructVolumeOperations:       {verdict: Fail, name: ReconstructVolumeOperations, reasonHas: ReconstructVolumeOperations + " " + missing},
		ReconstructVolumeOperationsErrors: {verdict: Fail, name: ReconstructVolumeOperationsErrors, reasonHas: missing},
		ForceCleanedFailedVolumeOps:       {verdict: Fail, name: ForceCleanedFailedVolumeOps, reasonHas: missing},
		ForceCleanedFailedVolumeOpErrors:  {verdict: Fail, name: ForceCleanedFailedVolumeOpErrors, reasonHas: missing},
		OrphanPodCleanedVolumesErrors:     {verdict: Pass, present: true, value: 0},
		OrphanedRuntimePods:               {verdict: Pass, present: true, value: 2, reasonHas: "recorded: 2"},
	})
	if v := Verdict(rs); v != Fail {
		t.Errorf("Verdict = %q, want fail", v)
	}
	// The same scrape of kubelet 1.26.15, which registers none of them:
	// the volume manager's pass as not exposed, while the kubelet's
	// metrics, which it does not register either, fail as a table error.
	rs = evaluate(t, s, "v1.26.15", CSIExpectations(2))
	checkResults(t, rs, map[string]want{
		ReconstructVolumeOperations:   {verdict: Pass, reasonHas: NotExposed + ": kubelet v1.26.15 does not register it (k8s.io/kubernetes v1.26.15, pkg/kubelet/volumemanager/metrics/metrics.go)"},
		ForceCleanedFailedVolumeOps:   {verdict: Pass, reasonHas: NotExposed},
		OrphanPodCleanedVolumesErrors: {verdict: Fail, present: true, reasonHas: "which the table says it does not register"},
	})
	// Under the other name than the version's, the reason says so.
	s = mustParse(t, `# TYPE kubelet_reconstruct_volume_operations_total counter
kubelet_reconstruct_volume_operations_total 2
`)
	r := byMetric(t, evaluate(t, s, "v1.36.3", CSIExpectations(2)))[ReconstructVolumeOperations]
	if r.Verdict != Fail || !strings.Contains(r.Reason, "the scrape has kubelet_reconstruct_volume_operations_total") {
		t.Errorf("counter under the other name: %q %s", r.Verdict, r.Reason)
	}
}

// A kubelet outside the table is an error that says to add it, not a
// pass.
func TestEvaluateUnknownKubelet(t *testing.T) {
	rs, err := Evaluate(parseFixture(t), "v1.38.0", CSIExpectations(3))
	if !errors.Is(err, ErrUnknownKubelet) || rs != nil {
		t.Fatalf("Evaluate for v1.38.0 = %v, %v; want ErrUnknownKubelet", rs, err)
	}
	for _, want := range []string{"kubelet v1.38.0", "go mod download -json k8s.io/kubernetes@v1.38.0", "add the version", "scenarios/kubeletmetrics/exposed.go"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestExpectationSets(t *testing.T) {
	csi := CSIExpectations(5)
	local := LocalVolumeExpectations(5)
	if len(csi) != len(local) {
		t.Fatalf("CSI has %d expectations, local %d", len(csi), len(local))
	}
	wantCSI := map[string]string{
		ReconstructVolumeOperationsErrors: "== 0",
		ForceCleanedFailedVolumeOpErrors:  "== 0",
		OrphanPodCleanedVolumesErrors:     "== 0",
		ReconstructVolumeOperations:       ">= 5",
		ForceCleanedFailedVolumeOps:       "any",
		OrphanedRuntimePods:               "any",
	}
	wantLocal := map[string]string{
		ReconstructVolumeOperationsErrors: "== 0 (expected deviation: <= 5)",
		ForceCleanedFailedVolumeOpErrors:  "== 0",
		OrphanPodCleanedVolumesErrors:     "== 0",
		ReconstructVolumeOperations:       ">= 5",
		ForceCleanedFailedVolumeOps:       "== 0 (expected deviation: >= 1)",
		OrphanedRuntimePods:               "any",
	}
	for _, set := range []struct {
		name string
		exps []Expectation
		want map[string]string
	}{{"csi", csi, wantCSI}, {"local", local, wantLocal}} {
		got := map[string]Expectation{}
		for _, e := range set.exps {
			got[e.Metric] = e
		}
		for metric, exp := range set.want {
			e, ok := got[metric]
			if !ok {
				t.Errorf("%s: no expectation for %s", set.name, metric)
				continue
			}
			if e.Expected() != exp {
				t.Errorf("%s: %s expected %q, want %q", set.name, metric, e.Expected(), exp)
			}
			if e.Deviation != nil && e.Deviation.Reason != LocalVolumeReconstructionReason {
				t.Errorf("%s: %s deviation reason %q", set.name, metric, e.Deviation.Reason)
			}
		}
	}
	// LocalVolumeExpectations must not alias CSIExpectations' deviations.
	for _, e := range CSIExpectations(5) {
		if e.Deviation != nil {
			t.Errorf("CSI expectation %s has a deviation", e.Metric)
		}
	}
}
