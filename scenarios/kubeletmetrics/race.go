package kubeletmetrics

import (
	"fmt"
	"strconv"
	"strings"
)

// MetricsRegistrationRace explains a reconstruct_volume_operations_total
// lower than what the kubelet logged. volumeManager.Run starts the
// reconciler, which reconstructs before its loop, one line before it calls
// metrics.Register; component-base counters are no-ops until registered,
// so increments made before Register runs are lost. No upstream issue
// tracks it yet.
const MetricsRegistrationRace = "kubelet metrics registration race: the volume manager starts the reconciler (which reconstructs first) before it registers its metrics, and component-base counters drop increments made before registration (pkg/kubelet/volumemanager/volume_manager.go, Run; no upstream issue yet)"

// The kubelet's log lines for one volume's reconstruction at start
// (pkg/kubelet/volumemanager/reconciler/reconstruct.go), matched on their
// messages, which 1.27 to 1.37 share, and the line that ends the
// reconstruction (--v=2), logged after the counter counted every volume.
const (
	logReconstructed    = `"Volume is marked as uncertain and added into the actual state"`
	logNotReconstructed = `"Could not construct volume information"`
	logFinished         = `"Volume reconstruction finished"`
)

// ReconstructionLog is what a kubelet's log since its start says about the
// volumes it reconstructed.
type ReconstructionLog struct {
	// Reconstructed and Failed count the volumes the kubelet reconstructed
	// and the ones it could not.
	Reconstructed, Failed int
	// Finished is set when the log says the reconstruction finished.
	Finished bool
	// Lines are the volumes' lines, in order.
	Lines []string
}

// Attempts is the number of volumes the kubelet tried to reconstruct, which
// is what reconstruct_volume_operations_total counts.
func (l ReconstructionLog) Attempts() int { return l.Reconstructed + l.Failed }

// Counts is "6 (6 marked uncertain, 0 could not be constructed)".
func (l ReconstructionLog) Counts() string {
	return fmt.Sprintf("%d (%d marked uncertain, %d could not be constructed)", l.Attempts(), l.Reconstructed, l.Failed)
}

// ParseReconstructionLog reads one kubelet run's log.
func ParseReconstructionLog(log string) ReconstructionLog {
	var out ReconstructionLog
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.Contains(line, logReconstructed):
			out.Reconstructed++
		case strings.Contains(line, logNotReconstructed):
			out.Failed++
		case strings.Contains(line, logFinished):
			out.Finished = true
			continue
		default:
			continue
		}
		out.Lines = append(out.Lines, strings.TrimSpace(line))
	}
	return out
}

// quotedLines is how many log lines a deviation's reason quotes; the rest
// are in the evidence.
const quotedLines = 2

// quote is the first quotedLines of the log's lines, quoted, and how many
// more there are.
func (l ReconstructionLog) quote() string {
	quoted := l.Lines
	if len(quoted) > quotedLines {
		quoted = quoted[:quotedLines]
	}
	var q []string
	for _, line := range quoted {
		q = append(q, strconv.Quote(line))
	}
	more := ""
	if n := len(l.Lines) - len(quoted); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return strings.Join(q, "; ") + more
}

// raceCounter is a counter the kubelet moves while it reconstructs, before
// its volume manager registers its metrics, so that the race can drop its
// increments: what it counts, in words, and how many of them a log shows.
type raceCounter struct {
	what   string
	logged func(ReconstructionLog) int
}

// raceCounters are the race-prone counters. The registration registers
// them one after another, so the race can drop one's increments and not
// the other's: each is judged on its own.
var raceCounters = map[string]raceCounter{
	ReconstructVolumeOperations:       {what: "reconstructions", logged: ReconstructionLog.Attempts},
	ReconstructVolumeOperationsErrors: {what: "failed reconstructions", logged: func(l ReconstructionLog) int { return l.Failed }},
}

// RaceProneCounters are the race-prone counters, in the order a witness
// start is read and described.
var RaceProneCounters = []string{ReconstructVolumeOperations, ReconstructVolumeOperationsErrors}

// RaceProne tells whether the kubelet moves metric while it reconstructs,
// before its volume manager registers its metrics, so that
// MetricsRegistrationRace can drop its increments.
func RaceProne(metric string) bool {
	_, ok := raceCounters[metric]
	return ok
}

// Logged is how many increments of race-prone metric the log shows: the
// volumes tried for reconstruct_volume_operations_total, those that could
// not be constructed for reconstruct_volume_operations_errors_total; 0
// for another metric.
func (l ReconstructionLog) Logged(metric string) int {
	if c, ok := raceCounters[metric]; ok {
		return c.logged(l)
	}
	return 0
}

