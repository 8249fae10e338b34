package signoff

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/reports"
)

// historyRun is a run of catalogue entry pvc-terminating whose first hop's
// kubelet has the bug (the judging step records it reproduced) and whose
// second is clean, and a sign-off plan through the old reconstruction.
func historyRuns() []Source {
	bug := &reports.Run{ID: "20261202-040000-aaaa", Provider: "local", Scenario: reports.CatalogueScenarioPrefix + "pvc-terminating",
		Plan:    []string{"v1.32.13", "v1.32.2", "v1.32.13"},
		Verdict: reports.PassWithExpectedDeviations,
		Hops: []reports.Hop{
			{Number: 1, From: "v1.32.13", To: "v1.32.2", Verdict: reports.PassWithExpectedDeviations, ReconstructionPath: "new"},
			{Number: 2, From: "v1.32.2", To: "v1.32.13", Verdict: reports.Pass, ReconstructionPath: "new"},
		},
		Steps: []reports.Step{
			{Hop: 1, Name: "hop 1: catalogue fault pvc-terminating on kubelet v1.32.2", Verdict: reports.PassWithExpectedDeviations,
				Deviations: []reports.Deviation{{Check: "catalogue fault pvc-terminating", Observed: "mount unmounted 1.4s after the start", Reason: "known bug PR #130335 reproduces on kubelet v1.32.2"}}},
			{Hop: 2, Name: "hop 2: catalogue fault pvc-terminating on kubelet v1.32.13", Verdict: reports.Pass},
		},
	}
	missed := &reports.Run{ID: "20261202-041000-bbbb", Provider: "local", Scenario: reports.CatalogueScenarioPrefix + "configmap-key-missing",
		Verdict: reports.PassWithExpectedDeviations,
		Hops:    []reports.Hop{{Number: 1, From: "v1.28.15", To: "v1.26.15", Verdict: reports.PassWithExpectedDeviations}},
		Steps: []reports.Step{{Hop: 1, Name: "hop 1: catalogue fault configmap-key-missing on kubelet v1.26.15",
			Deviations: []reports.Deviation{{Check: "catalogue fault configmap-key-missing", Observed: reports.NotSeenPrefix + "the key is back", Reason: "expected #121472 not seen"}}}},
	}
	gate := &reports.Run{ID: "20261202-042000-cccc", Provider: "local", Scenario: reports.ReconstructionScenarioPrefix + "csi", Verdict: reports.Pass,
		Hops: []reports.Hop{
			{Number: 1, From: "v1.28.15", To: "v1.28.15", ToGates: map[string]bool{"NewVolumeManagerReconstruction": false}, Verdict: reports.Pass, ReconstructionPath: "old"},
			{Number: 2, From: "v1.28.15", To: "v1.28.15", FromGates: map[string]bool{"NewVolumeManagerReconstruction": false}, Verdict: reports.Fail, ReconstructionPath: "new"},
		}, Failure: "hop 2: pods/u1 still there"}
	return []Source{{Run: bug, Report: "/a/report.md"}, {Run: missed}, {Run: gate}}
}

func TestHistoryGrid(t *testing.T) {
	p := Build(historyRuns(), "/")
	h := p.History
	if h == nil {
		t.Fatal("no history grid for catalogue runs")
	}
	if got := strings.Join(h.Entries, ","); got != baselineEntry+",configmap-key-missing,pvc-terminating" {
		t.Errorf("entries %q", got)
	}
	if got := strings.Join(h.Kubelets, ","); got != "v1.26.15,v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.32.2,v1.32.13" {
		t.Errorf("kubelets %q", got)
	}
	for _, tc := range []struct{ kubelet, entry, outcome string }{
		{"v1.32.2", "pvc-terminating", historyReproduced},
		{"v1.32.13", "pvc-terminating", historyClean},
		{"v1.26.15", "configmap-key-missing", historyNotReproduced},
		{"v1.28.15+NewVolumeManagerReconstruction=false", baselineEntry, historyClean},
		{"v1.28.15", baselineEntry, historyFail},
	} {
		items := h.Cells[tc.kubelet][tc.entry]
		if len(items) != 1 || items[0].Outcome != tc.outcome {
			t.Errorf("%s × %s: %+v, want one %q", tc.kubelet, tc.entry, items, tc.outcome)
		}
	}
	if it := h.Cells["v1.32.2"]["pvc-terminating"][0]; it.Link != "a/report.md#hop-1" || !strings.Contains(it.Why, "#130335") {
		t.Errorf("reproduced cell links %q and cites %q", it.Link, it.Why)
	}
	var b bytes.Buffer
	if err := writeMarkdown(&b, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Kubelet history", "🐞 bug reproduced (new)", "✅ clean (old)", "❔ not reproduced", "❌ fail (new)", "PR #130335 reproduces on kubelet v1.32.2"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// A night of sign-off plans on the new reconstruction has no history grid.
func TestNoHistoryGridForPlainNights(t *testing.T) {
	src := historyRuns()[2]
	src.Run.Hops[0].ReconstructionPath = "new"
	if p := Build([]Source{src}, "/"); p.History != nil {
		t.Errorf("history grid for a plain night: %+v", p.History)
	}
}

func TestHistoryGridHTML(t *testing.T) {
	var b bytes.Buffer
	if err := writeHTML(&b, Build(historyRuns(), "/")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<h2 id="history">Kubelet history</h2>`, `href="a/report.md#hop-1"`, "● bug reproduced (new)", "? not reproduced"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the HTML page lacks %q", want)
		}
	}
}
