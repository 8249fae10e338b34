package reports

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testBatch() *Batch {
	return &Batch{ID: "20261203-180000-abcd", Provider: "local", Started: at(0), Finished: at(120), Nodes: 2,
		Clusters: []BatchCluster{{Number: 1, Nodes: []string{"skewtest-worker", "skewtest-worker2"}, Up: secs(7), Teardown: secs(4), Started: at(0), Finished: at(120),
			Retired: []string{"skewtest-worker2: run \"fault file-for-dir\" left pods/uid-1"}, Logs: "cluster-1/logs"}},
		Jobs: []BatchJob{
			{Name: "fault file-for-dir", RunID: "run-2", Cluster: 1, Node: "skewtest-worker2", Started: at(7), Finished: at(97), Hold: secs(110), Verdict: PassWithExpectedDeviations},
			{Name: "plan v1.37.2,v1.36.3,v1.37.2 csi", RunID: "run-1", Cluster: 1, Node: "skewtest-worker", Started: at(8), Finished: at(40), Hold: secs(20), Verdict: Pass},
			{Name: "fault reboot | odd", RunID: "run-3", Cluster: 1, Node: "skewtest-worker", Started: at(41), Finished: at(70), Hold: secs(20), Verdict: Fail, Failure: "hop 1: pods/uid-2 left", Attempt: 2},
			{Name: "fault never", Hold: secs(20), Failure: "the batch was interrupted before it started"},
		}}
}

func TestBatchTotals(t *testing.T) {
	b := testBatch()
	if got := b.SumOfRuns(); got != secs(90+32+29) {
		t.Errorf("SumOfRuns = %s, want 151s", got)
	}
	if b.Took() != secs(120) || !b.Failed() {
		t.Errorf("Took %s Failed %v, want 120s and failed", b.Took(), b.Failed())
	}
}

func TestWriteBatch(t *testing.T) {
	dir := t.TempDir()
	if _, err := WriteBatch(dir, testBatch()); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, BatchMarkdownFileName))
	if err != nil {
		t.Fatal(err)
	}
	text := string(md)
	for _, want := range []string{
		"4 runs on 2 nodes at once", "in 120.0s; one after another they took 151.0s",
		"❌ FAIL", "![schedule](batch.svg)",
		"| plan v1.37.2,v1.36.3,v1.37.2 csi | skewtest-worker | 8.00 | 32.0 | 20.0 | ✅ pass | [run-1](../run-1/report.md) |",
		`fault reboot \| odd (attempt 2)`, "❌ fail: hop 1: pods/uid-2 left",
		"⏭️ not run: the batch was interrupted before it started",
		`skewtest-worker2: run "fault file-for-dir" left pods/uid-1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("batch.md lacks %q:\n%s", want, text)
		}
	}
	// Start order: file-for-dir (7 s) before the plan (8 s); the job that
	// never ran last.
	if strings.Index(text, "fault file-for-dir |") > strings.Index(text, "| plan v1.37.2") || strings.Index(text, "fault never") < strings.Index(text, "fault reboot") {
		t.Errorf("rows not in start order:\n%s", text)
	}
	var back Batch
	raw, _ := os.ReadFile(filepath.Join(dir, BatchJSONFileName))
	if err := json.Unmarshal(raw, &back); err != nil || len(back.Jobs) != 4 || back.Jobs[2].Attempt != 2 {
		t.Errorf("batch.json: %v, %+v", err, back.Jobs)
	}
	svg, _ := os.ReadFile(filepath.Join(dir, BatchSVGFileName))
	var doc struct {
		XMLName xml.Name `xml:"svg"`
		Groups  []struct {
			Class string `xml:"class,attr"`
			Title string `xml:"title"`
			Rect  struct {
				X     float64 `xml:"x,attr"`
				Width float64 `xml:"width,attr"`
			} `xml:"rect"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal(svg, &doc); err != nil {
		t.Fatalf("batch.svg is not XML: %v\n%s", err, svg)
	}
	if len(doc.Groups) != 3 {
		t.Fatalf("batch.svg has %d run bars, want one per run that ran (3)", len(doc.Groups))
	}
	// The bars' lengths follow the runs': file-for-dir (90 s) is the
	// longest, the plan (32 s) and reboot (29 s) shorter.
	w := map[string]float64{}
	for _, g := range doc.Groups {
		w[strings.SplitN(g.Title, ":", 2)[0]] = g.Rect.Width
	}
	if !(w["fault file-for-dir"] > w["plan v1.37.2,v1.36.3,v1.37.2 csi"] && w["plan v1.37.2,v1.36.3,v1.37.2 csi"] > w["fault reboot | odd"]) {
		t.Errorf("bar widths %v do not follow the runs' durations", w)
	}
}
