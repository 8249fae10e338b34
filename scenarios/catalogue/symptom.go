package catalogue

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
)

// Symptom is exactly what a known bug shows, so that a hop is judged on
// the bug and nothing else: what it leaves or changes on the node, what
// the kubelet logs about it, and how far its counters move. The bug
// counts as seen only when every part shows; anything of the hop's pods
// left or changed that no trace names, an error line about the old pods'
// volumes that no log line names, or a counter moved by another amount
// fails the hop; a symptom that shows in part fails it too.
type Symptom struct {
	// Traces are what the bug leaves or changes (old pods' dirs, files
	// and mounts, a running pod's unmounted volume, a re-created pod that
	// does not run), each a kind and a path pattern relative to the
	// kubelet root (Placeholders).
	Traces []Trace
	// Logs are the kubelet's log lines since its start that show the
	// bug, each a pattern ("*" any text, placeholders as in paths); each
	// must be there.
	Logs []string
	// MayLog are further lines the bug may log about the old pods (a
	// retry), allowed but not required.
	MayLog []string
	// Absent are lines the bug's mechanism rules out: one of them
	// logged is another failure than the bug.
	Absent []string
	// Counters say how far the kubelet's counters move; a counter the
	// symptom does not name keeps the value it has without the bug.
	Counters []Counter
	// AfterDelete is what the bug leaves once the workload is deleted
	// (the CSI global mount an old pod's leftover mount holds), judged
	// then; nil when it leaves nothing more.
	AfterDelete *Symptom
}

// TraceKind is what a trace is: a mount, a directory or file left, a
// mount taken from a running pod, a pod that does not run.
type TraceKind string

const (
	// Mounted: a mount at the path.
	Mounted TraceKind = "mounted"
	// Dir: a directory the kubelet should have removed (an old pod's).
	Dir TraceKind = "dir"
	// File: a file, symlink or other non-directory left.
	File TraceKind = "file"
	// Unmounted: a running pod's mount taken away.
	Unmounted TraceKind = "unmounted"
	// Remounted: a running pod's mount replaced.
	Remounted TraceKind = "remounted"
	// ContainerChanged: a running pod's container replaced or restarted
	// (path pods/<uid>).
	ContainerChanged TraceKind = "container changed"
	// ContentChanged: a file of a running pod's volume (a Secret's or
	// ConfigMap's key, a file written into the volume) holds other content
	// than before the kubelet stopped.
	ContentChanged TraceKind = "content changed"
	// UnmountLogged: the kubelet's log names an unmount of a running pod's
	// volume (no path: the log line is the detail).
	UnmountLogged TraceKind = "unmount logged"
	// PodGone: a running pod gone from the API (path pods/<uid>).
	PodGone TraceKind = "pod gone"
	// Missing: a file the kubelet should have made is missing.
	Missing TraceKind = "missing"
	// NotRunning: the re-created pods did not run (no path).
	NotRunning TraceKind = "re-created pods not running"
	// NotRestarted: a pod's killed container was not started again
	// (path pods/<uid>).
	NotRestarted TraceKind = "killed container not started again"
	// Terminating: a deleted pod still in the API, Terminating, past the
	// hop's bounded cleanup wait (path pods/<uid>).
	Terminating TraceKind = "deleted pod stuck Terminating"
)

// Trace is one thing a bug leaves or changes: in a symptom, its path is a
// pattern; in an observation, the path seen, with what was seen of it.
type Trace struct {
	Kind TraceKind
	// Path is relative to the kubelet root ("pods/<old-uid>"); "" for a
	// kind about no path.
	Path string
	// Detail is what an observation saw of it (a mount's source, the
	// kubelet's words); empty in a symptom.
	Detail string
}

func (t Trace) String() string {
	s := string(t.Kind)
	if t.Path != "" {
		s = t.Path + " " + s
	}
	if t.Detail != "" {
		s += " (" + t.Detail + ")"
	}
	return s
}

// The placeholders of a path or log pattern: each matches one path
// element (in a log, one word), restricted to the values the hop binds
// (Observation.Bind). A trace or log line with an Each placeholder must
// show once for each of its values; any other <name> matches any one
// element ("<n>": a subPath's index).
const (
	// OldUID is each pod the hop deleted.
	OldUID = "<old-uid>"
	// UID is each pod of a hop that keeps its pods running.
	UID = "<uid>"
	// PV is one of the workload's PVs.
	PV = "<pv>"
	// Driver is the workload's CSI driver.
	Driver = "<driver>"
	// VolumeHash is each workload PV's sha256(volume handle), as its CSI
	// global mount is named.
	VolumeHash = "<volume-hash>"
)

