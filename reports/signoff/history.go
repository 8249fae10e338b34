package signoff

import (
	"sort"
	"strings"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// The kubelet history grid: for runs of catalogue entries (make
// test-history's and any other), which entry did what on which kubelet,
// each hop's cell linking to it and citing the catalogue's reference. It
// is the table a reviewer checks against the upstream record of where
// each bug shipped and where it was fixed.

// History outcomes of one hop for its entry.
const (
	// HistoryReproduced: the entry's known bug showed, as the catalogue
	// expects of that kubelet.
	historyReproduced = "bug reproduced"
	// HistoryNotReproduced: the catalogue expects the bug there and the
	// hop did not show it.
	historyNotReproduced = "not reproduced"
	// HistoryClean: no sign of the bug, as the catalogue expects.
	historyClean = "clean"
	// HistoryFail: the hop failed (the bug on a kubelet expected clean,
	// or a failure of the run itself).
	historyFail = "fail"
	// HistoryNotReached: the hop did not run.
	historyNotReached = "not reached"
)

// baselineEntry is the grid's column for runs of no catalogue entry (the
// sign-off plans' force-delete): their cells show each kubelet's
// reconstruction path.
const baselineEntry = "baseline force-delete"

// history is the kubelet × entry grid.
type history struct {
	// Entries are the columns, the baseline first, then by name.
	Entries []string
	// Kubelets are the rows, oldest first: a hop's kubelet with its
	// plan entry's gates ("v1.28.15+NewVolumeManagerReconstruction=false").
	Kubelets []string
	// Cells[kubelet][entry] are the hops of that kubelet for that entry.
	Cells map[string]map[string][]historyItem
}

// historyItem is one hop in a history cell.
type historyItem struct {
	Outcome string
	// Path is the reconstruction path the kubelet's log showed.
	Path string
	// Why is the evidence: the deviation's reason, or the failure.
	Why  string
	Link string
	Run  string
	Hop  int
}

// buildHistory makes the grid from the runs' hops; nil unless a run is of
// a catalogue entry or a kubelet ran the old reconstruction: a night of
// sign-off plans on the new one alone has its matrices.
func buildHistory(runs []runRow) *history {
	h := &history{Cells: map[string]map[string][]historyItem{}}
	entries := map[string]bool{}
	shows := false
	for i := range runs {
		rr := &runs[i]
		run := rr.Src.Run
		entry := run.CatalogueEntry()
		if entry == "" {
			entry = baselineEntry
		} else {
			shows = true
		}
		for _, hop := range run.Hops {
			if strings.HasPrefix(hop.ReconstructionPath, "old") {
				shows = true
			}
			kubelet := reports.OneLine(hop.To) + plan.FormatGates(hop.ToGates)
			item := historyItem{Path: hop.ReconstructionPath, Run: run.ID, Hop: hop.Number}
			item.Outcome, item.Why = historyOutcome(run, hop, entry)
			if rr.Link != "" {
				item.Link = rr.Link + "#" + reports.HopAnchor(hop)
			}
			if h.Cells[kubelet] == nil {
				h.Cells[kubelet] = map[string][]historyItem{}
				h.Kubelets = append(h.Kubelets, kubelet)
			}
			h.Cells[kubelet][entry] = append(h.Cells[kubelet][entry], item)
			entries[entry] = true
		}
	}
	if !shows {
		return nil
	}
	for e := range entries {
		if e != baselineEntry {
			h.Entries = append(h.Entries, e)
		}
	}
	sort.Strings(h.Entries)
	if entries[baselineEntry] {
		h.Entries = append([]string{baselineEntry}, h.Entries...)
	}
	sort.SliceStable(h.Kubelets, func(i, j int) bool {
		vi, gi, _ := strings.Cut(h.Kubelets[i], "+")
		vj, gj, _ := strings.Cut(h.Kubelets[j], "+")
		if vi != vj {
			return versionLess(vi, vj)
		}
		return gi < gj
	})
	return h
}

// historyOutcome is what the hop shows for the run's entry, and its
// evidence: the judging step's deviation, or the run's failure for a
// failed hop.
func historyOutcome(run *reports.Run, hop reports.Hop, entry string) (outcome, why string) {
	if hopStatus(hop.Verdict) == unreached {
		return historyNotReached, ""
	}
	if entry != baselineEntry {
		for _, s := range run.Steps {
			if s.Hop != hop.Number || !s.JudgesEntry(entry) {
				continue
			}
			for _, d := range s.Deviations {
				if d.Reproduced() {
					return historyReproduced, reports.OneLine(d.Reason)
				}
				if d.IsExpected() {
					return historyNotReproduced, reports.OneLine(d.Reason)
				}
			}
		}
	}
	if hop.Verdict == reports.Fail {
		return historyFail, reports.OneLine(run.Failure)
	}
	return historyClean, ""
}
