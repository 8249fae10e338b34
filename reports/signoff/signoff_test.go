package signoff

import (
	"bytes"
	"errors"
	"flag"
	stdhtml "html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/reports"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// nightPage writes the night's runs into a temp dir and builds their page
// with the output in that dir.
func nightPage(t *testing.T) (*Page, string) {
	t.Helper()
	dir := t.TempDir()
	writeRuns(t, dir, nightRuns(t))
	srcs, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return Build(srcs, dir), dir
}

func cellAt(t *testing.T, p *Page, provider, kind, from, to string) *cell {
	t.Helper()
	for _, m := range p.Matrices {
		if m.Provider != provider || m.VolumeKind != kind {
			continue
		}
		for i, f := range m.Versions {
			for j, tt := range m.Versions {
				if f == from && tt == to {
					return m.Cells[i][j]
				}
			}
		}
	}
	t.Fatalf("no cell %s · %s %s → %s", provider, kind, from, to)
	return nil
}

func TestLoadOneFilePerRun(t *testing.T) {
	dir := t.TempDir()
	runs := nightRuns(t)
	writeRuns(t, dir, runs)
	// A copy of a run elsewhere in the tree (a job that gathered its
	// artifacts twice) and a run one level deeper.
	if _, err := reports.WriteAll(filepath.Join(dir, "copies", runs[0].ID), runs[0]); err != nil {
		t.Fatal(err)
	}
	deep := golden(t, "pass_csi")
	deep.ID = "20261201-020000-deep"
	if _, err := reports.WriteAll(filepath.Join(dir, "kind", "nested", deep.ID), deep); err != nil {
		t.Fatal(err)
	}
	srcs, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range srcs {
		ids = append(ids, s.Run.ID)
		if s.Report == "" {
			t.Errorf("run %s: report.md next to %s not found", s.Run.ID, s.Path)
		}
		if strings.Contains(s.Path, "latest") {
			t.Errorf("run %s read through the latest symlink: %s", s.Run.ID, s.Path)
		}
	}
	// The deep run keeps pass_csi's start, 2026-11-30 07:21, before the
	// night's.
	want := []string{deep.ID, "20261201-010000-aaaa", "20261201-010500-bbbb", "20261201-011000-cccc", "20261201-011500-dddd", "20261201-012000-eeee", "20261201-013000-ffff"}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("runs = %v, want %v (once each, in start order)", ids, want)
	}
}

func TestLoadNoRuns(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := load(dir)
	if !errors.Is(err, ErrNoRuns) {
		t.Fatalf("Load(empty dir) = %v, want ErrNoRuns", err)
	}
	for _, want := range []string{dir, "run.json", "make test-skew"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	missing := filepath.Join(dir, "nope")
	if _, err := load(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing dir) = %v, want an error naming %s", err, missing)
	}
}

func TestLoadBadRunJSON(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "x", "run.json")
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"id": "x", "hops": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := load(dir); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("Load = %v, want an error naming %s", err, bad)
	}
}

