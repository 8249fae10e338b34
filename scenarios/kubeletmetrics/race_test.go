package kubeletmetrics

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// raceScrape is the scrape of a kubelet that lost its reconstruction
// increments: the counter reads 0.
const raceScrape = `# TYPE reconstruct_volume_operations_total counter
reconstruct_volume_operations_total 0
# TYPE reconstruct_volume_operations_errors_total counter
reconstruct_volume_operations_errors_total 0
`

// counterScrape is a scrape whose reconstruction counter reads n.
func counterScrape(n int) string {
	return strings.Replace(raceScrape, "total 0\n# TYPE reconstruct_volume_operations_errors", fmt.Sprintf("total %d\n# TYPE reconstruct_volume_operations_errors", n), 1)
}

// raceLog is the log of a real matrix tour's v1.34.4 kubelet whose hop
// read reconstruct_volume_operations_total 0 after reconstructing 6
// volumes (3 CSI, 3 projected).
func raceLog(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/kubelet-v1.34.4-race.log")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseReconstructionLogReal(t *testing.T) {
	l := ParseReconstructionLog(raceLog(t))
	if l.Reconstructed != 6 || l.Failed != 0 || len(l.Lines) != 6 || !l.Finished {
		t.Fatalf("parsed %d reconstructed, %d failed, %d lines, finished %v; want 6, 0, 6 (the device lines are not volumes), true", l.Reconstructed, l.Failed, len(l.Lines), l.Finished)
	}
	for _, line := range l.Lines {
		if strings.Contains(line, "marked device as uncertain") {
			t.Errorf("device line counted: %s", line)
		}
	}
	if got := ParseReconstructionLog(strings.ReplaceAll(raceLog(t), "Volume reconstruction finished", "")); got.Finished {
		t.Error("a log without the end of the reconstruction reads as finished")
	}
}

