package matrix

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// TrailRun is what one node recorded while it ran its trail.
type TrailRun struct {
	// Node is the node's name.
	Node string
	// Plan is the trail: the versions the node went through.
	Plan plan.Plan
	// Run holds the trail's steps, hops and timings, in the order they
	// ran (one reconstruction scenario per workload the trail deployed).
	Run *reports.Run
	// ArtifactsSubdir is where the trail's step artifacts are, relative to
	// the tour's artifacts directory; evidence paths are made relative to
	// the tour's directory with it.
	ArtifactsSubdir string
	// Unreached are the trail's hops that did not run, and why.
	Unreached []reports.UnreachedHop
}

// Merge makes the tour's one record from its trails' records: base gives
// the run's identity (ID, scenario, provider, environment, binaries, run
// timings, artifacts dir); the trails give, in trail order, the steps
// (renumbered, prefixed with their node when there are several, evidence
// paths made relative to the tour), the hops (renumbered 1.. globally in
// trail order, with Node set; the steps' Hop follows), the timings (named
// "<node>: <phase>"), Trails with each trail's own verdict, and Unreached.
// The verdict is computed with reports; a tour with unreached hops fails
// even when every hop it ran passed, since it did not prove them.
func Merge(base reports.Run, trails []TrailRun) *reports.Run {
	out := base
	out.Steps, out.Hops, out.Trails, out.Unreached = nil, nil, nil, nil
	out.Timings = append([]reports.Timing(nil), base.Timings...)
	out.Verdict, out.Failure = "", ""
	var names []string
	for _, t := range trails {
		names = append(names, t.Node)
	}
	if out.Node == "" {
		out.Node = strings.Join(names, ", ")
	}
	prefix := len(trails) > 1
	for _, t := range trails {
		renumber := map[int]int{}
		if t.Run != nil {
			for _, h := range t.Run.Hops {
				h.Number, renumber[h.Number] = len(out.Hops)+1, len(out.Hops)+1
				h.Node = t.Node
				h.OldPodUIDs = append([]string(nil), h.OldPodUIDs...)
				h.Timings = append([]reports.Timing(nil), h.Timings...)
				h.Metrics = append([]reports.Metric(nil), h.Metrics...)
				out.Hops = append(out.Hops, h)
			}
			for _, s := range t.Run.Steps {
				s.Index = len(out.Steps) + 1
				if s.Hop != 0 {
					if n, ok := renumber[s.Hop]; ok {
						s.Hop = n
					} else {
						// A hop step that ran before its hop was recorded
						// (interrupted at once) keeps no number rather
						// than another hop's.
						s.Hop = 0
					}
				}
				if prefix {
					s.Name = t.Node + ": " + s.Name
				}
				s.Evidence = rebase(s.Evidence, t.ArtifactsSubdir)
				out.Steps = append(out.Steps, s)
			}
			for _, tm := range t.Run.Timings {
				out.Timings = append(out.Timings, reports.Timing{Phase: t.Node + ": " + tm.Phase, Duration: tm.Duration})
			}
		}
		out.Unreached = append(out.Unreached, t.Unreached...)
		out.Trails = append(out.Trails, reports.Trail{Node: t.Node, Plan: append([]string(nil), t.Plan.Raw...), Verdict: trailVerdict(t)})
	}
	out.ComputeVerdict()
	if len(out.Unreached) > 0 && out.Verdict != reports.Fail {
		u := out.Unreached[0]
		out.Verdict = reports.Fail
		out.Failure = fmt.Sprintf("%d of the tour's pairs were not reached, the first %s → %s on %s: %s", len(out.Unreached), u.From, u.To, u.Node, u.Reason)
	}
	return &out
}

// trailVerdict is the verdict of the trail's own record, and Fail when it
// left hops unreached.
func trailVerdict(t TrailRun) reports.Verdict {
	if len(t.Unreached) > 0 {
		return reports.Fail
	}
	if t.Run == nil {
		return reports.Skipped
	}
	r := *t.Run
	r.Hops = append([]reports.Hop(nil), t.Run.Hops...)
	r.Verdict, r.Failure = "", ""
	r.ComputeVerdict()
	return r.Verdict
}

// rebase makes relative evidence paths relative to the tour's artifacts
// directory.
func rebase(ev []reports.Evidence, subdir string) []reports.Evidence {
	if len(ev) == 0 {
		return nil
	}
	out := append([]reports.Evidence(nil), ev...)
	for i, e := range out {
		if e.Path != "" && subdir != "" && !filepath.IsAbs(e.Path) {
			out[i].Path = path.Join(filepath.ToSlash(subdir), filepath.ToSlash(e.Path))
		}
	}
	return out
}