// LooksLikeRace reports whether rs's reconstruct_volume_operations_total
// failed as MetricsRegistrationRace makes it fail: present, and lower
// than what the kubelet's log since its start shows, which is at least
// want reconstructions. A counter that never moves fails the same way, so
// only witness starts (WitnessStart) can tell the two apart. A counter
// the log does not contradict stays failed: the kubelet did not
// reconstruct.
func LooksLikeRace(rs []Result, log ReconstructionLog, want int) bool {
	for _, r := range rs {
		if r.Metric == ReconstructVolumeOperations && r.Verdict == Fail && r.Present &&
			log.Attempts() >= want && float64(log.Attempts()) > r.Value {
			return true
		}
	}
	return false
}

// MaxWitnessStarts is how many more starts of the same kubelet a hop that
// looks like the race makes at most. The race showed on 5 of 198 runs of
// kubelets whose metric code was untouched, so one start in a few dozen
// meets it: two in a row meeting it again is rare, and a counter that
// never moves reads 0 on every start.
const MaxWitnessStarts = 2

// WitnessStart is one more start of the hop's kubelet, with the hop's
// running pods, made to tell the race from a counter that never moves:
// the new kubelet reconstructs what is on the node then (every volume
// directory of the running pods, and what a known bug left that it cannot
// reconstruct) and logs each. One start serves every race-prone counter.
type WitnessStart struct {
	// N numbers the witness starts of a hop from 1.
	N int
	// Counters are the race-prone counters (RaceProneCounters) once the
	// start's reconstruction finished.
	Counters map[string]float64
	// Log is that start's own log.
	Log ReconstructionLog
}

// ReadWitnessStart reads witness start n of kubelet (its version): the
// race-prone counters from its scrape, under the names the version
// registers, and its reconstructions from its log since its start.
func ReadWitnessStart(n int, s *Scrape, kubelet, log string) (WitnessStart, error) {
	w := WitnessStart{N: n, Counters: map[string]float64{}, Log: ParseReconstructionLog(log)}
	for _, m := range RaceProneCounters {
		v, x, ok, err := s.ExposedValue(kubelet, m)
		if err != nil {
			return WitnessStart{}, err
		}
		if !x.Registered() {
			return WitnessStart{}, fmt.Errorf("witness start %d: kubelet %s does not register %s (%s)", n, kubelet, m, x.Source())
		}
		if !ok {
			return WitnessStart{}, fmt.Errorf("witness start %d: %s is missing from the scrape of kubelet %s, which registers it (%s)", n, x.Name, kubelet, x.Source())
		}
		w.Counters[m] = v
	}
	return w, nil
}

// Counted reports whether the start's metric counted every increment its
// log shows of it (at least one).
func (w WitnessStart) Counted(metric string) bool {
	n := w.Log.Logged(metric)
	return n > 0 && w.Counters[metric] >= float64(n)
}

// Of is what the start shows of metric: "witness start 1: counter 3, its
// log 3 (3 marked uncertain, 0 could not be constructed)".
func (w WitnessStart) Of(metric string) string {
	return fmt.Sprintf("witness start %d: counter %s, its log %s", w.N, strconv.FormatFloat(w.Counters[metric], 'g', -1, 64), w.Log.Counts())
}

// String is "witness start 1: reconstruct_volume_operations_total 3,
// reconstruct_volume_operations_errors_total 0, its log 3 (3 marked
// uncertain, 0 could not be constructed)".
func (w WitnessStart) String() string {
	var cs []string
	for _, m := range RaceProneCounters {
		cs = append(cs, m+" "+strconv.FormatFloat(w.Counters[m], 'g', -1, 64))
	}
	return fmt.Sprintf("witness start %d: %s, its log %s", w.N, strings.Join(cs, ", "), w.Log.Counts())
}

// decided reports whether ws decide metric: one start counted it, or the
// last logged none of its increments, as the next would, on the same
// node (nothing left for the counter to count again).
func decided(ws []WitnessStart, metric string) bool {
	for _, w := range ws {
		if w.Counted(metric) {
			return true
		}
	}
	return len(ws) > 0 && ws[len(ws)-1].Log.Logged(metric) == 0
}

// NeedsWitness reports whether a hop where metric looks like the race
// needs another witness start: ws (the hop's starts so far, taken for any
// counter) do not decide it, and fewer than MaxWitnessStarts were made.
func NeedsWitness(ws []WitnessStart, metric string) bool {
	return !decided(ws, metric) && len(ws) < MaxWitnessStarts
}

