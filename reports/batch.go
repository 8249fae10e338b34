package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Batch is the record of many runs on the nodes of shared clusters
// (skewrun.RunBatch): which run ran on which node and when, and what each
// cluster cost. Each run keeps its own report; this is the schedule
// around them.
type Batch struct {
	ID       string    `json:"id"`
	Provider string    `json:"provider"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Nodes is how many nodes ran runs at once (BATCH_NODES).
	Nodes    int            `json:"nodes"`
	Clusters []BatchCluster `json:"clusters"`
	Jobs     []BatchJob     `json:"jobs"`
	// Failure says why the batch could not do its work (a cluster that
	// did not come up), "" when it could.
	Failure string `json:"failure,omitempty"`
}

// BatchCluster is one cluster a batch brought up: its test nodes, its
// bring-up and teardown, and the nodes it retired.
type BatchCluster struct {
	Number   int           `json:"number"`
	Nodes    []string      `json:"nodes"`
	Up       time.Duration `json:"up"`
	Teardown time.Duration `json:"teardown"`
	// Started and Finished bound the cluster from bring-up to teardown.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Retired are nodes that took no more runs, with why ("skewtest-worker3:
	// left pods/<uid> of a run that passed").
	Retired []string `json:"retired,omitempty"`
	// Logs is the cluster's log directory, relative to the batch's.
	Logs string `json:"logs,omitempty"`
}

// BatchJob is one run of a batch.
type BatchJob struct {
	Name     string `json:"name"`
	Scenario string `json:"scenario,omitempty"`
	// RunID names the run's report directory; empty when it never ran.
	RunID   string `json:"runId,omitempty"`
	Cluster int    `json:"cluster,omitempty"`
	Node    string `json:"node,omitempty"`
	// Started and Finished are the run's, zero when it never ran.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Hold is what the batch expected the run to hold its node, by which
	// it ordered the runs.
	Hold    time.Duration `json:"hold"`
	Verdict Verdict       `json:"verdict"`
	// Failure is the run's first failure, or why it did not run.
	Failure string `json:"failure,omitempty"`
	// Attempt counts from 1; a run the control plane failed runs again.
	Attempt int `json:"attempt,omitempty"`
}

// Took is the job's duration, zero when it did not run.
func (j BatchJob) Took() time.Duration {
	if j.Started.IsZero() || j.Finished.IsZero() {
		return 0
	}
	return j.Finished.Sub(j.Started)
}

// Took is the batch's duration.
func (b *Batch) Took() time.Duration { return b.Finished.Sub(b.Started) }

// SumOfRuns is the jobs' durations added up: what the same runs would take
// one after another, without the clusters between them.
func (b *Batch) SumOfRuns() time.Duration {
	var d time.Duration
	for _, j := range b.Jobs {
		d += j.Took()
	}
	return d
}

// Failed reports whether any job failed or did not run.
func (b *Batch) Failed() bool {
	if b.Failure != "" {
		return true
	}
	for _, j := range b.Jobs {
		if j.Verdict != Pass && j.Verdict != PassWithExpectedDeviations {
			return true
		}
	}
	return false
}

// The batch's files in its directory.
const (
	BatchMarkdownFileName = "batch.md"
	BatchJSONFileName     = "batch.json"
	BatchSVGFileName      = "batch.svg"
)

// WriteBatch writes the batch's Markdown, JSON and SVG schedule into dir.
func WriteBatch(dir string, b *Batch) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("reports: creating batch dir: %w", err)
	}
	var paths []string
	var errs []error
	for _, f := range []struct {
		name  string
		write func(io.Writer, *Batch) error
	}{
		{BatchMarkdownFileName, WriteBatchMarkdown},
		{BatchJSONFileName, func(w io.Writer, b *Batch) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(b)
		}},
		{BatchSVGFileName, WriteBatchSVG},
	} {
		p := filepath.Join(dir, f.name)
		if err := WriteFileAtomic(p, func(w io.Writer) error { return f.write(w, b) }); err != nil {
			errs = append(errs, fmt.Errorf("reports: writing %s: %w", p, err))
			continue
		}
		paths = append(paths, p)
	}
	return paths, errors.Join(errs...)
}

// WriteBatchMarkdown writes the batch's summary: the clusters, then one
// row per run in start order, with its node, when it started from the
// batch's start, how long it took and its verdict, linking its report.
func WriteBatchMarkdown(w io.Writer, b *Batch) error {
	m := &mdWriter{}
	verdict := "✅ PASS"
	if b.Failed() {
		verdict = "❌ FAIL"
	}
	m.printf("# skewtest batch `%s`: %s\n\n", b.ID, verdict)
	m.printf("%d runs on %d nodes at once (provider %s) in %ss; one after another they took %ss.\n\n",
		len(b.Jobs), b.Nodes, b.Provider, fmtSeconds(b.Took()), fmtSeconds(b.SumOfRuns()))
	if b.Failure != "" {
		m.printf("**%s**\n\n", mdText(b.Failure))
	}
	m.line("![schedule](" + BatchSVGFileName + ")")
	m.line("")
	var rows [][]string
	for _, c := range b.Clusters {
		retired := strings.Join(c.Retired, "; ")
		if retired == "" {
			retired = "none"
		}
		rows = append(rows, []string{fmt.Sprint(c.Number), fmt.Sprint(len(c.Nodes)), fmtSeconds(c.Up), fmtSeconds(c.Teardown), c.Logs, retired})
	}
	m.table([]string{"Cluster", "Nodes", "bring-up (s)", "teardown (s)", "logs", "nodes retired"}, rows)
	rows = nil
	for _, j := range b.sortedJobs() {
		start, took, report, node := "—", "—", "—", "—"
		if !j.Started.IsZero() {
			start = fmtSeconds(j.Started.Sub(b.Started))
		}
		if d := j.Took(); d > 0 {
			took = fmtSeconds(d)
		}
		if j.RunID != "" {
			report = fmt.Sprintf("[%s](../%s/%s)", j.RunID, j.RunID, MarkdownFileName)
		}
		if j.Node != "" {
			node = j.Node
			if len(b.Clusters) > 1 {
				node = fmt.Sprintf("%d/%s", j.Cluster, j.Node)
			}
		}
		name := j.Name
		if j.Attempt > 1 {
			name += fmt.Sprintf(" (attempt %d)", j.Attempt)
		}
		v := verdictLabel(j.Verdict)
		if j.Verdict == "" {
			v = "⏭️ not run"
		}
		if j.Failure != "" && j.Verdict != Pass && j.Verdict != PassWithExpectedDeviations {
			v += ": " + j.Failure
		}
		rows = append(rows, []string{name, node, start, took, fmtSeconds(j.Hold), v, report})
	}
	m.table([]string{"Run", "Node", "started (s)", "took (s)", "expected hold (s)", "Verdict", "Report"}, rows)
	_, err := io.WriteString(w, m.b.String())
	return err
}

// sortedJobs are the jobs in start order; those that never ran last.
func (b *Batch) sortedJobs() []BatchJob {
	jobs := append([]BatchJob(nil), b.Jobs...)
	sort.SliceStable(jobs, func(i, k int) bool {
		a, c := jobs[i].Started, jobs[k].Started
		if a.IsZero() != c.IsZero() {
			return !a.IsZero()
		}
		return a.Before(c)
	})
	return jobs
}

// The schedule plot's geometry, in SVG user units.
const (
	ganttLabelWidth = 190
	ganttWidth      = 960
	ganttRow        = 26
	ganttBar        = 18
	ganttTop        = 40
	ganttAxis       = 40
	ganttLegend     = 24
)

// WriteBatchSVG draws the schedule: a row per node of each cluster, a bar
// per run from its start to its end, coloured by verdict and labelled
// with its name, on a time axis in seconds from the batch's start.
func WriteBatchSVG(w io.Writer, b *Batch) error {
	type row struct {
		label string
		jobs  []BatchJob
	}
	var rows []row
	index := map[string]int{}
	for _, c := range b.Clusters {
		for _, n := range c.Nodes {
			key := fmt.Sprintf("%d/%s", c.Number, n)
			index[key] = len(rows)
			label := n
			if len(b.Clusters) > 1 {
				label = fmt.Sprintf("cluster %d: %s", c.Number, n)
			}
			rows = append(rows, row{label: label})
		}
	}
	end := b.Took()
	for _, j := range b.Jobs {
		if j.Started.IsZero() {
			continue
		}
		if i, ok := index[fmt.Sprintf("%d/%s", j.Cluster, j.Node)]; ok {
			rows[i].jobs = append(rows[i].jobs, j)
		}
		if d := j.Finished.Sub(b.Started); d > end {
			end = d
		}
	}
	total := end.Seconds()
	if total <= 0 {
		total = 1
	}
	plot := float64(ganttWidth - ganttLabelWidth - 20)
	x := func(t time.Time) float64 { return ganttLabelWidth + plot*t.Sub(b.Started).Seconds()/total }
	height := ganttTop + len(rows)*ganttRow + ganttAxis + ganttLegend
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", ganttWidth, height, ganttWidth, height)
	fmt.Fprintf(&s, `<title>skewtest batch %s: %d runs on %d nodes in %.1f s (one after another: %.1f s)</title>`+"\n", html.EscapeString(b.ID), len(b.Jobs), b.Nodes, b.Took().Seconds(), b.SumOfRuns().Seconds())
	fmt.Fprintf(&s, `<text x="%d" y="20" font-size="14" font-weight="bold">%d runs on %d nodes: %.1f s (one after another: %.1f s)</text>`+"\n", 10, len(b.Jobs), b.Nodes, b.Took().Seconds(), b.SumOfRuns().Seconds())
	for _, c := range b.Clusters {
		fmt.Fprintf(&s, `<rect class="cluster" x="%.1f" y="%d" width="%.1f" height="%d" fill="#eeeeee"/>`+"\n",
			x(c.Started), ganttTop-4, maxf(x(c.Finished)-x(c.Started), 1), len(rows)*ganttRow+4)
	}
	for i, r := range rows {
		y := ganttTop + i*ganttRow
		fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", ganttLabelWidth-8, y+ganttBar-5, html.EscapeString(r.label))
		for _, j := range r.jobs {
			x0, x1 := x(j.Started), x(j.Finished)
			fmt.Fprintf(&s, `<g class="run"><title>%s: %s, %.1f s from %.1f s</title><rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="#333333" stroke-width="0.5"/>`,
				html.EscapeString(j.Name), j.Verdict, j.Took().Seconds(), j.Started.Sub(b.Started).Seconds(), x0, y, maxf(x1-x0, 1), ganttBar, verdictColour(j.Verdict))
			fmt.Fprintf(&s, `<text x="%.1f" y="%d" font-size="10">%s</text></g>`+"\n", x0+3, y+ganttBar-5, html.EscapeString(shorten(j.Name, int((x1-x0)/6))))
		}
	}
	axisY := ganttTop + len(rows)*ganttRow + 6
	fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%.1f" y2="%d" stroke="#333333"/>`+"\n", ganttLabelWidth, axisY, ganttLabelWidth+plot, axisY)
	step := tickStep(total)
	for t := 0.0; t <= total+1e-9; t += step {
		tx := ganttLabelWidth + plot*t/total
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333333"/><text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", tx, axisY, tx, axisY+4, tx, axisY+16, t)
	}
	fmt.Fprintf(&s, `<text x="%.1f" y="%d" text-anchor="middle">seconds from the batch's start</text>`+"\n", ganttLabelWidth+plot/2, axisY+32)
	lx := float64(10)
	for _, v := range []Verdict{Pass, PassWithExpectedDeviations, Fail} {
		fmt.Fprintf(&s, `<rect class="legend" x="%.1f" y="%d" width="12" height="12" fill="%s" stroke="#333333" stroke-width="0.5"/><text x="%.1f" y="%d">%s</text>`+"\n",
			lx, axisY+42, verdictColour(v), lx+16, axisY+52, html.EscapeString(verdictText(v)))
		lx += 24 + 7*float64(len(verdictText(v)))
	}
	s.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.String())
	return err
}

// verdictText is a verdict in the plot's legend.
func verdictText(v Verdict) string {
	switch v {
	case Pass:
		return "pass"
	case PassWithExpectedDeviations:
		return "pass with expected deviations"
	}
	return "fail"
}

func verdictColour(v Verdict) string {
	switch v {
	case Pass:
		return "#8fd18f"
	case PassWithExpectedDeviations:
		return "#f2d47a"
	case Fail:
		return "#e8877f"
	}
	return "#cccccc"
}

// tickStep is a round step giving about ten ticks over total.
func tickStep(total float64) float64 {
	for _, s := range []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600} {
		if total/s <= 12 {
			return s
		}
	}
	return 7200
}

// shorten cuts s to n runes, with an ellipsis.
func shorten(s string, n int) string {
	r := []rune(s)
	if n < 1 {
		return ""
	}
	if len(r) <= n {
		return s
	}
	if n == 1 {
		return "…"
	}
	return string(r[:n-1]) + "…"
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}
