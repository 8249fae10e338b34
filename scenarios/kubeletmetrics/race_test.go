package kubeletmetrics

import (
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

// The log is cut from a real matrix tour's v1.34.4 kubelet whose hop read
// reconstruct_volume_operations_total 0 after reconstructing 6 volumes
// (3 CSI, 3 projected).
func TestParseReconstructionLogReal(t *testing.T) {
	b, err := os.ReadFile("testdata/kubelet-v1.34.4-race.log")
	if err != nil {
		t.Fatal(err)
	}
	l := ParseReconstructionLog(string(b))
	if l.Reconstructed != 6 || l.Failed != 0 || len(l.Lines) != 6 {
		t.Fatalf("parsed %d reconstructed, %d failed, %d lines; want 6, 0, 6 (the device lines are not volumes)", l.Reconstructed, l.Failed, len(l.Lines))
	}
	for _, line := range l.Lines {
		if strings.Contains(line, "marked device as uncertain") {
			t.Errorf("device line counted: %s", line)
		}
	}
}

func TestExplainRegistrationRace(t *testing.T) {
	b, err := os.ReadFile("testdata/kubelet-v1.34.4-race.log")
	if err != nil {
		t.Fatal(err)
	}
	log := ParseReconstructionLog(string(b))
	rs := Evaluate(mustParse(t, raceScrape), CSIExpectations(6))
	if !NeedsKubeletLog(rs) {
		t.Fatal("a failed reconstruct_volume_operations_total does not ask for the kubelet's log")
	}

	got := byMetric(t, ExplainRegistrationRace(rs, log, 6))
	r := got[ReconstructVolumeOperations]
	if r.Verdict != PassWithExpectedDeviations {
		t.Fatalf("verdict %q, want an expected deviation (%s)", r.Verdict, r.Reason)
	}
	for _, want := range []string{"registration race", "shows 6 volumes reconstructed", `Volume is marked as uncertain`, "and 4 more", "is 0"} {
		if !strings.Contains(r.Reason, want) {
			t.Errorf("reason lacks %q: %s", want, r.Reason)
		}
	}
	if got[ReconstructVolumeOperationsErrors].Verdict != Pass {
		t.Errorf("other results changed: %+v", got[ReconstructVolumeOperationsErrors])
	}
	if rs[3].Verdict != Fail {
		t.Error("ExplainRegistrationRace changed its input")
	}

	// A log that shows fewer reconstructions than wanted (or none) does
	// not excuse the counter: the kubelet did not reconstruct.
	for _, l := range []ReconstructionLog{{}, {Reconstructed: 5, Lines: log.Lines[:5]}} {
		r := byMetric(t, ExplainRegistrationRace(rs, l, 6))[ReconstructVolumeOperations]
		if r.Verdict != Fail {
			t.Errorf("log of %d reconstructions: verdict %q, want fail", l.Attempts(), r.Verdict)
		}
	}
	// A passing counter is left alone.
	ok := Evaluate(mustParse(t, strings.Replace(raceScrape, "total 0\n# TYPE reconstruct_volume_operations_errors", "total 6\n# TYPE reconstruct_volume_operations_errors", 1)), CSIExpectations(6))
	if NeedsKubeletLog(ok) {
		t.Error("a passing counter asks for the log")
	}
	if r := byMetric(t, ExplainRegistrationRace(ok, log, 6))[ReconstructVolumeOperations]; r.Verdict != Pass || r.Reason != "" {
		t.Errorf("passing counter became %q: %s", r.Verdict, r.Reason)
	}
}