// firstReconstructions is log with only its first n volumes'
// reconstructions, and the line that ends the reconstruction.
func firstReconstructions(log string, n int) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, logReconstructed) {
			if n == 0 {
				continue
			}
			n--
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// witness is witness start n of a v1.34.4 kubelet that scraped counter
// after logging the reconstructions of log.
func witness(t *testing.T, n, counter int, log string) WitnessStart {
	t.Helper()
	w, err := ReadWitnessStart(n, mustParse(t, counterScrape(counter)), "v1.34.4", log)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The race and a counter that never moves both read 0 on the hop with
// the log showing the reconstructions; only the witness starts tell them
// apart: the race does not recur on every start, a counter that never
// moves reads 0 on each.
func TestJudgeRace(t *testing.T) {
	log := raceLog(t)
	hopLog := ParseReconstructionLog(log)
	rs := evaluate(t, mustParse(t, raceScrape), "v1.34.4", CSIExpectations(6))
	if !NeedsKubeletLog(rs) || !LooksLikeRace(rs, hopLog, 6) {
		t.Fatal("a counter of 0 with 6 reconstructions in the log does not look like the race")
	}
	// The running pods' 3 volumes reconstructed again at each witness
	// start.
	three := firstReconstructions(log, 3)
	if n := ParseReconstructionLog(three).Attempts(); n != 3 {
		t.Fatalf("witness log has %d reconstructions, want 3", n)
	}
	judge := func(ws []WitnessStart, noWitness string) Result {
		t.Helper()
		got := byMetric(t, JudgeRace(rs, hopLog, 6, ws, noWitness))
		if got[ReconstructVolumeOperationsErrors].Verdict != Pass {
			t.Errorf("other results changed: %+v", got[ReconstructVolumeOperationsErrors])
		}
		return got[ReconstructVolumeOperations]
	}

	t.Run("the race: the first witness counts", func(t *testing.T) {
		ws := []WitnessStart{witness(t, 1, 3, three)}
		if NeedsWitness(ws, ReconstructVolumeOperations) {
			t.Error("a witness that counted asks for another")
		}
		r := judge(ws, "")
		if r.Verdict != PassWithExpectedDeviations {
			t.Fatalf("verdict %q, want an expected deviation (%s)", r.Verdict, r.Reason)
		}
		for _, want := range []string{"registration race", "shows 6 (6 marked uncertain, 0 could not be constructed) volumes reconstructed", `Volume is marked as uncertain`, "and 4 more", "is 0",
			"witness start 1: counter 3, its log 3 (3 marked uncertain, 0 could not be constructed)"} {
			if !strings.Contains(r.Reason, want) {
				t.Errorf("reason lacks %q: %s", want, r.Reason)
			}
		}
	})
	t.Run("the race twice in a row, then a count", func(t *testing.T) {
		ws := []WitnessStart{witness(t, 1, 1, three)}
		if !NeedsWitness(ws, ReconstructVolumeOperations) {
			t.Fatal("a witness that lost increments asks for no other")
		}
		ws = append(ws, witness(t, 2, 3, three))
		if r := judge(ws, ""); r.Verdict != PassWithExpectedDeviations || !strings.Contains(r.Reason, "witness start 1: counter 1, its log 3") || !strings.Contains(r.Reason, "witness start 2: counter 3") {
			t.Errorf("verdict %q: %s", r.Verdict, r.Reason)
		}
	})
	t.Run("a counter that never moves", func(t *testing.T) {
		var ws []WitnessStart
		for NeedsWitness(ws, ReconstructVolumeOperations) {
			ws = append(ws, witness(t, len(ws)+1, 0, three))
		}
		if len(ws) != MaxWitnessStarts {
			t.Fatalf("%d witness starts, want %d", len(ws), MaxWitnessStarts)
		}
		r := judge(ws, "")
		if r.Verdict != Fail {
			t.Fatalf("verdict %q, want fail (%s)", r.Verdict, r.Reason)
		}
		for _, want := range []string{"is 0, but the kubelet's log since its start shows 6", "started 2 more times as a witness",
			"witness start 1: counter 0, its log 3", "witness start 2: counter 0, its log 3", "a counter that never moves"} {
			if !strings.Contains(r.Reason, want) {
				t.Errorf("reason lacks %q: %s", want, r.Reason)
			}
		}
	})
	t.Run("a witness that reconstructed nothing decides nothing", func(t *testing.T) {
		ws := []WitnessStart{witness(t, 1, 0, ""), witness(t, 2, 0, "")}
		if r := judge(ws, ""); r.Verdict != Fail {
			t.Errorf("verdict %q: %s", r.Verdict, r.Reason)
		}
	})
	t.Run("no witness start possible", func(t *testing.T) {
		r := judge(nil, "the re-created pods did not run")
		if r.Verdict != Fail || !strings.Contains(r.Reason, "cannot be told from a counter that never moves") || !strings.Contains(r.Reason, "could take none: the re-created pods did not run") {
			t.Errorf("verdict %q: %s", r.Verdict, r.Reason)
		}
		if r := judge(nil, ""); r.Verdict != Fail {
			t.Errorf("no witness, no reason: verdict %q", r.Verdict)
		}
	})

	// A log that shows fewer reconstructions than wanted (or none) does
	// not look like the race: the kubelet did not reconstruct, and no
	// witness is made.
	for _, l := range []ReconstructionLog{{}, {Reconstructed: 5, Lines: hopLog.Lines[:5]}} {
		if LooksLikeRace(rs, l, 6) {
			t.Errorf("log of %d reconstructions looks like the race", l.Attempts())
		}
		r := byMetric(t, JudgeRace(rs, l, 6, []WitnessStart{witness(t, 1, 3, three)}, ""))[ReconstructVolumeOperations]
		if r.Verdict != Fail || r.Reason != "reconstruct_volume_operations_total is 0, want >= 6" {
			t.Errorf("log of %d reconstructions: verdict %q (%s), want the plain failure", l.Attempts(), r.Verdict, r.Reason)
		}
	}
	// A passing counter is left alone.
	ok := evaluate(t, mustParse(t, counterScrape(6)), "v1.34.4", CSIExpectations(6))
	if NeedsKubeletLog(ok) || LooksLikeRace(ok, hopLog, 6) {
		t.Error("a passing counter asks for the log")
	}
	if r := byMetric(t, JudgeRace(ok, hopLog, 6, nil, ""))[ReconstructVolumeOperations]; r.Verdict != Pass || r.Reason != "" {
		t.Errorf("passing counter became %q: %s", r.Verdict, r.Reason)
	}
	if rs[3].Verdict != Fail {
		t.Error("JudgeRace changed its input")
	}
}

// A witness start reads the counter under the name its kubelet's version
// registers; one missing from the scrape, or a version outside the table,
// is an error.
func TestReadWitnessStart(t *testing.T) {
	w := witness(t, 2, 4, raceLog(t))
	if w.N != 2 || w.Counters[ReconstructVolumeOperations] != 4 || w.Log.Attempts() != 6 || w.Counted(ReconstructVolumeOperations) {
		t.Errorf("read %+v", w)
	}
	// The errors counter is read too: one start serves both counters.
	if e := witness(t, 1, 3, volDataLog(1, 2)); e.Counters[ReconstructVolumeOperationsErrors] != 0 || e.Counted(ReconstructVolumeOperationsErrors) || !e.Counted(ReconstructVolumeOperations) ||
		e.String() != "witness start 1: reconstruct_volume_operations_total 3, reconstruct_volume_operations_errors_total 0, its log 3 (1 marked uncertain, 2 could not be constructed)" {
		t.Errorf("read %+v: %s", e, e)
	}
	if _, err := ReadWitnessStart(1, mustParse(t, "# TYPE reconstruct_volume_operations_total counter\nreconstruct_volume_operations_total 1\n"), "v1.37.2", ""); err == nil || !strings.Contains(err.Error(), "reconstruct_volume_operations_errors_total is missing") {
		t.Errorf("missing errors counter: %v", err)
	}
	if _, err := ReadWitnessStart(1, mustParse(t, "# TYPE x counter\nx 1\n"), "v1.37.2", ""); err == nil || !strings.Contains(err.Error(), "reconstruct_volume_operations_total is missing from the scrape of kubelet v1.37.2") {
		t.Errorf("missing counter: %v", err)
	}
	if _, err := ReadWitnessStart(1, mustParse(t, raceScrape), "v1.26.15", ""); err == nil || !strings.Contains(err.Error(), "does not register") {
		t.Errorf("1.26.15: %v", err)
	}
	if _, err := ReadWitnessStart(1, mustParse(t, raceScrape), "v1.40.0", ""); err == nil {
		t.Error("v1.40.0: no error")
	}
}

// volDataLog is a v1.37.2 kubelet's log since its start on a
// vol-data-empty node: reconstructed running pods' volumes marked
// uncertain, failed old pods' volumes whose vol_data.json is empty.
func volDataLog(reconstructed, failed int) string {
	var lines []string
	for i := 1; i <= reconstructed; i++ {
		lines = append(lines, fmt.Sprintf(`I1206 10:00:00.00000%d    1 reconstruct.go:112] "Volume is marked as uncertain and added into the actual state" pod="" podName="n%d" volumeName="kubernetes.io/csi/drv^h%d"`, i, i, i))
	}
	for i := 1; i <= failed; i++ {
		lines = append(lines, fmt.Sprintf(`I1206 10:00:00.00001%d    1 reconstruct.go:67] "Could not construct volume information" podName="u%d" volumeSpecName="pv%d" err="kubernetes.io/csi: plugin.ConstructVolumeSpec failed loading volume data using [/k/pods/u%d/volumes/kubernetes.io~csi/pv%d]: kubernetes.io/csi: failed to decode volume data file [/k/pods/u%d/volumes/kubernetes.io~csi/pv%d/vol_data.json]: EOF"`, i, i, i, i, i, i, i))
	}
	lines = append(lines, `I1206 10:00:00.000020    1 reconstruct.go:150] "Volume reconstruction finished"`)
	return strings.Join(lines, "\n")
}

// countersScrape is a scrape whose reconstruction counters read total and
// errors.
func countersScrape(total, errors int) string {
	return fmt.Sprintf("# TYPE reconstruct_volume_operations_total counter\nreconstruct_volume_operations_total %d\n# TYPE reconstruct_volume_operations_errors_total counter\nreconstruct_volume_operations_errors_total %d\n", total, errors)
}

// The registration registers the counters one after another, so the race
// can drop the errors counter's increments alone: the hop's total counted
// its 3 volumes, its errors counter none of the 2 failures its log shows.
// Witness starts decide, as for the total: the known bug's volume dirs are
// still on the node, so a start logs their failures again, and a working
// errors counter counts them; one that never moves counts none on every
// start; a start that logs no failure cannot tell.
func TestRaceLossErrorsAlone(t *testing.T) {
	const errs = ReconstructVolumeOperationsErrors
	hop := ParseReconstructionLog(volDataLog(1, 2))
	if hop.Logged(errs) != 2 || hop.Logged(ReconstructVolumeOperations) != 3 || hop.Logged(ForceCleanedFailedVolumeOps) != 0 {
		t.Fatalf("logged %d failures, %d attempts", hop.Logged(errs), hop.Logged(ReconstructVolumeOperations))
	}
	rs := evaluate(t, mustParse(t, countersScrape(3, 0)), "v1.37.2", CSIExpectations(3))
	if NeedsKubeletLog(rs) || LooksLikeRace(rs, hop, 3) {
		t.Fatal("a total that counted every volume looks like the race")
	}
	w := func(n, total, errors int, log string) WitnessStart {
		t.Helper()
		w, err := ReadWitnessStart(n, mustParse(t, countersScrape(total, errors)), "v1.37.2", log)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// A witness start reconstructs the running pods' 2 volumes and fails
	// again on the old pods' 2.
	again := volDataLog(2, 2)

	t.Run("the race: the witness counts the failures", func(t *testing.T) {
		ws := []WitnessStart{w(1, 4, 2, again)}
		if NeedsWitness(ws, errs) || NeedsWitness(ws, ReconstructVolumeOperations) {
			t.Error("a start that counted both counters asks for another")
		}
		lost, why := RaceLoss(errs, 0, hop, ws, "")
		if lost != 2 {
			t.Errorf("lost %g, want 2 (%s)", lost, why)
		}
		for _, want := range []string{"reconstruct_volume_operations_errors_total is 0, but the kubelet's log since its start shows 2 failed reconstructions",
			"counted its failed reconstructions (witness start 1: counter 2, its log 4 (2 marked uncertain, 2 could not be constructed))", "this start lost its increments"} {
			if !strings.Contains(why, want) {
				t.Errorf("why lacks %q: %s", want, why)
			}
		}
		if lost, _ := RaceLoss(errs, 1, hop, ws, ""); lost != 1 {
			t.Errorf("one of two failures counted: lost %g, want 1", lost)
		}
	})
	t.Run("the race again at the first witness, then a count", func(t *testing.T) {
		ws := []WitnessStart{w(1, 4, 0, again)}
		if !NeedsWitness(ws, errs) {
			t.Fatal("a start whose errors counter lost the failures it logged asks for no other")
		}
		if NeedsWitness(ws, ReconstructVolumeOperations) {
			t.Error("the start counted the total, yet the total asks for another")
		}
		ws = append(ws, w(2, 4, 2, again))
		if lost, why := RaceLoss(errs, 0, hop, ws, ""); lost != 2 || !strings.Contains(why, "witness start 1: counter 0, its log 4") || !strings.Contains(why, "witness start 2: counter 2") {
			t.Errorf("lost %g: %s", lost, why)
		}
	})
	t.Run("an errors counter that never moves", func(t *testing.T) {
		var ws []WitnessStart
		for NeedsWitness(ws, errs) {
			// The total counts on every start: only the errors
			// counter is broken.
			ws = append(ws, w(len(ws)+1, 4, 0, again))
		}
		if len(ws) != MaxWitnessStarts {
			t.Fatalf("%d witness starts, want %d", len(ws), MaxWitnessStarts)
		}
		lost, why := RaceLoss(errs, 0, hop, ws, "")
		if lost != 0 {
			t.Errorf("lost %g, want 0: %s", lost, why)
		}
		for _, want := range []string{"started 2 more times as a witness", "no start counted the failed reconstructions its log shows",
			"witness start 2: counter 0, its log 4 (2 marked uncertain, 2 could not be constructed)", "a counter that never moves"} {
			if !strings.Contains(why, want) {
				t.Errorf("why lacks %q: %s", want, why)
			}
		}
	})
	t.Run("nothing failing left on the node: the witness cannot tell", func(t *testing.T) {
		ws := []WitnessStart{w(1, 2, 0, volDataLog(2, 0))}
		if NeedsWitness(ws, errs) {
			t.Error("a start that logged no failure asks for another, which would find the same node")
		}
		lost, why := RaceLoss(errs, 0, hop, ws, "")
		if lost != 0 || !strings.Contains(why, "showed none of the failed reconstructions this counter counts") || !strings.Contains(why, "cannot be told from a counter that never moves") {
			t.Errorf("lost %g: %s", lost, why)
		}
	})
	t.Run("no witness start possible", func(t *testing.T) {
		lost, why := RaceLoss(errs, 0, hop, nil, "the re-created pods did not run")
		if lost != 0 || !strings.Contains(why, "could take none: the re-created pods did not run") {
			t.Errorf("lost %g: %s", lost, why)
		}
		if lost, why := RaceLoss(errs, 0, hop, nil, ""); lost != 0 || !strings.Contains(why, "no witness start of the same kubelet was made") {
			t.Errorf("no witness, no reason: lost %g: %s", lost, why)
		}
	})
	t.Run("nothing short, or not race-prone", func(t *testing.T) {
		ws := []WitnessStart{w(1, 4, 2, again)}
		if lost, why := RaceLoss(errs, 2, hop, ws, ""); lost != 0 || why != "" {
			t.Errorf("errors counted every failure: lost %g, %q", lost, why)
		}
		if lost, why := RaceLoss(ForceCleanedFailedVolumeOps, 0, hop, ws, ""); lost != 0 || why != "" || RaceProne(ForceCleanedFailedVolumeOps) {
			t.Errorf("a counter moved after the registration: lost %g, %q", lost, why)
		}
	})
}
