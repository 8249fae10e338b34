package reconstruction

// This file gathers what a hop showed of a known bug for the catalogue's
// judge (catalogue.Symptom): the old pods' leftovers as traces, the
// kubelet's log, its counters and the numbers they are compared with;
// and it sets the hop's metric expectations from the symptoms of the
// known bugs the catalogue expects of the hop's kubelet.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

// hopBug is a known bug the catalogue expects of the hop's kubelet.
type hopBug struct {
	entry catalogue.Entry
	x     catalogue.Expectation
}

// hopBugs are the known bugs whose symptoms the hop's metrics are judged
// against: the fault's (its shapes are only its workload); else each
// shape's; else, for a run on local volumes, the local-volume entry's.
func (s *Scenario) hopBugs(to *version.Version) []hopBug {
	var entries []catalogue.Entry
	switch {
	case s.cfg.Fault != nil:
		entries = append(entries, s.cfg.Fault.Entry)
	case s.shapes != nil:
		for _, sh := range s.shapes.list {
			entries = append(entries, sh.Entry)
		}
	case s.cfg.Kind == storage.Local:
		if e, ok := CatalogueEntry(localVolumeEntry); ok {
			entries = append(entries, e)
		}
	}
	var out []hopBug
	for _, e := range entries {
		if x, ok := e.ExpectationForKubelet(to, s.hopGates()); ok && x.Outcome == catalogue.KnownBug {
			out = append(out, hopBug{entry: e, x: x})
		}
	}
	return out
}

// localVolumeEntry is the catalogue shape a run on local volumes is.
const localVolumeEntry = "local-volume"

// symptomMetrics sets, for each counter a known bug of the hop's kubelet
// names, the value the symptom says as the expected deviation from 0; a
// counter no symptom names keeps its expectation. Where the metrics
// registration race dropped increments of a counter the kubelet moves
// while it reconstructs (lostToRace), that counter may read lower, down
// to what was dropped: the metric step allows up to the symptom's value
// and the catalogue's judge checks the rest. The error is a witness start
// that failed.
func (s *Scenario) symptomMetrics(ctx context.Context, sc *scenarios.StepContext, scrape *kubeletmetrics.Scrape, exps []kubeletmetrics.Expectation, to *version.Version) ([]kubeletmetrics.Expectation, error) {
	bugs := s.hopBugs(to)
	counts := s.symptomCounts()
	s.race.lost, s.race.why = map[string]float64{}, map[string]string{}
	for _, b := range bugs {
		for _, c := range b.x.Symptom.Counters {
			if _, done := s.race.lost[c.Metric]; c.RaceProne() && !done {
				lost, err := s.lostToRace(ctx, sc, scrape, c.Metric, counts[c.Of])
				if err != nil {
					return nil, err
				}
				s.race.lost[c.Metric] = lost
			}
		}
	}
	for _, b := range bugs {
		for _, c := range b.x.Symptom.Counters {
			n := float64(counts[c.Of])
			check := kubeletmetrics.Equal(n)
			reason := fmt.Sprintf("the symptom of known bug %s (%s) of %s %s: %s, here %g", b.x.RefIDs(), b.x.Bug, b.entry.Kind, b.entry.Name, c, n)
			if lost := s.race.lost[c.Metric]; lost > 0 {
				check = kubeletmetrics.AtMost(n)
				reason += fmt.Sprintf("; the metrics registration race dropped %g of its increments (the kubelet's log shows that many beyond the counter, and a witness start counted them), which the catalogue's judge allows for", lost)
			}
			found := false
			for i := range exps {
				if exps[i].Metric == c.Metric {
					exps[i].Check = kubeletmetrics.Equal(0)
					exps[i].Deviation = &kubeletmetrics.Deviation{Check: check, Reason: reason}
					found = true
				}
			}
			if !found {
				exps = append(exps, kubeletmetrics.Expectation{Metric: c.Metric, Check: kubeletmetrics.Equal(0), Deviation: &kubeletmetrics.Deviation{Check: check, Reason: reason}})
			}
		}
	}
	return exps, nil
}