func TestMatrixAggregation(t *testing.T) {
	p, _ := nightPage(t)
	var titles []string
	for _, m := range p.Matrices {
		titles = append(titles, m.Title())
	}
	if got, want := strings.Join(titles, "; "), "kind · csi; local · csi; local · local"; got != want {
		t.Errorf("matrices = %s, want %s", got, want)
	}
	for _, tc := range []struct {
		provider, kind, from, to string
		status                   status
		hops, unreached          int
		cleanup                  string // median old pod dirs gone, "" for none
		link                     string
	}{
		// Two passing hops (3.90 s, 4.50 s) and one that failed before
		// cleanup: the worst verdict, three hops, the median of the two
		// measured, linked to the failed hop.
		{"local", "csi", "v1.37.2", "v1.36.3", fail, 3, 0, "4.20", "20261201-011000-cccc/report.md#hop-1"},
		// 12.34 s and 11.0 s; the failed run's second hop was skipped.
		{"local", "csi", "v1.36.3", "v1.37.2", pass, 2, 1, "11.7", "20261201-010000-aaaa/report.md#hop-2"},
		{"local", "csi", "v1.37.2", "v1.34.4", pass, 1, 0, "4.90", "20261201-013000-ffff/report.md#hop-1"},
		{"local", "csi", "v1.36.3", "v1.34.4", fail, 1, 0, "5.20", "20261201-013000-ffff/report.md#hop-3"},
		{"local", "csi", "v1.34.4", "v1.36.3", unreached, 0, 1, "", ""},
		{"local", "csi", "v1.36.3", "v1.36.3", notRun, 0, 0, "", ""},
		{"local", "local", "v1.36.3", "v1.37.2", deviated, 1, 0, "14.6", "20261201-011500-dddd/report.md#hop-1"},
		{"kind", "csi", "v1.37.2", "v1.36.3", pass, 1, 0, "3.90", "20261201-012000-eeee/report.md#hop-1"},
	} {
		c := cellAt(t, p, tc.provider, tc.kind, tc.from, tc.to)
		name := tc.provider + " · " + tc.kind + " " + tc.from + " → " + tc.to
		if c.Status != tc.status || len(c.Hops) != tc.hops || len(c.Unreached) != tc.unreached {
			t.Errorf("%s: status %s, %d hops, %d unreached; want %s, %d, %d", name, c.Status, len(c.Hops), len(c.Unreached), tc.status, tc.hops, tc.unreached)
		}
		got := ""
		if d, ok := c.Cleanup(); ok {
			got = reports.FormatSeconds(d)
		}
		if got != tc.cleanup {
			t.Errorf("%s: median cleanup %q, want %q", name, got, tc.cleanup)
		}
		link := ""
		if c.Worst != nil {
			link = c.Worst.Link
		}
		if link != tc.link {
			t.Errorf("%s: link %q, want %q", name, link, tc.link)
		}
	}
	if got, want := p.CountsText(), "2 fail, 1 pass with expected deviations, 5 pass, 1 unreached"; got != want {
		t.Errorf("counts = %q, want %q", got, want)
	}
	if p.Verdict != reports.Fail {
		t.Errorf("verdict = %s, want fail", p.Verdict)
	}
	if got, want := p.VerdictLine(), "FAIL: 6 runs, 9 cells (2 fail, 1 pass with expected deviations, 5 pass, 1 unreached)"; got != want {
		t.Errorf("verdict line = %q, want %q", got, want)
	}
}

func TestUnreachedReasons(t *testing.T) {
	p, _ := nightPage(t)
	c := cellAt(t, p, "local", "csi", "v1.34.4", "v1.36.3")
	if len(c.Unreached) != 1 || c.Unreached[0].Node != "skewtest-b" || !strings.Contains(c.Unreached[0].Reason, "stayed NotReady") {
		t.Errorf("unreached = %+v, want skewtest-b's reason", c.Unreached)
	}
	c = cellAt(t, p, "local", "csi", "v1.36.3", "v1.37.2")
	if len(c.Unreached) != 1 || c.Unreached[0].Run.Src.Run.ID != "20261201-011000-cccc" || !strings.Contains(c.Unreached[0].Reason, "skipped") {
		t.Errorf("unreached = %+v, want the failed run's skipped hop", c.Unreached)
	}
	var md bytes.Buffer
	if err := writeMarkdown(&md, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"🚫 unreached [1]",
		"1. 🚫 unreached: v1.34.4 → v1.36.3 (run `20261201-013000-ffff` on `skewtest-b`): node skewtest-b stayed NotReady after hop 3 failed",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("signoff.md lacks %q", want)
		}
	}
}

