package signoff

import (
	"fmt"
	"slices"
	"sort"

	"sigs.k8s.io/skewtest/reports"
)

// The sections below the matrices: expected deviations, binaries and
// environments, each deduplicated over all runs.

// deviationRow is one documented deviation, deduplicated by check and
// reason over all runs.
type deviationRow struct {
	Check, Expected, Reason string
	// Observed values, distinct, in first-seen order.
	Observed []string
	// Where lists "provider · kind from → to" (or the run ID outside hops),
	// distinct.
	Where []string
}

// binaryRow is one binary, deduplicated by component, version and digest.
type binaryRow struct {
	Component, Version, SHA256 string
	Sources                    []string
	RunIDs                     []string
}

// envTable is the environment of one provider's runs: each key with its
// distinct values.
type envTable struct {
	Provider string
	Rows     []envRow
}

// envRow is one environment key and the values runs recorded for it.
type envRow struct {
	Key    string
	Values []envValue
}

// envValue is one value and how many runs recorded it.
type envValue struct {
	Value string
	Runs  int
}

// deviationRows deduplicates the runs' expected deviations by check and
// reason, in first-seen order.
func deviationRows(runs []runRow) []deviationRow {
	var rows []deviationRow
	index := map[[2]string]int{}
	for i := range runs {
		rr := &runs[i]
		for _, d := range reports.ExpectedDeviations(rr.Src.Run) {
			k := [2]string{reports.OneLine(d.Check), reports.OneLine(d.Reason)}
			at, ok := index[k]
			if !ok {
				at = len(rows)
				index[k] = at
				rows = append(rows, deviationRow{Check: k[0], Expected: reports.OneLine(d.Expected), Reason: k[1]})
			}
			row := &rows[at]
			row.Observed = appendNew(row.Observed, reports.OneLine(d.Observed))
			row.Where = appendNew(row.Where, where(rr, d.Hop))
		}
	}
	return rows
}

// where names a hop of a run by its matrix and cell.
func where(rr *runRow, hop int) string {
	for _, h := range rr.Src.Run.Hops {
		if h.Number == hop && hop > 0 {
			return fmt.Sprintf("%s · %s %s → %s", rr.Provider, rr.VolumeKind, reports.OneLine(h.From), reports.OneLine(h.To))
		}
	}
	return "run " + rr.Src.Run.ID
}

// binaryRows deduplicates the runs' binaries by component, version and
// digest, sorted by component and version.
func binaryRows(runs []runRow) []binaryRow {
	var rows []binaryRow
	index := map[[3]string]int{}
	for _, rr := range runs {
		for _, b := range rr.Src.Run.Binaries {
			k := [3]string{reports.OneLine(b.Component), reports.OneLine(b.Version), reports.OneLine(b.SHA256)}
			at, ok := index[k]
			if !ok {
				at = len(rows)
				index[k] = at
				rows = append(rows, binaryRow{Component: k[0], Version: k[1], SHA256: k[2]})
			}
			rows[at].Sources = appendNew(rows[at].Sources, reports.OneLine(b.Source))
			rows[at].RunIDs = appendNew(rows[at].RunIDs, rr.Src.Run.ID)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Component != rows[j].Component {
			return rows[i].Component < rows[j].Component
		}
		return versionLess(rows[i].Version, rows[j].Version)
	})
	return rows
}

// envTables are the runs' environments per provider, each key with its
// distinct values in first-seen order.
func envTables(runs []runRow) []envTable {
	var tables []envTable
	index := map[string]int{}
	for _, rr := range runs {
		prov := rr.Provider
		at, ok := index[prov]
		if !ok {
			at = len(tables)
			index[prov] = at
			tables = append(tables, envTable{Provider: prov})
		}
		t := &tables[at]
		for _, kv := range rr.Src.Run.Environment {
			key, val := reports.OneLine(kv.Key), reports.OneLine(kv.Value)
			ri := slices.IndexFunc(t.Rows, func(r envRow) bool { return r.Key == key })
			if ri < 0 {
				t.Rows = append(t.Rows, envRow{Key: key})
				ri = len(t.Rows) - 1
			}
			row := &t.Rows[ri]
			vi := slices.IndexFunc(row.Values, func(v envValue) bool { return v.Value == val })
			if vi < 0 {
				row.Values = append(row.Values, envValue{Value: val})
				vi = len(row.Values) - 1
			}
			row.Values[vi].Runs++
		}
	}
	sort.SliceStable(tables, func(i, j int) bool { return tables[i].Provider < tables[j].Provider })
	return tables
}