// symptomNote says, for a failed metric on a hop whose kubelet has a
// known bug, which counters that bug's symptom names: the metric failed
// the symptom, or moved where the symptom says nothing.
func (s *Scenario) symptomNote(to *version.Version) string {
	var notes []string
	for _, b := range s.hopBugs(to) {
		var cs []string
		for _, c := range b.x.Symptom.Counters {
			cs = append(cs, c.String())
		}
		names := "names no counter"
		if len(cs) > 0 {
			names = "names only " + strings.Join(cs, ", ")
		}
		notes = append(notes, fmt.Sprintf("the expected %s symptom (%s) of %s %s %s", b.x.RefIDs(), b.x.Bug, b.entry.Kind, b.entry.Name, names))
	}
	if len(notes) == 0 {
		return ""
	}
	return "; " + strings.Join(notes, "; ")
}

// lostToRace is how many increments of race-prone metric, which a known
// bug's symptom wants at want, the metrics registration race dropped on
// the hop: what the kubelet's log shows beyond the counter (its failed
// reconstructions for the errors counter, its reconstructions for the
// total), once a witness start of the same kubelet (shared with the other
// counter) shows the counter moves; 0 when the counter reads want or
// more, the log shows no more or cannot be read, or the witness starts
// cannot tell the race from a counter that never moves or show one that
// never moves (a note says which). The error is a witness start that
// failed.
func (s *Scenario) lostToRace(ctx context.Context, sc *scenarios.StepContext, scrape *kubeletmetrics.Scrape, metric string, want int) (float64, error) {
	text, err := s.hopKubeletLog(ctx)
	if err != nil || scrape == nil {
		return 0, nil
	}
	value, _, ok, err := scrape.ExposedValue(s.hop.To, metric)
	if err != nil || !ok {
		return 0, nil
	}
	log := kubeletmetrics.ParseReconstructionLog(text)
	if value >= float64(want) || float64(log.Logged(metric)) <= value {
		return 0, nil
	}
	s.logEvidence(sc, log)
	ws, noWitness, err := s.witnesses(ctx, sc, metric, log)
	if err != nil {
		return 0, err
	}
	lost, why := kubeletmetrics.RaceLoss(metric, value, log, ws, noWitness)
	s.race.why[metric] = why
	sc.Note("%s", why)
	return lost, nil
}

// symptomCounts are the numbers the symptoms' counters are compared with,
// as measured on the node.
func (s *Scenario) symptomCounts() map[catalogue.Count]int {
	counts := map[catalogue.Count]int{catalogue.Unreconstructable: s.unreconstructable}
	if s.leftSnap != nil {
		dirs := map[string]bool{}
		for _, u := range s.leftSnap.PodUIDs() {
			dirs[u] = true
		}
		left := map[string]bool{}
		for _, l := range append(append([]nodestate.Leftover(nil), s.leftEver...), s.left...) {
			if dirs[l.UID] {
				left[l.UID] = true
			}
		}
		counts[catalogue.OldPodDirs] = len(left)
	}
	if s.down != nil {
		n := 0
		for _, u := range s.oldUIDs {
			for _, d := range s.down.Pod(u).VolumeDirs() {
				if strings.Contains(d, "/volumes/kubernetes.io~local-volume/") {
					n++
				}
			}
		}
		counts[catalogue.LocalVolumeDirs] = n
	}
	return counts
}

// evidence completes an entry's observation with what the hop showed of
// any bug: traces (what its pods left, and what the entry's check saw,
// already in o), the kubelet's log since its start, its counters, the
// numbers they are compared with, and the values the placeholders of the
// symptoms' patterns take.
func (s *Scenario) evidence(ctx context.Context, o *catalogue.Observation, traces []catalogue.Trace) {
	o.Traces = append(o.Traces, traces...)
	o.Bind = s.bindings()
	switch ln, ok := s.node.(nodes.WithKubeletLog); {
	case s.hopStartLog != nil:
		// A witness start replaced the hop's kubelet: its log is the
		// witness's, not the hop's.
		o.Log, o.Logged = *s.hopStartLog, true
	case ok:
		if text, err := ln.KubeletLog(ctx); err == nil {
			o.Log, o.Logged = text, true
		}
	}
	o.Counters = map[string]catalogue.Reading{}
	for _, r := range s.metricResults {
		if r.Present {
			o.Counters[r.Metric] = catalogue.Reading{Value: r.Value, Lost: s.race.lost[r.Metric], Race: s.race.why[r.Metric]}
		}
	}
	o.Counts = s.symptomCounts()
}