// each are the placeholders a trace or line must show for every value of.
var each = []string{OldUID, UID, VolumeHash}

// placeholder is any <name> in a pattern.
var placeholder = regexp.MustCompile(`<[a-z][a-z-]*>`)

// Count is a number a counter is compared with, in words; the run
// measures it on the node (reconstruction.symptomCounts).
type Count string

const (
	// Unreconstructable is what the fault planted that the kubelet
	// cannot reconstruct: the volume dirs (or files where a volume dir
	// belongs) on the node at the kubelet's start, this hop's and those
	// earlier hops left.
	Unreconstructable Count = "the planted volume dirs the kubelet finds at its start (this hop's and earlier hops')"
	// OldPodDirs are the old pods' dirs left on the node, this hop's and
	// earlier hops': the orphan sweep fails on each of them.
	OldPodDirs Count = "the old pods' dirs left (this hop's and earlier hops')"
	// LocalVolumeDirs are the local-volume dirs of the deleted pods at
	// the kubelet's start.
	LocalVolumeDirs Count = "the deleted pods' local-volume dirs at the kubelet's start"
)

// Counter is how far a kubelet counter moves with the bug: exactly Of,
// from 0 without it.
type Counter struct {
	Metric string
	Of     Count
}

// RaceProne tells whether the counter moves while the kubelet
// reconstructs, before its volume manager registers its metrics, so that
// the metrics registration race can drop increments
// (kubeletmetrics.MetricsRegistrationRace).
func (c Counter) RaceProne() bool { return kubeletmetrics.RaceProne(c.Metric) }

func (c Counter) String() string { return c.Metric + " == " + string(c.Of) }

// IsZero tells whether the symptom names nothing.
func (sy Symptom) IsZero() bool {
	return len(sy.Traces) == 0 && len(sy.Logs) == 0 && len(sy.Counters) == 0 && sy.AfterDelete == nil
}

// String is the symptom in one line, for the catalogue and the reports.
func (sy Symptom) String() string {
	var parts []string
	if len(sy.Traces) > 0 {
		var ts []string
		for _, t := range sy.Traces {
			ts = append(ts, t.String())
		}
		parts = append(parts, "shows "+strings.Join(ts, ", "))
	}
	if len(sy.Logs) > 0 {
		parts = append(parts, "logs "+quoteAll(sy.Logs))
	}
	if len(sy.MayLog) > 0 {
		parts = append(parts, "may log "+quoteAll(sy.MayLog))
	}
	if len(sy.Absent) > 0 {
		parts = append(parts, "never logs "+quoteAll(sy.Absent))
	}
	if len(sy.Counters) > 0 {
		var cs []string
		for _, c := range sy.Counters {
			cs = append(cs, c.String())
		}
		parts = append(parts, "counts "+strings.Join(cs, ", "))
	}
	if sy.AfterDelete != nil {
		parts = append(parts, "after the workload is deleted: "+sy.AfterDelete.String())
	}
	return strings.Join(parts, "; ")
}

func quoteAll(ss []string) string {
	var q []string
	for _, s := range ss {
		q = append(q, fmt.Sprintf("%q", s))
	}
	return strings.Join(q, ", ")
}

// Reading is a counter as the hop read it.
type Reading struct {
	Value float64
	// Lost is how many increments of this race-prone counter the metrics
	// registration race dropped: what the kubelet's log shows beyond this
	// counter (failed reconstructions for the errors counter), once a
	// witness start of the same kubelet counted them (the counter moves);
	// 0 otherwise (kubeletmetrics.RaceLoss).
	Lost float64
	// Race says, where the log shows more than the counter, what the
	// witness starts showed: why Lost excuses the shortfall, or why
	// nothing does (a counter that never moves, or no witness to tell).
	Race string
}

// verdict is how a symptom matched an observation: what of it showed
// (traces and lines; counters apart, as a counter alone may be moved by
// what earlier hops left), what did not, what showed beyond it.
type verdict struct {
	shown, counted, missing, unexpected []string
	notes                               []string
}