func TestVerdict(t *testing.T) {
	runs := nightRuns(t)
	for _, tc := range []struct {
		name string
		runs []*reports.Run
		want reports.Verdict
	}{
		{"passing runs", []*reports.Run{runs[0], runs[1], runs[4]}, reports.Pass},
		{"with documented deviations", []*reports.Run{runs[0], runs[3]}, reports.PassWithExpectedDeviations},
		{"with a failed run", runs, reports.Fail},
		{"no hop ran", []*reports.Run{{ID: "x", Provider: "local", Verdict: reports.Skipped}}, reports.Fail},
	} {
		var srcs []Source
		for _, r := range tc.runs {
			srcs = append(srcs, Source{Run: r})
		}
		if got := Build(srcs, ".").Verdict; got != tc.want {
			t.Errorf("%s: verdict %s, want %s", tc.name, got, tc.want)
		}
	}
}

// trendRun is a local CSI run with one hop whose phases are given.
func trendRun(id string, phases map[string]float64) *reports.Run {
	h := reports.Hop{Number: 1, From: "v1.37.2", To: "v1.36.3", Verdict: reports.Pass}
	for _, ph := range reports.HopPhases {
		if s, ok := phases[ph]; ok {
			h.Timings = append(h.Timings, reports.Timing{Phase: ph, Duration: secs(s)})
		}
	}
	return &reports.Run{ID: id, Provider: "local", Scenario: reports.ReconstructionScenarioPrefix + "csi", Verdict: reports.Pass, Hops: []reports.Hop{h}}
}

func TestTrends(t *testing.T) {
	for _, tc := range []struct {
		name         string
		before, now  float64
		wantWarnings int
	}{
		{"slow: +110% and +2.2 s", 2.0, 4.2, 1},
		{"not slow: the same", 4.0, 4.0, 0},
		{"faster", 6.0, 3.0, 0},
		{"noise: +137% but +0.41 s", 0.3, 0.71, 0},
		{"noise: +2 s but +20%", 10.0, 12.0, 0},
		{"just over both", 2.0, 3.01, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := Build([]Source{{Run: trendRun("now", map[string]float64{reports.PhasePodDirsGone: tc.now, reports.PhaseNodeReady: 0.7})}}, ".")
			base := Build([]Source{{Run: trendRun("base", map[string]float64{reports.PhasePodDirsGone: tc.before, reports.PhaseNodeReady: 0.7})}}, ".")
			now.Compare(base, "/nights/yesterday")
			if now.Baseline.Compared != 2 {
				t.Errorf("compared %d phase medians, want 2", now.Baseline.Compared)
			}
			if len(now.Baseline.Warnings) != tc.wantWarnings {
				t.Fatalf("warnings = %+v, want %d", now.Baseline.Warnings, tc.wantWarnings)
			}
			if now.Verdict != reports.Pass {
				t.Errorf("a trend changed the verdict to %s", now.Verdict)
			}
			if tc.wantWarnings == 1 {
				w := now.Baseline.Warnings[0]
				text := w.Text()
				for _, want := range []string{"local · csi v1.37.2 → v1.36.3", reports.PhasePodDirsGone, reports.FormatSeconds(secs(tc.before)) + " s → " + reports.FormatSeconds(secs(tc.now)) + " s"} {
					if !strings.Contains(text, want) {
						t.Errorf("warning %q lacks %q", text, want)
					}
				}
			}
		})
	}
}

func TestTrendsOnPages(t *testing.T) {
	p, dir := nightPage(t)
	compareWithBaseline(t, p, dir, "")
	if len(p.Baseline.Warnings) != 1 {
		t.Fatalf("warnings = %+v, want only v1.37.2 → v1.36.3's old pod dirs gone", p.Baseline.Warnings)
	}
	w := p.Baseline.Warnings[0]
	if w.From != "v1.37.2" || w.To != "v1.36.3" || w.Phase != reports.PhasePodDirsGone || w.Before != secs(2) || w.Now != secs(4.2) {
		t.Errorf("warning = %+v", w)
	}
	var md, html bytes.Buffer
	if err := writeMarkdown(&md, p); err != nil {
		t.Fatal(err)
	}
	if err := writeHTML(&html, p); err != nil {
		t.Fatal(err)
	}
	for name, page := range map[string]string{"signoff.md": md.String(), "signoff.html": stdhtml.UnescapeString(html.String())} {
		if !strings.Contains(page, "old pod dirs gone 2.00 s → 4.20 s (+110%, +2.20 s") {
			t.Errorf("%s does not show the slowdown with both figures", name)
		}
	}
}