// bindings are the values of the symptoms' placeholders on this hop.
func (s *Scenario) bindings() map[string][]string {
	b := map[string][]string{}
	key := catalogue.OldUID
	if f := s.cfg.Fault; f != nil && f.KeepPods {
		key = catalogue.UID
	}
	b[key] = append([]string(nil), s.oldUIDs...)
	// A pod the fault keeps running beside the deleted ones
	// (reboot-shared-volume's): its UID is the symptom's <uid>.
	if s.sharer.UID != "" {
		b[catalogue.UID] = append(b[catalogue.UID], string(s.sharer.UID))
	}
	// <volume-hash> is each StatefulSet PV's global mount; <pv> and
	// <driver> are the shapes' too (reboot-block's symptom names the
	// block shape's map links).
	for _, pv := range s.volumes.PVs {
		if pv.VolumeHandle != "" {
			sum := sha256.Sum256([]byte(pv.VolumeHandle))
			b[catalogue.VolumeHash] = append(b[catalogue.VolumeHash], hex.EncodeToString(sum[:]))
		}
	}
	for _, pv := range s.runPVs() {
		b[catalogue.PV] = append(b[catalogue.PV], pv.Name)
		if pv.Driver != "" && !contains(b[catalogue.Driver], pv.Driver) {
			b[catalogue.Driver] = append(b[catalogue.Driver], pv.Driver)
		}
	}
	return b
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// oldPodTraces are the old pods' leftovers as traces (relative to the
// kubelet root), and within each pod dir left, every non-directory below
// its volume dirs (nodestate.VolumeSubdirs) that is not a mount point (an
// empty vol_data.json, a file where a volume dir belongs, a file subPath's
// mount point): what keeps the dir, which a symptom must name too. Empty
// directories, and what lies beside the volume dirs (containers/,
// etc-hosts), are not traces: the kubelet's orphan sweep leaves them when
// it stops at its first failure.
func oldPodTraces(snap *nodestate.Snapshot, left []nodestate.Leftover) []catalogue.Trace {
	if len(left) == 0 {
		return nil
	}
	root := "/"
	if snap != nil {
		root = snap.ResolvedRoot
	}
	rel := func(p string) string {
		r, ok := strings.CutPrefix(p, strings.TrimSuffix(root, "/")+"/")
		if !ok {
			return p
		}
		return r
	}
	mounted := map[string]bool{}
	for _, l := range left {
		if l.Kind == nodestate.LeftoverMount {
			mounted[rel(l.Path)] = true
		}
	}
	types := map[string]string{}
	if snap != nil {
		for _, e := range snap.Entries {
			types[e.Path] = e.Type
		}
	}
	var out []catalogue.Trace
	for _, l := range left {
		switch l.Kind {
		case nodestate.LeftoverPodDir:
			out = append(out, catalogue.Trace{Kind: catalogue.Dir, Path: l.Path, Detail: l.Detail})
			if snap == nil {
				continue
			}
			var inside []catalogue.Trace
			for _, e := range snap.Entries {
				sub, ok := strings.CutPrefix(e.Path, l.Path+"/")
				if !ok || e.Type == nodestate.TypeDir || mounted[e.Path] || !hasPrefix(sub, nodestate.VolumeSubdirs) {
					continue
				}
				inside = append(inside, catalogue.Trace{Kind: catalogue.File, Path: e.Path, Detail: e.Type})
			}
			sort.Slice(inside, func(i, j int) bool { return inside[i].Path < inside[j].Path })
			out = append(out, inside...)
		case nodestate.LeftoverMount:
			out = append(out, catalogue.Trace{Kind: catalogue.Mounted, Path: rel(l.Path), Detail: l.Detail})
		default:
			if mounted[l.Path] {
				continue
			}
			kind := catalogue.File
			if types[l.Path] == nodestate.TypeDir {
				kind = catalogue.Dir
			}
			out = append(out, catalogue.Trace{Kind: kind, Path: l.Path, Detail: l.Detail})
		}
	}
	return out
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// globalMountTraces are the workload's CSI global mounts still mounted.
func (s *Scenario) globalMountTraces(snap *nodestate.Snapshot) []catalogue.Trace {
	var out []catalogue.Trace
	for _, pv := range s.volumes.PVs {
		if p, n := snap.CSIGlobalMount(pv.Driver, pv.VolumeHandle); n > 0 {
			out = append(out, catalogue.Trace{Kind: catalogue.Mounted, Path: p, Detail: fmt.Sprintf("PV %s, mounted %d times", pv.Name, n)})
		}
	}
	return out
}