// match compares what the hop showed with the symptom.
func (sy Symptom) match(o Observation) verdict {
	var v verdict
	if o.Seen && len(o.Traces) == 0 {
		v.unexpected = append(v.unexpected, "the entry's check saw: "+o.Detail)
	}
	v.matchTraces(sy.Traces, o)
	v.matchLogs(sy, o)
	v.matchCounters(sy.Counters, o)
	return v
}

func (v *verdict) matchTraces(want []Trace, o Observation) {
	seen := map[Trace]bool{}
	for _, t := range o.Traces {
		key := Trace{Kind: t.Kind, Path: t.Path}
		if seen[key] {
			continue
		}
		seen[key] = true
		named := false
		for _, w := range want {
			if w.Kind == t.Kind && pathMatches(w.Path, t.Path, o.Bind, "", "") {
				named = true
				break
			}
		}
		if !named {
			v.unexpected = append(v.unexpected, "left "+t.String())
		}
	}
	for _, w := range want {
		forEach(w.Path, o.Bind, func(ph, val string) {
			label := w.String()
			if ph != "" {
				label = strings.ReplaceAll(w.Path, ph, val) + " " + string(w.Kind)
			}
			for _, t := range o.Traces {
				if t.Kind == w.Kind && pathMatches(w.Path, t.Path, o.Bind, ph, val) {
					v.shown = append(v.shown, label)
					return
				}
			}
			v.missing = append(v.missing, label)
		})
	}
}

// cleanupWords mark a kubelet error line as about a pod's volume cleanup.
var cleanupWords = []string{"orphaned pod", "UnmountVolume", "UnmapVolume", "UnmountDevice", "TearDown", "subpath", "rmdir"}

// transient are errors the kubelet logs while it retries what then
// succeeds, whatever the bug: its CSI driver not registered yet after the
// kubelet's start.
var transient = []string{"not found in the list of registered CSI drivers"}

// klogErrorLine is a klog line at error level.
var klogErrorLine = regexp.MustCompile(`^E\d{4} `)

func (v *verdict) matchLogs(sy Symptom, o Observation) {
	if !o.Logged {
		if len(sy.Logs) > 0 || len(sy.Absent) > 0 {
			v.notes = append(v.notes, "the node cannot show its kubelet's log: its lines are not judged")
		}
		return
	}
	lines := strings.Split(o.Log, "\n")
	for _, p := range sy.Logs {
		forEach(p, o.Bind, func(ph, val string) {
			label := p
			if ph != "" {
				label = strings.ReplaceAll(p, ph, val)
			}
			if line := findLine(lines, p, o.Bind, ph, val); line != "" {
				v.shown = append(v.shown, fmt.Sprintf("logged %q", label))
				return
			}
			v.missing = append(v.missing, fmt.Sprintf("log line %q", label))
		})
	}
	for _, p := range sy.Absent {
		if line := findLine(lines, p, o.Bind, "", ""); line != "" {
			v.unexpected = append(v.unexpected, fmt.Sprintf("logged %q, which the bug's mechanism rules out", clip(line)))
		}
	}
	// The kubelet's error lines about the old pods' volume cleanup, on a
	// hop whose bug leaves the old pods' state: each must be one the
	// symptom names.
	if !namesOldPods(sy.Traces) {
		return
	}
	named := append(append(append([]string(nil), sy.Logs...), sy.MayLog...), transient...)
	said := map[string]bool{}
	for _, line := range lines {
		if !klogErrorLine.MatchString(line) || !aboutOldPod(line, o.Bind[OldUID]) || !anyOf(line, cleanupWords) {
			continue
		}
		ok := false
		for _, p := range named {
			if lineMatches(p, line, o.Bind, "", "") {
				ok = true
				break
			}
		}
		msg := clip(logMessage(line))
		if !ok && !said[msg] {
			said[msg] = true
			v.unexpected = append(v.unexpected, fmt.Sprintf("logged %q", msg))
		}
	}
}

