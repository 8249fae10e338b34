package reports

import (
	"encoding/xml"
	"strings"
	"testing"
)

// matrixRun is a tour of three versions (six pairs) on two nodes: the
// first trail passes; the second trail's first hop fails and leaves its
// node unusable, so its last two pairs are not reached.
func matrixRun() *Run {
	r := &Run{
		ID: "20261201-010000-m4t1", Scenario: "reconstruction-csi", Provider: "local", Node: "skewtest-worker, skewtest-worker-2",
		Plan:    []string{"v1.37.2", "v1.36.3", "v1.35.4", "v1.37.2", "v1.35.4", "v1.36.3", "v1.37.2"},
		Started: t0, Finished: at(40),
		Trails: []Trail{
			{Node: "skewtest-worker", Plan: []string{"v1.37.2", "v1.36.3", "v1.35.4", "v1.37.2"}, Verdict: Pass},
			{Node: "skewtest-worker-2", Plan: []string{"v1.37.2", "v1.35.4", "v1.36.3", "v1.37.2"}, Verdict: Fail},
		},
		Unreached: []UnreachedHop{
			{Node: "skewtest-worker-2", From: "v1.35.4", To: "v1.36.3", Reason: "hop 4 (v1.37.2 → v1.35.4) failed and left skewtest-worker-2 unusable: kubelet healthz: connection refused"},
			{Node: "skewtest-worker-2", From: "v1.36.3", To: "v1.37.2", Reason: "hop 4 (v1.37.2 → v1.35.4) failed and left skewtest-worker-2 unusable: kubelet healthz: connection refused"},
		},
		Timings: []Timing{{Phase: "cluster up", Duration: secs(7)}, {Phase: "tour", Duration: secs(25)}},
	}
	hop := func(n int, node, from, to, dir string, gone float64) Hop {
		h := Hop{Number: n, Node: node, From: from, To: to, Direction: dir, Timings: []Timing{{Phase: "node Ready", Duration: secs(0.7)}}}
		if gone > 0 {
			h.Timings = append(h.Timings, Timing{Phase: "old pod dirs gone", Duration: secs(gone)})
		}
		return h
	}
	r.Hops = []Hop{
		hop(1, "skewtest-worker", "v1.37.2", "v1.36.3", "downgrade", 4.52),
		hop(2, "skewtest-worker", "v1.36.3", "v1.35.4", "downgrade", 4.61),
		hop(3, "skewtest-worker", "v1.35.4", "v1.37.2", "upgrade", 4.48),
		hop(4, "skewtest-worker-2", "v1.37.2", "v1.35.4", "downgrade", 0),
	}
	r.Steps = []Step{
		step(1, 0, "skewtest-worker: deploy", 0, 6, Pass),
		step(2, 1, "skewtest-worker: hop 1: wait for cleanup", 6, 5, Pass),
		step(3, 2, "skewtest-worker: hop 2: wait for cleanup", 11, 5, Pass),
		step(4, 3, "skewtest-worker: hop 3: wait for cleanup", 16, 5, Pass),
		step(5, 0, "skewtest-worker-2: deploy", 0, 6, Pass),
		step(6, 4, "skewtest-worker-2: hop 4: start kubelet v1.35.4", 6, 30, Fail),
		step(7, 0, "skewtest-worker-2: after hop 4 failed: is skewtest-worker-2 usable at kubelet v1.35.4", 36, 2, Fail),
	}
	r.Steps[5].Error = "kubelet exited: status 1"
	r.Steps[6].Error = "kubelet healthz: connection refused"
	r.ComputeVerdict()
	return r
}

