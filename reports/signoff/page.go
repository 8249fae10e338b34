package signoff

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/reports"
)

// status is what a matrix cell shows.
type status string

// Cell statuses, from best to worst news; NotRun is a cell no run planned.
const (
	notRun    status = "not-run"
	unreached status = "unreached"
	pass      status = status(reports.Pass)
	deviated  status = status(reports.PassWithExpectedDeviations)
	fail      status = status(reports.Fail)
)

// severity orders statuses so that a cell shows its worst one.
var severity = map[status]int{notRun: 0, unreached: 1, pass: 2, deviated: 3, fail: 4}

// Label is the status in words, for people.
func (s status) Label() string {
	switch s {
	case pass:
		return "pass"
	case deviated:
		return "pass with expected deviations"
	case fail:
		return "fail"
	case unreached:
		return "unreached"
	}
	return "not run"
}

// hopStatus is what a hop that ran counts as in its cell. A hop without a
// verdict proved nothing and counts as failed; a skipped hop did not run.
func hopStatus(v reports.Verdict) status {
	switch v {
	case reports.Pass:
		return pass
	case reports.PassWithExpectedDeviations:
		return deviated
	case reports.Skipped:
		return unreached
	}
	return fail
}

// Page is everything the sign-off page shows.
type Page struct {
	Verdict reports.Verdict
	// First and Last bound the runs' start and end.
	First, Last time.Time
	Runs        []runRow
	Matrices    []*matrix
	// Counts of covered cells (ran or unreached) by status, over all
	// matrices.
	Counts     map[status]int
	Deviations []deviationRow
	// History is the kubelet × catalogue entry grid; nil without hops.
	History *history
	// Scale are the bench-scale results found beside the runs (AddScale).
	Scale []scaleRun
	// Mutations are the mutation measurements found beside the runs
	// (AddMutations), and MutantScore where their mutants stand; nil
	// without any.
	Mutations   []mutationResult
	MutantScore *mutationScore
	Binaries    []binaryRow
	Envs        []envTable
	// Baseline is set when the page compares against an earlier night.
	Baseline *baseline
}

// runRow is one run in the list of runs.
type runRow struct {
	Src Source
	// Provider and VolumeKind are the run's, "unknown" when it has none.
	Provider   string
	VolumeKind string
	// Link is the run's report.md relative to the output dir; "" when the
	// run has none.
	Link string
}

// matrix is the from × to grid of one provider and volume kind.
type matrix struct {
	Provider, VolumeKind string
	// Versions label both axes, oldest first.
	Versions []string
	// Cells[i][j] is the hop from Versions[i] to Versions[j].
	Cells [][]*cell
	// Hops are every hop that ran in this matrix, in run order, for the
	// timelines.
	Hops []*hopRef
}

// ID is a stable fragment id for the matrix ("local-csi").
func (m *matrix) ID() string { return slug(m.Provider + "-" + m.VolumeKind) }

// Title is "provider · volume kind".
func (m *matrix) Title() string { return m.Provider + " · " + m.VolumeKind }

// HasUnreached reports whether any cell has an unreached hop.
func (m *matrix) HasUnreached() bool {
	for _, row := range m.Cells {
		for _, c := range row {
			if len(c.Unreached) > 0 {
				return true
			}
		}
	}
	return false
}

// cell is one (from, to) pair of a matrix and every hop that covered it.
type cell struct {
	From, To string
	Status   status
	// Hops that ran for this pair (skipped ones are in Unreached).
	Hops      []*hopRef
	Unreached []unreachedRef
	// Medians per phase over Hops that recorded it.
	Medians map[string]time.Duration
	// Worst is the hop whose verdict the cell shows (the first of the
	// worst); nil when none ran.
	Worst *hopRef
}

// Cleanup is the cell's median time to cleanup ("old pod dirs gone").
func (c *cell) Cleanup() (time.Duration, bool) {
	d, ok := c.Medians[reports.PhasePodDirsGone]
	return d, ok
}

// CleanupText is the median time to cleanup in seconds ("4.20"), or ""
// when no hop measured it.
func (c *cell) CleanupText() string {
	if d, ok := c.Cleanup(); ok {
		return reports.FormatSeconds(d)
	}
	return ""
}

// Key identifies the cell across nights.
func (c *cell) key(m *matrix) cellKey {
	return cellKey{m.Provider, m.VolumeKind, c.From, c.To}
}

