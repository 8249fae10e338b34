package signoff

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"sigs.k8s.io/skewtest/reports"
)

// A phase slowed down when its median grew by more than both: run-to-run
// noise on a 2-core VM is tens of percent on sub-second phases, so either
// bound alone flags noise.
const (
	slowdownRatio = 1.5
	slowdownMin   = time.Second
)

// baseline is an earlier night the page compares against.
type baseline struct {
	Dir  string
	Runs int
	// Compared is how many (cell, phase) medians both nights have.
	Compared int
	// Warnings are the phases that slowed down beyond noise. They never
	// fail the sign-off.
	Warnings []warning
}

// warning is one cell's phase that slowed down against the baseline.
type warning struct {
	Provider, VolumeKind, From, To, Phase string
	Before, Now                           time.Duration
	BeforeHops, NowHops                   int
	// Link is the cell's worst hop in its run's report; "" when none.
	Link string
}

// Text is the warning on one line with both figures.
func (w warning) Text() string {
	return fmt.Sprintf("%s · %s %s → %s: %s %s s → %s s (+%.0f%%, +%s s; median of %s then, %d now)",
		w.Provider, w.VolumeKind, w.From, w.To, w.Phase,
		reports.FormatSeconds(w.Before), reports.FormatSeconds(w.Now),
		100*(w.Now.Seconds()/w.Before.Seconds()-1), reports.FormatSeconds(w.Now-w.Before),
		plural(w.BeforeHops, "hop"), w.NowHops)
}

// slower reports whether now is a slowdown from before beyond noise.
func slower(before, now time.Duration) bool {
	return now-before > slowdownMin && float64(now) > slowdownRatio*float64(before)
}

// Compare sets p.Baseline from an earlier night's page built the same way,
// comparing every phase median of every cell both nights ran.
func (p *Page) Compare(base *Page, dir string) {
	b := &baseline{Dir: dir, Runs: len(base.Runs)}
	before := map[cellKey]*cell{}
	for _, m := range base.Matrices {
		for _, row := range m.Cells {
			for _, c := range row {
				if len(c.Hops) > 0 {
					before[c.key(m)] = c
				}
			}
		}
	}
	for _, m := range p.Matrices {
		for _, row := range m.Cells {
			for _, c := range row {
				old := before[c.key(m)]
				if old == nil || len(c.Hops) == 0 {
					continue
				}
				for _, phase := range phases(c.Medians) {
					then, ok := old.Medians[phase]
					if !ok {
						continue
					}
					b.Compared++
					now := c.Medians[phase]
					if !slower(then, now) {
						continue
					}
					w := warning{Provider: m.Provider, VolumeKind: m.VolumeKind, From: c.From, To: c.To, Phase: phase,
						Before: then, Now: now, BeforeHops: countPhase(old, phase), NowHops: countPhase(c, phase)}
					if c.Worst != nil {
						w.Link = c.Worst.Link
					}
					b.Warnings = append(b.Warnings, w)
				}
			}
		}
	}
	p.Baseline = b
}

// phases are the keys of medians: the scenario's phases in the order they
// happen, then any others by name.
func phases(medians map[string]time.Duration) []string {
	var out, other []string
	for _, ph := range reports.HopPhases {
		if _, ok := medians[ph]; ok {
			out = append(out, ph)
		}
	}
	for ph := range medians {
		if !slices.Contains(reports.HopPhases, ph) {
			other = append(other, ph)
		}
	}
	sort.Strings(other)
	return append(out, other...)
}

func countPhase(c *cell, phase string) int {
	n := 0
	for _, h := range c.Hops {
		if _, ok := h.Hop.Timing(phase); ok {
			n++
		}
	}
	return n
}