// witnessed is what the witness starts ws (none when the hop could take
// none, noWitness saying why) tell of race-prone metric read below what
// the hop's log shows: moves when a start counted every increment its log
// shows, so that the hop's start lost its increments to the race; why
// says so, or why the race is not told from a counter that never moves.
func witnessed(metric string, ws []WitnessStart, noWitness string) (moves bool, why string) {
	what := raceCounters[metric].what
	var starts []string
	counted, logged := false, false
	for _, w := range ws {
		starts = append(starts, w.Of(metric))
		counted = counted || w.Counted(metric)
		logged = logged || w.Log.Logged(metric) > 0
	}
	list := strings.Join(starts, "; ")
	switch {
	case noWitness != "":
		return false, "the metrics registration race cannot be told from a counter that never moves without a witness start of the same kubelet, and this hop could take none: " + noWitness
	case counted:
		return true, fmt.Sprintf("the same kubelet started again as a witness counted its %s (%s), so the counter moves and this start lost its increments", what, list)
	case len(ws) == 0:
		return false, "no witness start of the same kubelet was made, so the metrics registration race cannot be told from a counter that never moves"
	case !logged:
		return false, fmt.Sprintf("the same kubelet started %d more times as a witness, and its log showed none of the %s this counter counts (%s): nothing left on the node for a start to count again, so the metrics registration race cannot be told from a counter that never moves", len(ws), what, list)
	default:
		return false, fmt.Sprintf("the same kubelet started %d more times as a witness, and no start counted the %s its log shows (%s): a counter that never moves, not the metrics registration race, which drops a start's increments now and then, not on every start", len(ws), what, list)
	}
}

// JudgeRace decides a reconstruct_volume_operations_total that
// LooksLikeRace, from the hop's log and its witness starts, and returns
// rs with it decided (the others as they were):
//   - an expected deviation (MetricsRegistrationRace, quoting the hop's
//     log) when a witness start counted every volume its log shows: the
//     counter moves, and the hop's start lost its increments to the race;
//   - a failure naming the starts, their counter values and their logs'
//     counts when none did: a counter that never moves;
//   - a failure that says why when the hop could take no witness start
//     (noWitness), or its starts reconstructed nothing: the race cannot
//     be told from a counter that never moves, so the log alone does not
//     excuse the counter.
//
// A result that does not look like the race is left as it is.
func JudgeRace(rs []Result, log ReconstructionLog, want int, ws []WitnessStart, noWitness string) []Result {
	out := append([]Result(nil), rs...)
	if !LooksLikeRace(rs, log, want) {
		return out
	}
	for i, r := range out {
		if r.Metric != ReconstructVolumeOperations || r.Verdict != Fail || !r.Present {
			continue
		}
		// A failure's reason is its step's headline: the log's lines are
		// in the evidence, and only the deviation quotes them.
		hop := fmt.Sprintf("%s is %s, but the kubelet's log since its start shows %s volumes reconstructed",
			r.Name, strconv.FormatFloat(r.Value, 'g', -1, 64), log.Counts())
		moves, why := witnessed(r.Metric, ws, noWitness)
		if !moves {
			out[i].Reason = hop + "; " + why
			continue
		}
		out[i].Verdict = PassWithExpectedDeviations
		out[i].Reason = fmt.Sprintf("%s: %s; %s; expected deviation: %s", hop, log.quote(), why, MetricsRegistrationRace)
	}
	return out
}

// RaceLoss decides how many increments of race-prone metric, which the
// hop read as value, the metrics registration race dropped: what the
// hop's log shows beyond the counter, when a witness start (ws) counted
// that counter's increments, so that it moves; 0 when the log shows no
// more than the counter, or the witness starts cannot tell the race from
// a counter that never moves (noWitness: why the hop could take none), or
// show a counter that never moves. why says which, for the counter's
// judge; "" when the log shows no more.
func RaceLoss(metric string, value float64, log ReconstructionLog, ws []WitnessStart, noWitness string) (lost float64, why string) {
	short := float64(log.Logged(metric)) - value
	if !RaceProne(metric) || short <= 0 {
		return 0, ""
	}
	hop := fmt.Sprintf("%s is %s, but the kubelet's log since its start shows %d %s (%s)",
		metric, strconv.FormatFloat(value, 'g', -1, 64), log.Logged(metric), raceCounters[metric].what, log.Counts())
	moves, why := witnessed(metric, ws, noWitness)
	if !moves {
		short = 0
	}
	return short, hop + "; " + why
}

// NeedsKubeletLog reports whether a result could be a
// MetricsRegistrationRace, so that the kubelet's log is worth reading.
func NeedsKubeletLog(rs []Result) bool {
	for _, r := range rs {
		if r.Metric == ReconstructVolumeOperations && r.Verdict == Fail && r.Present {
			return true
		}
	}
	return false
}
