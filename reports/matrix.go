package reports

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// isMatrix reports whether the run is a tour worth a from × to table: it
// has trails, or its hops and unreached hops cover at least two distinct
// (from, to) pairs.
func isMatrix(run *Run) bool {
	if len(run.Trails) > 0 {
		return true
	}
	return len(pairs(run)) >= 2
}

type pair struct{ from, to string }

// hopPair is a hop's (from, to), each version with its plan entry's
// feature gates: v1.28.15 and v1.28.15+NewVolumeManagerReconstruction=false
// are two kubelets.
func hopPair(h Hop) pair { return pair{withGates(h.From, h.FromGates), withGates(h.To, h.ToGates)} }

// pairs are the distinct (from, to) pairs of the run's hops and unreached
// hops, in first-seen order.
func pairs(run *Run) []pair {
	seen := map[pair]bool{}
	var out []pair
	add := func(p pair) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, h := range run.Hops {
		add(hopPair(h))
	}
	for _, u := range run.Unreached {
		add(pair{u.From, u.To})
	}
	return out
}

// matrixVersions are the versions of the run's pairs, newest first
// (versions that do not parse after those that do, in text order).
func matrixVersions(run *Run) []string {
	seen := map[string]bool{}
	var vs []string
	for _, p := range pairs(run) {
		for _, v := range []string{p.from, p.to} {
			if !seen[v] {
				seen[v] = true
				vs = append(vs, v)
			}
		}
	}
	sort.SliceStable(vs, func(i, j int) bool {
		a, errA := version.ParseGeneric(vs[i])
		b, errB := version.ParseGeneric(vs[j])
		switch {
		case errA == nil && errB == nil:
			return a.GreaterThan(b)
		case errA == nil || errB == nil:
			return errA == nil
		}
		return vs[i] < vs[j]
	})
	return vs
}

// hopAnchor is the id of a hop's row in the hop table.
// matrixCell renders one hop in the table: verdict and time to cleanup,
// linked to the hop's row.
func matrixCell(h Hop) string {
	s := verdictLabel(h.Verdict)
	if d, ok := cleanupTime(h); ok {
		s += ", " + fmtSeconds(d) + " s"
	}
	return "[" + s + "](#" + HopAnchor(h) + ")"
}

// matrixTable opens a tour's report: rows are the kubelet a hop came
// from, columns the one it went to; each cell holds its hops (verdict,
// time to cleanup, a link to the hop) or says it was not reached.
func (m *mdWriter) matrixTable() {
	if !m.matrix {
		return
	}
	r := m.run
	vs := matrixVersions(r)
	cells := map[pair][]string{}
	for _, h := range r.Hops {
		p := hopPair(h)
		cells[p] = append(cells[p], matrixCell(h))
	}
	for _, u := range r.Unreached {
		p := pair{u.From, u.To}
		cells[p] = append(cells[p], "⛔ not reached")
	}
	m.line("## Matrix: from × to")
	m.line("")
	m.printf("%s recorded, %d not reached. Each cell is a hop from the row's kubelet to the column's: its verdict and its time to cleanup (until the old pods' mounts and directories were gone, from the kubelet's start), linked to the hop.\n\n",
		plural(len(r.Hops), "hop"), len(r.Unreached))
	header := []string{"from ↓ · to →"}
	for _, v := range vs {
		header = append(header, mdText(v))
	}
	var rows [][]string
	for _, from := range vs {
		row := []string{"**" + mdText(from) + "**"}
		for _, to := range vs {
			c := strings.Join(cells[pair{from, to}], " · ")
			if from == to {
				c = "—"
			}
			row = append(row, c)
		}
		rows = append(rows, row)
	}
	m.table(header, rows)
	if len(r.Unreached) > 0 {
		m.line("### ⛔ Not reached")
		m.line("")
		var rows [][]string
		for _, u := range r.Unreached {
			rows = append(rows, []string{orDash(mdCode(u.Node)), mdText(u.From), mdText(u.To), orDash(mdText(u.Reason))})
		}
		m.table([]string{"Node", "From", "To", "Why"}, rows)
	}
}

// trails lists a tour's trails: which node ran which part of it.
func (m *mdWriter) trails() {
	if len(m.run.Trails) == 0 {
		return
	}
	m.line("## Trails")
	m.line("")
	m.line("The tour split into trails, each run by its own node at once from its first version.")
	m.line("")
	var rows [][]string
	for _, t := range m.run.Trails {
		rows = append(rows, []string{orDash(mdCode(t.Node)), mdText(fmtPlan(t.Plan, " → ")), fmt.Sprint(max(len(t.Plan)-1, 0)), verdictLabel(t.Verdict)})
	}
	m.table([]string{"Node", "Trail", "Hops", "Verdict"}, rows)
}