func (v *verdict) matchCounters(want []Counter, o Observation) {
	for _, c := range want {
		r, ok := o.Counters[c.Metric]
		if !ok {
			v.notes = append(v.notes, c.Metric+" not exposed by this kubelet: not judged")
			continue
		}
		n, ok := o.Counts[c.Of]
		if !ok {
			v.unexpected = append(v.unexpected, fmt.Sprintf("%s = %g, and the run did not measure %s to compare it with", c.Metric, r.Value, c.Of))
			continue
		}
		want := float64(n)
		lost, race := 0.0, ""
		if c.RaceProne() {
			lost = r.Lost
			if r.Race != "" {
				race = "; " + r.Race
			}
		}
		switch {
		case n == 0 && r.Value == 0:
			// Nothing for the bug to count: neither shown nor missing.
		case r.Value == want:
			v.counted = append(v.counted, fmt.Sprintf("%s = %g", c.Metric, r.Value))
		case r.Value < want && r.Value >= want-lost:
			v.counted = append(v.counted, fmt.Sprintf("%s = %g, %g short of %d: the metrics registration race dropped up to %g increments%s", c.Metric, r.Value, want-r.Value, n, lost, race))
		case r.Value == 0:
			v.missing = append(v.missing, fmt.Sprintf("%s == %d (%s; it is 0%s)", c.Metric, n, c.Of, race))
		default:
			v.unexpected = append(v.unexpected, fmt.Sprintf("%s = %g, where the symptom names %d (%s)%s", c.Metric, r.Value, n, c.Of, race))
		}
	}
}

// namesOldPods tells whether a trace names the deleted pods' state.
func namesOldPods(ts []Trace) bool {
	for _, t := range ts {
		if strings.Contains(t.Path, OldUID) {
			return true
		}
	}
	return false
}

func aboutOldPod(line string, uids []string) bool {
	return anyOf(line, uids)
}

func anyOf(s string, subs []string) bool {
	for _, x := range subs {
		if x != "" && strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// logMessage is a klog line without its header (level, time, thread,
// file:line), so that the same message logged again reads the same.
func logMessage(line string) string {
	if _, rest, ok := strings.Cut(line, "] "); ok {
		return rest
	}
	return line
}

// maxQuoted bounds a line quoted in a verdict.
const maxQuoted = 300

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxQuoted {
		return s[:maxQuoted] + "…"
	}
	return s
}

// forEach calls fn once for each value of the pattern's Each placeholder
// (ph, val), or once with ("", "") when it has none.
func forEach(pattern string, bind map[string][]string, fn func(ph, val string)) {
	for _, ph := range each {
		if strings.Contains(pattern, ph) {
			vals := append([]string(nil), bind[ph]...)
			sort.Strings(vals)
			for _, val := range vals {
				fn(ph, val)
			}
			return
		}
	}
	fn("", "")
}

// pathMatches tells whether path matches pattern, each placeholder one
// element among its bound values (ph fixed to val when set).
func pathMatches(pattern, path string, bind map[string][]string, ph, val string) bool {
	return compile(pattern, bind, ph, val, `[^/]+`, true).MatchString(path)
}

// lineMatches tells whether a log line matches pattern: "*" is any text,
// a placeholder one word among its bound values.
func lineMatches(pattern, line string, bind map[string][]string, ph, val string) bool {
	return compile(pattern, bind, ph, val, `[^\s"\\/]+`, false).MatchString(line)
}

func findLine(lines []string, pattern string, bind map[string][]string, ph, val string) string {
	for _, l := range lines {
		if lineMatches(pattern, l, bind, ph, val) {
			return l
		}
	}
	return ""
}

// compile turns a pattern into a regexp: literal text, "*" any text, each
// placeholder one element (elem) among its bound values; whole anchors it.
func compile(pattern string, bind map[string][]string, ph, val, elem string, whole bool) *regexp.Regexp {
	var b strings.Builder
	last := 0
	lit := func(s string) {
		parts := strings.Split(s, "*")
		for i, p := range parts {
			if i > 0 {
				b.WriteString(".*")
			}
			b.WriteString(regexp.QuoteMeta(p))
		}
	}
	for _, loc := range placeholder.FindAllStringIndex(pattern, -1) {
		lit(pattern[last:loc[0]])
		name := pattern[loc[0]:loc[1]]
		switch vals, bound := bind[name]; {
		case name == ph:
			b.WriteString(regexp.QuoteMeta(val))
		case bound:
			var q []string
			for _, v := range vals {
				q = append(q, regexp.QuoteMeta(v))
			}
			if len(q) == 0 {
				q = []string{`\x00nothing bound`}
			}
			b.WriteString("(?:" + strings.Join(q, "|") + ")")
		default:
			b.WriteString(elem)
		}
		last = loc[1]
	}
	lit(pattern[last:])
	if whole {
		return regexp.MustCompile("^" + b.String() + "$")
	}
	return regexp.MustCompile(b.String())
}