func TestMarkdownGolden(t *testing.T) {
	p, dir := nightPage(t)
	// The page names the baseline as the user gave it; keep it stable.
	compareWithBaseline(t, p, dir, "_artifacts/yesterday")
	var b bytes.Buffer
	if err := writeMarkdown(&b, p); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "night.md.golden")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./reports/signoff -update to create it)", err)
	}
	if !bytes.Equal(want, b.Bytes()) {
		t.Errorf("%s differs from the output (run go test ./reports/signoff -update after checking); got:\n%s", golden, b.String())
	}
}

// attrURL matches src, href, xlink:href and action attributes and CSS
// url() and @import, which is where a page loads or points at anything.
var attrURL = regexp.MustCompile(`(?i)(?:\s(?:src|href|xlink:href|action|poster|srcset)\s*=\s*["']?([^"'\s>]*))|url\(\s*['"]?([^'")]*)|@import`)

func TestHTMLSelfContained(t *testing.T) {
	p, _, _ := nightWithMutation(t)
	var b bytes.Buffer
	if err := writeHTML(&b, p); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	links := 0
	for _, m := range attrURL.FindAllStringSubmatch(html, -1) {
		ref := m[1] + m[2]
		if strings.HasPrefix(m[0], "@") || strings.HasPrefix(strings.ToLower(m[0]), "url(") {
			t.Errorf("HTML loads CSS from elsewhere: %q", m[0])
			continue
		}
		if regexp.MustCompile(`(?i)^([a-z][a-z0-9+.-]*:|//)`).MatchString(ref) {
			t.Errorf("HTML refers outside itself: %q", m[0])
			continue
		}
		if strings.HasPrefix(ref, "#") {
			continue // a place on the page itself
		}
		if !strings.Contains(ref, "report.md") && !strings.HasSuffix(ref, "/"+reports.MutationMarkdownFileName) && !strings.HasSuffix(ref, "/"+reports.BatchMarkdownFileName) {
			t.Errorf("HTML link %q is not a relative link to a run's report or a measurement's pages", ref)
		}
		links++
	}
	if links < 6 {
		t.Errorf("found %d links to reports, want at least one per run", links)
	}
	for _, tag := range []string{"<script", "<link", "<img", "<iframe", "@font-face"} {
		if strings.Contains(html, tag) {
			t.Errorf("HTML contains %s", tag)
		}
	}
}

func TestHTMLEscapes(t *testing.T) {
	r := trendRun("20261201-<b>", map[string]float64{reports.PhasePodDirsGone: 1})
	r.Verdict, r.Failure = reports.Fail, `<script>alert("x")</script>`
	r.Hops[0].To = `v1.36.3"><img src=x>`
	p := Build([]Source{{Run: r}}, ".")
	var b bytes.Buffer
	if err := writeHTML(&b, p); err != nil {
		t.Fatal(err)
	}
	checkEscaped(t, b.String())
	if !strings.Contains(b.String(), "&lt;script&gt;") {
		t.Errorf("the failure text is missing from the page")
	}
}

// checkEscaped fails when the page carries the tags the escaping tests
// plant unescaped.
func checkEscaped(t *testing.T, html string) {
	t.Helper()
	for _, bad := range []string{"<script>", "<img src=x>", "<b>"} {
		if strings.Contains(html, bad) {
			t.Errorf("HTML carries %q unescaped", bad)
		}
	}
}

func TestSortVersions(t *testing.T) {
	vs := []string{"custom", "v1.37.2", "v1.9.0", "v1.10.1", "v1.36.3-rc.0+abc", "v1.34.4"}
	sortVersions(vs)
	if got, want := strings.Join(vs, " "), "v1.9.0 v1.10.1 v1.34.4 v1.36.3-rc.0+abc v1.37.2 custom"; got != want {
		t.Errorf("sorted = %s, want %s", got, want)
	}
}
