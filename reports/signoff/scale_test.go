package signoff

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/reports/scale"
)

// scaleResult is a bench-scale of two modes' pods shape, two hops each,
// whose old pod dirs time grows with the volumes.
func scaleResult() *scale.Result {
	r := &scale.Result{Started: night.Add(2 * time.Hour), Finished: night.Add(3 * time.Hour), Provider: "local",
		Plan: []string{"v1.37.2", "v1.34.4", "v1.37.2"}, Command: "PLAN=v1.37.2,v1.34.4,v1.37.2 skewtest bench-scale",
		PollInterval: 250 * time.Millisecond, VolumeLimit: 128, MaxPods: 110, Host: "2 cores"}
	for _, mode := range []string{"tmpfs", "ebs"} {
		for _, n := range []int{10, 30, 60, 100} {
			for hop, kubelet := range []string{"v1.34.4", "v1.37.2"} {
				r.Points = append(r.Points, scale.Point{Mode: mode, Shape: scale.ShapePods, Volumes: n, Pods: n, VolumesPerPod: 1, RunID: "run-" + mode, Hop: hop + 1, Kubelet: kubelet,
					Verdict: reports.Pass, Values: map[string]float64{
						reports.PhaseNodeReady: 0.7, reports.PhaseMountsGone: 1.5 + 0.01*float64(n),
						reports.PhasePodDirsGone: 4 + 0.05*float64(n), reports.PhasePodsRunning: 2 + 0.03*float64(n)},
					Counters: scale.Counters{VolumesAtStart: n, Present: true, Reconstructed: float64(n)}})
			}
		}
	}
	r.FitAll()
	return r
}

// withScale writes a bench-scale result under dir and puts it on the page.
func withScale(t *testing.T, p *Page, dir string) string {
	t.Helper()
	res := filepath.Join(dir, "bench-scale", "20261201-030000")
	if _, err := scale.Write(res, scaleResult()); err != nil {
		t.Fatal(err)
	}
	found, err := scale.Find(dir)
	if err != nil || len(found) != 1 {
		t.Fatalf("Find = %v, %v", found, err)
	}
	p.AddScale(found, dir)
	return res
}

// The page shows a bench-scale result found beside the runs: in Markdown
// its tables and each chart linked where it is; in HTML each chart drawn
// inline and its tables. Without one there is no such section.
func TestScaleSection(t *testing.T) {
	p, dir := nightPage(t)
	var md, html bytes.Buffer
	if err := writeMarkdown(&md, p); err != nil {
		t.Fatal(err)
	}
	if err := writeHTML(&html, p); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(md.String(), "at scale") || strings.Contains(html.String(), `id="scale"`) {
		t.Error("a page without bench-scale results has a section for them")
	}
	withScale(t, p, dir)
	md.Reset()
	html.Reset()
	if err := writeMarkdown(&md, p); err != nil {
		t.Fatal(err)
	}
	if err := writeHTML(&html, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Reconstruction at scale\n",
		"### v1.37.2 → v1.34.4 → v1.37.2 on local\n",
		"[Its page](bench-scale/20261201-030000/bench-scale.md)",
		"#### ebs · N pods, one volume each\n\n![ebs · N pods, one volume each](bench-scale/20261201-030000/pods-ebs.svg)",
		"| 100 | 100 × 1 | hop 2 → v1.37.2 | 0.70 | 2.50 | 9.00 | 5.00 | — | — | 100 |",
		"| hop 1 → v1.34.4 | old pod dirs gone | 50.0 ms | 4 s | 1.00 | 4.5 s | linear |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("signoff.md lacks %q", want)
		}
	}
	if i, j := strings.Index(md.String(), "## Reconstruction at scale"), strings.Index(md.String(), "## ⚠️ Expected deviations"); i < 0 || j < i {
		t.Error("the section is not before the expected deviations")
	}
	h := html.String()
	if n := strings.Count(h, `<figure class="scale-figure"`); n != 2 {
		t.Errorf("%d charts in the HTML, want 2", n)
	}
	if n := strings.Count(h, `<svg xmlns="http://www.w3.org/2000/svg" class="scale-chart"`); n != 2 {
		t.Errorf("%d inline SVG charts, want 2 (not escaped)", n)
	}
	for _, want := range []string{`<h2 id="scale">`, `<table class="scale-points">`, "<td>hop 2 → v1.37.2</td>", `<td>linear</td>`, `href="bench-scale/20261201-030000/bench-scale.md"`} {
		if !strings.Contains(h, want) {
			t.Errorf("signoff.html lacks %q", want)
		}
	}
}
