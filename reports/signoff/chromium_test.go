package signoff

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"sigs.k8s.io/skewtest/internal/testgate"
	"sigs.k8s.io/skewtest/reports"
)

// chromiumInstall is how to get the browser the test drives.
const chromiumInstall = "apt-get install -y --no-install-recommends chromium (scripts/install-deps.sh does)"

// findChromium is Debian's chromium, or skips the test loudly; where every
// test must run (CI) a missing browser fails it, since CI installs it.
func findChromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		testgate.SkipOrFail(t, fmt.Sprintf("the sign-off page was NOT checked in a browser: chromium not found (%v)", err),
			"install it: "+chromiumInstall)
	}
	return p
}

// domCell is what the page's DOM says about one matrix cell.
type domCell struct {
	Matrix, From, To, Status, Text, Background, Href string
}

// domMutantCell is what the page's DOM says about one mutation grid cell.
type domMutantCell struct {
	Placement, Kubelet, Entry, Look, Text, Background, Href string
}

// domChart is what the page's DOM says about one bench-scale chart.
type domChart struct {
	Mode, Shape                string
	Width, Height              float64
	Lines, Points, Ticks, Rows int
}

// TestHTMLInChromium opens the night's signoff.html in headless Chromium,
// reads the matrix cells and their verdicts from the DOM, the bench-scale
// charts and the mutation grids drawn beside them, checks that the page
// logs no error and loads nothing but itself, and saves a screenshot.
func TestHTMLInChromium(t *testing.T) {
	browser := findChromium(t)
	p, dir, mut := nightWithMutation(t)
	compareWithBaseline(t, p, dir, "")
	withScale(t, p, dir)
	paths, err := Write(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	page := paths[1]

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browser),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()

	// The listener runs on the tab's reader goroutine: it only records.
	var mu sync.Mutex
	var problems []string
	listen := func(ev any) {
		var pr string
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				pr = fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			pr = "uncaught exception: " + e.ExceptionDetails.Text
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
				pr = fmt.Sprintf("browser log %s: %s %s", e.Entry.Level, e.Entry.Text, e.Entry.URL)
			}
		case *network.EventRequestWillBeSent:
			if !strings.HasPrefix(e.Request.URL, "file://") {
				pr = "request outside the file: " + e.Request.URL
			}
		}
		if pr != "" {
			mu.Lock()
			problems = append(problems, pr)
			mu.Unlock()
		}
	}
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithListener(listen))
	defer bcancel()

	err = chromedp.Do(bctx,
		chromedp.Navigate("file://"+page),
		chromedp.WaitVisible("#verdict"),
	)
	if err != nil {
		t.Fatalf("chromium: open %s: %v", page, err)
	}
	// The page is loaded: each query gets a short time, so a missing
	// element fails the test at once instead of waiting for it.
	qctx, qcancel := context.WithTimeout(bctx, 10*time.Second)
	defer qcancel()
	verdict, err := chromedp.Run(qctx, chromedp.Text("#verdict"))
	if err != nil {
		t.Fatal(err)
	}
	trend, err := chromedp.Run(qctx, chromedp.Text("#trends"))
	if err != nil {
		t.Fatal(err)
	}
	cellsJSON, err := chromedp.Run(qctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll("td.cell")].map(td => ({
		Matrix: td.closest("section").id,
		From: td.dataset.from, To: td.dataset.to, Status: td.dataset.status,
		Text: td.textContent.replace(/\s+/g, " ").trim(),
		Background: getComputedStyle(td).backgroundImage + " " + getComputedStyle(td).backgroundColor,
		Href: (td.querySelector("a") || {}).href || ""})))`))
	if err != nil {
		t.Fatal(err)
	}
	chartsJSON, err := chromedp.Run(qctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll("figure.scale-figure")].map(f => {
		const svg = f.querySelector("svg"), box = svg.getBoundingClientRect();
		return {Mode: f.dataset.mode, Shape: f.dataset.shape, Width: box.width, Height: box.height,
			Lines: svg.querySelectorAll("g.series polyline").length, Points: svg.querySelectorAll("g.series circle").length,
			Ticks: svg.querySelectorAll(".tick-label").length,
			Rows: f.parentElement.querySelectorAll("table.scale-points tbody tr").length};
	}))`))
	if err != nil {
		t.Fatal(err)
	}
	mutantJSON, err := chromedp.Run(qctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll("table.mgrid td.mc")].map(td => ({
		Placement: td.closest("table").dataset.placement, Kubelet: td.closest("tr").dataset.kubelet,
		Entry: td.dataset.entry, Look: td.dataset.look, Text: td.textContent.trim(),
		Background: getComputedStyle(td).backgroundImage + " " + getComputedStyle(td).backgroundColor,
		Href: (td.querySelector("a") || {}).href || ""})))`))
	if err != nil {
		t.Fatal(err)
	}
	through, err := chromedp.Run(qctx, chromedp.Text("#mutants-through"))
	if err != nil {
		t.Fatal(err)
	}
	// A full-page screenshot of a long page takes a while on a small
	// machine: it gets its own, longer bound.
	sctx, scancel := context.WithTimeout(bctx, 60*time.Second)
	defer scancel()
	start := time.Now()
	shot, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot took %s", time.Since(start).Round(time.Millisecond))
	shotPath := saveScreenshot(t, shot)
	t.Logf("screenshot of the sign-off page: %s", shotPath)

	mu.Lock()
	for _, pr := range problems {
		t.Errorf("page: %s", pr)
	}
	mu.Unlock()

	if !strings.Contains(verdict, "FAIL") {
		t.Errorf("verdict banner = %q, want FAIL", verdict)
	}
	if !strings.Contains(trend, "old pod dirs gone 2.00 s → 4.20 s") {
		t.Errorf("trends box = %q, want the slowdown", trend)
	}
	var cells []domCell
	if err := json.Unmarshal([]byte(cellsJSON), &cells); err != nil {
		t.Fatal(err)
	}
	// kind · csi and local · local are 2×2, local · csi is 3×3.
	if len(cells) != 17 {
		t.Fatalf("found %d matrix cells in the DOM, want 17", len(cells))
	}
	byKey := map[string]domCell{}
	backgrounds := map[string]string{}
	for _, c := range cells {
		byKey[c.Matrix+" "+c.From+" "+c.To] = c
		if prev, ok := backgrounds[c.Status]; ok && prev != c.Background {
			t.Errorf("status %s has two looks: %q and %q", c.Status, prev, c.Background)
		}
		backgrounds[c.Status] = c.Background
	}
	for _, tc := range []struct{ key, status, text, href string }{
		{"m-local-csi v1.37.2 v1.36.3", "fail", "✗ fail 4.20 s × 3 hops", "20261201-011000-cccc/report.md#hop-1"},
		{"m-local-csi v1.36.3 v1.37.2", "pass", "✓ pass 11.7 s × 2 hops + 1 unreached", "20261201-010000-aaaa/report.md#hop-2"},
		{"m-local-csi v1.34.4 v1.36.3", "unreached", "⊘ unreached", ""},
		{"m-local-csi v1.36.3 v1.34.4", "fail", "✗ fail 5.20 s", "20261201-013000-ffff/report.md#hop-3"},
		{"m-local-local v1.36.3 v1.37.2", "pass-with-expected-deviations", "⚠ pass with expected deviations 14.6 s", "20261201-011500-dddd/report.md#hop-1"},
		{"m-kind-csi v1.37.2 v1.36.3", "pass", "✓ pass 3.90 s", "20261201-012000-eeee/report.md#hop-1"},
		{"m-kind-csi v1.36.3 v1.36.3", "not-run", "· not run", ""},
	} {
		c, ok := byKey[tc.key]
		if !ok {
			t.Errorf("no cell %s in the DOM", tc.key)
			continue
		}
		if c.Status != tc.status || c.Text != tc.text {
			t.Errorf("cell %s: status %q text %q, want %q %q", tc.key, c.Status, c.Text, tc.status, tc.text)
		}
		if tc.href == "" {
			if c.Href != "" {
				t.Errorf("cell %s links to %s, want no link", tc.key, c.Href)
			}
			continue
		}
		want := "file://" + filepath.ToSlash(filepath.Join(dir, tc.href))
		if c.Href != want {
			t.Errorf("cell %s links to %s, want %s", tc.key, c.Href, want)
		}
		if _, err := os.Stat(filepath.Join(dir, strings.SplitN(tc.href, "#", 2)[0])); err != nil {
			t.Errorf("cell %s links to a report that is not there: %v", tc.key, err)
		}
	}
	var charts []domChart
	if err := json.Unmarshal([]byte(chartsJSON), &charts); err != nil {
		t.Fatal(err)
	}
	if len(charts) != 2 {
		t.Fatalf("%d bench-scale charts drawn, want 2: %+v", len(charts), charts)
	}
	for i, mode := range []string{"tmpfs", "ebs"} {
		c := charts[i]
		// 4 times × 2 hops, at 4 sizes each; both axes ticked; the
		// section's tables hold both modes' 16 points.
		if c.Mode != mode || c.Width < 300 || c.Height < 200 || c.Lines != 8 || c.Points != 32 || c.Ticks < 8 || c.Rows != 16 {
			t.Errorf("chart %d: %+v, want the %s pods chart drawn with 8 lines of 4 points", i, c, mode)
		}
	}
	checkMutationGrids(t, mutantJSON, through, dir, mut)
	if len(backgrounds) != 5 {
		t.Errorf("statuses seen: %v, want all five", backgrounds)
	}
	seen := map[string]string{}
	for st, bg := range backgrounds {
		if other, dup := seen[bg]; dup {
			t.Errorf("statuses %s and %s share the look %q; colour must tell them apart", st, other, bg)
		}
		seen[bg] = st
	}
}

// saveScreenshot writes the PNG into $ARTIFACTS, or a temp dir when it is
// unset, and returns its path.
func saveScreenshot(t *testing.T, png []byte) string {
	t.Helper()
	dir := os.Getenv("ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "skewtest-signoff-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "signoff-screenshot.png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Println("signoff: screenshot saved to", p)
	return p
}

// checkMutationGrids checks the mutation grids as the browser drew them:
// every cell of both placements, killed, masked and survived cells each
// in a colour of their own, and links to the runs' reports that are
// there.
func checkMutationGrids(t *testing.T, cellsJSON, through, dir string, m *reports.Mutation) {
	t.Helper()
	var cells []domMutantCell
	if err := json.Unmarshal([]byte(cellsJSON), &cells); err != nil {
		t.Fatal(err)
	}
	// The control and the 17 scored mutants, in two placements.
	if want := 2 * 18 * len(mutationEntries); len(cells) != want {
		t.Fatalf("found %d mutation grid cells in the DOM, want %d", len(cells), want)
	}
	looks := map[string]string{}
	byKey := map[string]domMutantCell{}
	for _, c := range cells {
		byKey[c.Placement+" "+c.Kubelet+" "+c.Entry] = c
		if prev, ok := looks[c.Look]; ok && prev != c.Background && c.Kubelet != "control" {
			t.Errorf("mutation cells %s have two looks: %q and %q", c.Look, prev, c.Background)
		}
		if c.Kubelet != "control" {
			looks[c.Look] = c.Background
		}
	}
	for _, a := range []string{reports.MutantKilled, reports.MutantMasked, reports.MutantSurvived, reports.CellSame} {
		for _, b := range []string{reports.MutantKilled, reports.MutantMasked, reports.MutantSurvived, reports.CellSame} {
			if a < b && looks[a] == looks[b] {
				t.Errorf("mutation cells %s and %s share the look %q; colour must tell them apart", a, b, looks[a])
			}
		}
	}
	for _, tc := range []struct{ placement, kubelet, entry, look, text string }{
		{"upgrade-target", "revert-130335-pvc-protection", "pvc-terminating", reports.MutantKilled, "☠"},
		{"upgrade-target", "revert-130335-pvc-protection", "reboot", reports.CellNotRun, "–"},
		{"middle", "reconstruct-counter-never-incremented", "reboot", reports.MutantSurvived, "="},
		{"middle", "unmount-before-desired-state-populated", "apiserver-unreachable", reports.MutantMasked, "≠"},
		{"upgrade-target", "reconstruction-metrics-unregistered", "vol-data-empty", reports.CellError, "!"},
		{"middle", "control", "reboot", reports.CellSame, "⚠"},
	} {
		c, ok := byKey[tc.placement+" "+tc.kubelet+" "+tc.entry]
		if !ok {
			t.Errorf("no mutation cell %s %s %s in the DOM", tc.placement, tc.kubelet, tc.entry)
			continue
		}
		if c.Look != tc.look || c.Text != tc.text {
			t.Errorf("mutation cell %s %s %s: %q %q, want %q %q", tc.placement, tc.kubelet, tc.entry, c.Look, c.Text, tc.look, tc.text)
		}
		report := cellReport(t, m, tc.kubelet, tc.placement, tc.entry)
		if report == "" {
			if c.Href != "" {
				t.Errorf("mutation cell %s %s %s links to %s, want no link", tc.placement, tc.kubelet, tc.entry, c.Href)
			}
			continue
		}
		if want := "file://" + filepath.ToSlash(filepath.Join(dir, report, reports.MarkdownFileName)); c.Href != want {
			t.Errorf("mutation cell %s %s %s links to %s, want %s", tc.placement, tc.kubelet, tc.entry, c.Href, want)
		}
		if tc.kubelet == "control" {
			continue // the fixture leaves the control's runs out
		}
		if _, err := os.Stat(filepath.Join(dir, report, reports.MarkdownFileName)); err != nil {
			t.Errorf("mutation cell %s %s %s links to a report that is not there: %v", tc.placement, tc.kubelet, tc.entry, err)
		}
	}
	for _, want := range []string{"The checks did not kill 3 mutants", "reconstruct-counter-never-incremented = survived", "unmount-before-desired-state-populated ≠ masked"} {
		if !strings.Contains(strings.Join(strings.Fields(through), " "), want) {
			t.Errorf("the warning at the top = %q, want %q in it", through, want)
		}
	}
}