func TestMatrixMarkdown(t *testing.T) {
	md := string(render(t, WriteMarkdown, matrixRun()))
	for _, want := range []string{
		"## Matrix: from × to\n",
		"| from ↓ · to → | v1.37.2 | v1.36.3 | v1.35.4 |\n",
		"| **v1.37.2** | — | [✅ pass, 4.52 s](#hop-1) | [❌ fail](#hop-4) |\n",
		"| **v1.36.3** | ⛔ not reached | — | [✅ pass, 4.61 s](#hop-2) |\n",
		"| **v1.35.4** | [✅ pass, 4.48 s](#hop-3) | ⛔ not reached | — |\n",
		"| `skewtest-worker-2` | v1.35.4 | v1.36.3 | hop 4 (v1.37.2 → v1.35.4) failed and left skewtest-worker-2 unusable: kubelet healthz: connection refused |\n",
		"| `skewtest-worker-2` | v1.37.2 → v1.35.4 → v1.36.3 → v1.37.2 | 3 | ❌ fail |\n",
		"| <a id=\"hop-4\"></a>4 | `skewtest-worker-2` | v1.37.2 | v1.35.4 | downgrade |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The table opens the report, before the environment.
	if i, j := strings.Index(md, "## Matrix"), strings.Index(md, "## Environment"); i < 0 || j < i {
		t.Errorf("the matrix table (at %d) does not come before the environment (at %d)", i, j)
	}
}

func TestMatrixOnlyForTours(t *testing.T) {
	md := string(render(t, WriteMarkdown, localVolumeRun())) // one hop
	if strings.Contains(md, "## Matrix") {
		t.Errorf("a one-pair run got a matrix table")
	}
	var doc junitTestSuites
	if err := xml.Unmarshal(render(t, WriteJUnit, passingCSIRun()), &doc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range doc.Suites[0].TestCases {
		if strings.HasPrefix(tc.Name, "[matrix]") {
			t.Errorf("a run without trails got matrix test case %q", tc.Name)
		}
	}
}

func TestMatrixJUnit(t *testing.T) {
	var doc junitTestSuites
	if err := xml.Unmarshal(render(t, WriteJUnit, matrixRun()), &doc); err != nil {
		t.Fatal(err)
	}
	cases := map[string]junitTestCase{}
	for _, tc := range doc.Suites[0].TestCases {
		if strings.HasPrefix(tc.Name, "[matrix]") {
			cases[tc.Name] = tc
		}
	}
	if len(cases) != 6 {
		t.Fatalf("%d matrix test cases, want one per pair (6): %v", len(cases), cases)
	}
	if tc := cases["[matrix] v1.37.2 → v1.36.3"]; tc.Failure != nil || tc.Skipped != nil || tc.Time != "5.000" {
		t.Errorf("passed cell: %+v", tc)
	}
	if tc := cases["[matrix] v1.37.2 → v1.35.4"]; tc.Failure == nil || !strings.Contains(tc.Failure.Message, "start kubelet v1.35.4: kubelet exited: status 1") {
		t.Errorf("failed cell: %+v", tc)
	}
	if tc := cases["[matrix] v1.35.4 → v1.36.3"]; tc.Skipped == nil || !strings.Contains(tc.Skipped.Message, "not reached on skewtest-worker-2: hop 4") {
		t.Errorf("unreached cell: %+v", tc)
	}
	// Steps' failures (2) and the failed cell (1); the unreached cells skip.
	if s := doc.Suites[0]; s.Failures != 3 || s.Skipped != 2 || s.Tests != 7+6 {
		t.Errorf("suite counts: %d tests, %d failures, %d skipped; want 13, 3, 2", s.Tests, s.Failures, s.Skipped)
	}
}

func TestMatrixCellWithTwoVisits(t *testing.T) {
	// A plan may visit a pair twice: the cell lists both hops.
	r := &Run{Plan: []string{"v1.37.2", "v1.36.3", "v1.37.2", "v1.36.3"}}
	for i, p := range [][2]string{{"v1.37.2", "v1.36.3"}, {"v1.36.3", "v1.37.2"}, {"v1.37.2", "v1.36.3"}} {
		r.Hops = append(r.Hops, Hop{Number: i + 1, From: p[0], To: p[1], Verdict: Pass, Timings: []Timing{{Phase: "old pod dirs gone", Duration: secs(4 + float64(i))}}})
	}
	md := string(render(t, WriteMarkdown, r))
	if want := "| **v1.37.2** | — | [✅ pass, 4.00 s](#hop-1) · [✅ pass, 6.00 s](#hop-3) |\n"; !strings.Contains(md, want) {
		t.Errorf("report lacks %q:\n%s", want, md)
	}
}