// hopRef is one hop of one run.
type hopRef struct {
	Run    *runRow
	Hop    reports.Hop
	Status status
	// Link is the hop's row in the run's report.md, relative to the
	// output dir; "" when the run has no report.
	Link string
}

// Title names the hop for people: "run 20261130-… hop 2 (node-a)".
func (h *hopRef) Title() string {
	s := fmt.Sprintf("run %s hop %d", h.Run.Src.Run.ID, h.Hop.Number)
	if h.Hop.Node != "" {
		s += " on " + h.Hop.Node
	}
	return s
}

// unreachedRef is a planned hop that did not run.
type unreachedRef struct {
	Run    *runRow
	Node   string
	Reason string
}

type cellKey struct{ provider, volumeKind, from, to string }

// Build aggregates the runs into a page whose links are relative to
// outDir, where the page will be written.
func Build(srcs []Source, outDir string) *Page {
	p := &Page{Counts: map[status]int{}}
	for _, s := range srcs {
		p.Runs = append(p.Runs, runRow{Src: s, Provider: orUnknown(reports.OneLine(s.Run.Provider)), VolumeKind: volumeGroup(s.Run), Link: relLink(outDir, s.Report)})
	}
	matrices := map[[2]string]*matrix{}
	cells := map[cellKey]*cell{}
	matrixOf := func(r *runRow) *matrix {
		k := [2]string{r.Provider, r.VolumeKind}
		m := matrices[k]
		if m == nil {
			m = &matrix{Provider: k[0], VolumeKind: k[1]}
			matrices[k] = m
		}
		return m
	}
	cellOf := func(m *matrix, from, to string) *cell {
		k := cellKey{m.Provider, m.VolumeKind, from, to}
		c := cells[k]
		if c == nil {
			c = &cell{From: from, To: to, Status: notRun}
			cells[k] = c
		}
		return c
	}
	for i := range p.Runs {
		rr := &p.Runs[i]
		run := rr.Src.Run
		if p.First.IsZero() || (!run.Started.IsZero() && run.Started.Before(p.First)) {
			p.First = run.Started
		}
		if run.Finished.After(p.Last) {
			p.Last = run.Finished
		}
		m := matrixOf(rr)
		for _, h := range run.Hops {
			from, to := reports.OneLine(h.From), reports.OneLine(h.To)
			c := cellOf(m, from, to)
			st := hopStatus(h.Verdict)
			if st == unreached {
				c.Unreached = append(c.Unreached, unreachedRef{Run: rr, Node: h.Node, Reason: fmt.Sprintf("hop %d skipped: an earlier step of the run failed", h.Number)})
				continue
			}
			ref := &hopRef{Run: rr, Hop: h, Status: st}
			if rr.Link != "" {
				ref.Link = rr.Link + "#" + reports.HopAnchor(h)
			}
			c.Hops = append(c.Hops, ref)
			m.Hops = append(m.Hops, ref)
		}
		for _, u := range run.Unreached {
			c := cellOf(m, reports.OneLine(u.From), reports.OneLine(u.To))
			c.Unreached = append(c.Unreached, unreachedRef{Run: rr, Node: u.Node, Reason: reports.OneLine(u.Reason)})
		}
	}
	for k, c := range cells {
		c.settle()
		m := matrices[[2]string{k.provider, k.volumeKind}]
		m.Versions = appendNew(m.Versions, k.from, k.to)
		p.Counts[c.Status]++
	}
	for _, m := range matrices {
		sortVersions(m.Versions)
		m.Cells = make([][]*cell, len(m.Versions))
		for i, from := range m.Versions {
			m.Cells[i] = make([]*cell, len(m.Versions))
			for j, to := range m.Versions {
				m.Cells[i][j] = cellOf(m, from, to)
			}
		}
		p.Matrices = append(p.Matrices, m)
	}
	sort.Slice(p.Matrices, func(i, j int) bool {
		a, b := p.Matrices[i], p.Matrices[j]
		if a.Provider != b.Provider {
			return a.Provider < b.Provider
		}
		return a.VolumeKind < b.VolumeKind
	})
	p.Verdict = p.verdict()
	p.Deviations = deviationRows(p.Runs)
	p.History = buildHistory(p.Runs)
	p.Binaries = binaryRows(p.Runs)
	p.Envs = envTables(p.Runs)
	return p
}

