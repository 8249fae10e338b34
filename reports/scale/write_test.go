package scale

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The Markdown has a section per panel, with its chart, a row per point
// whose cells are the point's values and counter check, and a row per fit
// with its verdict; then the failed runs.
func TestMarkdown(t *testing.T) {
	r := fixture()
	r.Failures = []string{"tmpfs pods N=100: run 20261203-1: old pods not cleaned up"}
	md := r.Markdown(2, func(p Panel) string { return "charts/" + p.ChartFile() })
	sections := strings.Split(md, "\n## ")
	if len(sections) != 4 {
		t.Fatalf("%d sections, want 3 panels and the failures:\n%s", len(sections), md)
	}
	for _, want := range []string{"tmpfs · N pods, one volume each", "ebs · N pods, one volume each", "tmpfs · one pod with N volumes", "Failed runs"} {
		if !strings.Contains(md, "## "+want+"\n") {
			t.Errorf("no section %q", want)
		}
	}
	if !strings.Contains(md, "![ebs · N pods, one volume each](charts/pods-ebs.svg)") {
		t.Error("the ebs pods chart is not linked")
	}
	rows := func(section, prefix string) []string {
		var out []string
		for _, l := range strings.Split(section, "\n") {
			if strings.HasPrefix(l, prefix) {
				out = append(out, l)
			}
		}
		return out
	}
	ebs := sections[1]
	if got := rows(ebs, "| 100 | 100 × 1 |"); len(got) != 2 ||
		!strings.Contains(got[0], "| hop 1 → v1.34.4 | 0.71 | 2.50 | 9.00 | 5.00 | 6.00 | 90 | 100 | 0 (0) | ⚠ 0 counted of 100 found: the metrics registration race, the kubelet's log shows them all | run-ebs |") {
		t.Errorf("ebs rows at 100 volumes:\n%s", strings.Join(got, "\n"))
	}
	if got := rows(ebs, "| 60 | 60 × 1 | hop 2"); len(got) != 1 || !strings.Contains(got[0], "✗ 59 reconstructed (0 errors) of 60 found") {
		t.Errorf("the mismatch at 60 volumes: %q", got)
	}
	if got := rows(ebs, "| hop 2 → v1.37.2 | old pod dirs gone |"); len(got) != 1 || !strings.Contains(got[0], "| 50.0 ms | 4.01 s | 1.00 | 4.5 s | linear | R² 1.00,") {
		t.Errorf("the fit of old pod dirs gone: %q", got)
	}
	vol := sections[2]
	if got := rows(vol, "| 128 | 1 × 128 |"); len(got) != 1 || !strings.Contains(got[0], "| — | — | 35.77 | — |") || !strings.Contains(got[0], "· this kubelet does not expose") {
		t.Errorf("the one-pod row at 128 volumes: %q", got)
	}
	if got := rows(vol, "| hop 1 → v1.34.4 | old pod dirs gone |"); len(got) != 1 || !strings.Contains(got[0], "| not linear |") || !strings.Contains(got[0], "faster than linearly") {
		t.Errorf("the parabola's fit: %q", got)
	}
	if !strings.Contains(sections[3], "- tmpfs pods N=100: run 20261203-1: old pods not cleaned up") {
		t.Errorf("failures: %q", sections[3])
	}
	if md := r.Markdown(3, func(Panel) string { return "" }); strings.Contains(md, "![") || !strings.Contains(md, "### tmpfs") {
		t.Error("Markdown without chart links, at level 3, still links charts or keeps level 2")
	}
}

// Write writes the JSON, the page and a chart per panel; Read gives the
// same result back; Find finds it below a directory, and nothing where
// there is none.
func TestWriteReadFind(t *testing.T) {
	r := fixture()
	dir := t.TempDir()
	out := filepath.Join(dir, "bench-scale", "20261203-180000")
	paths, err := Write(out, r)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	if want := []string{JSONFileName, MarkdownFileName, "pods-tmpfs.svg", "pods-ebs.svg", "volumes-tmpfs.svg"}; !reflect.DeepEqual(names, want) {
		t.Errorf("wrote %v, want %v", names, want)
	}
	page, err := os.ReadFile(filepath.Join(out, MarkdownFileName))
	if err != nil || !strings.Contains(string(page), "](pods-ebs.svg)") || !strings.Contains(string(page), "`make bench-scale PLAN=v1.37.2,v1.34.4,v1.37.2`") {
		t.Errorf("the page does not link its charts or give its command: %v", err)
	}
	chart, err := os.ReadFile(filepath.Join(out, "volumes-tmpfs.svg"))
	if err != nil {
		t.Fatal(err)
	}
	parseSVG(t, string(chart))

	got, err := Read(filepath.Join(out, JSONFileName))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(r)
		t.Errorf("read back\n%s\nwant\n%s", a, b)
	}
	var raw map[string]any
	b, _ := os.ReadFile(filepath.Join(out, JSONFileName))
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"plan", "command", "points", "fits", "volumeLimit"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("the JSON has no %q", k)
		}
	}
	fit := raw["fits"].([]any)[0].(map[string]any)
	for _, k := range []string{"slope", "intercept", "r2", "verdict", "why", "series"} {
		if _, ok := fit[k]; !ok {
			t.Errorf("a fit in the JSON has no %q: %v", k, fit)
		}
	}

	older := *r
	older.Started = r.Started.Add(-time.Hour)
	if _, err := Write(filepath.Join(dir, "older"), &older); err != nil {
		t.Fatal(err)
	}
	found, err := Find(dir)
	if err != nil || len(found) != 2 || !found[0].Result.Started.Equal(older.Started) || found[1].Path != filepath.Join(out, JSONFileName) {
		t.Errorf("Find = %+v, %v; want the older result, then the other", found, err)
	}
	if found, err := Find(t.TempDir()); err != nil || len(found) != 0 {
		t.Errorf("Find in an empty dir = %v, %v", found, err)
	}
	if _, err := Find(filepath.Join(dir, "missing")); err == nil {
		t.Error("Find of a missing dir found nothing wrong")
	}
	if err := os.WriteFile(filepath.Join(dir, "older", JSONFileName), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(dir); err == nil || !strings.Contains(err.Error(), filepath.Join("older", JSONFileName)) {
		t.Errorf("a broken result: %v, want an error naming it", err)
	}
}