// volumeGroup is the run's volume kind, and for a run of a catalogue entry
// the entry too ("csi · scenario reboot"): each scenario gets a matrix of its
// own, apart from the sign-off plans' cells.
func volumeGroup(r *reports.Run) string {
	k := orUnknown(r.VolumeKind())
	if e := r.CatalogueEntry(); e != "" {
		k += " · scenario " + e
	}
	return k
}

// verdict is Fail when any run or hop failed or when no hop ran at all
// (nothing was proven), else PassWithExpectedDeviations when any run or
// hop has one, else Pass. Unreached cells are counted on the page but do
// not decide the verdict: the run that left them unreached failed or was
// cut short, and says so.
func (p *Page) verdict() reports.Verdict {
	ran := false
	worst := reports.Pass
	for _, r := range p.Runs {
		switch r.Src.Run.Verdict {
		case reports.Pass, reports.Skipped:
		case reports.PassWithExpectedDeviations:
			worst = reports.PassWithExpectedDeviations
		default:
			return reports.Fail
		}
	}
	for _, m := range p.Matrices {
		for _, h := range m.Hops {
			ran = true
			switch h.Status {
			case fail:
				return reports.Fail
			case deviated:
				worst = reports.PassWithExpectedDeviations
			}
		}
	}
	if !ran {
		return reports.Fail
	}
	return worst
}

// FailedRuns are the runs that failed or never got a verdict.
func (p *Page) FailedRuns() []runRow {
	var out []runRow
	for _, r := range p.Runs {
		if hopStatus(r.Src.Run.Verdict) == fail {
			out = append(out, r)
		}
	}
	return out
}

// Cells is the number of covered cells (ran or unreached).
func (p *Page) Cells() int {
	n := 0
	for s, c := range p.Counts {
		if s != notRun {
			n += c
		}
	}
	return n
}

// CountsText is "4 pass, 1 fail, 2 unreached", worst first, zeros left out.
func (p *Page) CountsText() string {
	var parts []string
	for _, s := range []status{fail, deviated, pass, unreached} {
		if n := p.Counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s.Label()))
		}
	}
	return strings.Join(parts, ", ")
}

// settle sets the cell's status, worst hop and medians.
func (c *cell) settle() {
	c.Status = notRun
	if len(c.Unreached) > 0 {
		c.Status = unreached
	}
	for _, h := range c.Hops {
		if severity[h.Status] > severity[c.Status] {
			c.Status, c.Worst = h.Status, h
		}
	}
	samples := map[string][]time.Duration{}
	for _, h := range c.Hops {
		for _, t := range h.Hop.Timings {
			samples[t.Phase] = append(samples[t.Phase], t.Duration)
		}
	}
	c.Medians = map[string]time.Duration{}
	for phase, xs := range samples {
		c.Medians[phase] = median(xs)
	}
}

// median of a non-empty sample; the mean of the middle two for an even
// count.
func median(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// sortVersions sorts kubelet versions oldest first.
func sortVersions(vs []string) {
	sort.SliceStable(vs, func(i, j int) bool { return versionLess(vs[i], vs[j]) })
}

// versionLess orders kubelet versions oldest first; what does not parse as
// a version goes last, in string order.
func versionLess(x, y string) bool {
	a, errA := version.ParseGeneric(x)
	b, errB := version.ParseGeneric(y)
	switch {
	case errA == nil && errB == nil:
		if !a.EqualTo(b) {
			return a.LessThan(b)
		}
	case errA == nil:
		return true
	case errB == nil:
		return false
	}
	return x < y
}

func appendNew(xs []string, vs ...string) []string {
	for _, v := range vs {
		if !slices.Contains(xs, v) {
			xs = append(xs, v)
		}
	}
	return xs
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// relLink is target relative to dir, slash-separated and percent-encoded
// per segment; "" when target is "".
func relLink(dir, target string) string {
	if target == "" {
		return ""
	}
	absDir, err1 := filepath.Abs(dir)
	absTarget, err2 := filepath.Abs(target)
	rel := target
	if err1 == nil && err2 == nil {
		if d, err := filepath.EvalSymlinks(absDir); err == nil {
			absDir = d
		}
		if r, err := filepath.Rel(absDir, absTarget); err == nil {
			rel = r
		}
	}
	segs := strings.Split(filepath.ToSlash(rel), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// slug keeps [a-z0-9] and turns runs of anything else into one "-".
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}
