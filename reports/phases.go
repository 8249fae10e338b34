package reports

import (
	"strconv"
	"strings"
)

// Hop phases the reconstruction scenario records in Hop.Timings, in the
// order they happen. The cleanup ones are measured from the kubelet's
// start; PhaseKubeletStop is measured from the stop request.
const (
	PhaseKubeletStop = "kubelet stop"
	PhaseNodeReady   = "node Ready"
	PhaseMountsGone  = "old mounts gone"
	PhasePodDirsGone = "old pod dirs gone"
)

const (
	// EnvVolumeKind is the Run.Environment key of the volume kind.
	EnvVolumeKind = "Volume kind"
	// ReconstructionScenarioPrefix starts the scenario name of a skew run;
	// the volume kind follows ("reconstruction-csi").
	ReconstructionScenarioPrefix = "reconstruction-"
)

// HopPhases are the hop phases in the order they happen.
var HopPhases = []string{PhaseKubeletStop, PhaseNodeReady, PhaseMountsGone, PhasePodDirsGone}

// VolumeKind is the run's volume kind: its Environment entry, else what
// follows "reconstruction-" in its scenario name, else "".
func (r *Run) VolumeKind() string {
	for _, kv := range r.Environment {
		if kv.Key == EnvVolumeKind {
			return oneLine(kv.Value)
		}
	}
	if k, ok := strings.CutPrefix(r.Scenario, ReconstructionScenarioPrefix); ok {
		return oneLine(k)
	}
	return ""
}

// Timing returns the duration of the hop's phase, and false when the hop
// did not record it.
func (h Hop) Timing(phase string) (Timing, bool) {
	for _, t := range h.Timings {
		if t.Phase == phase {
			return t, true
		}
	}
	return Timing{}, false
}

// HopAnchor is the id of the hop's row in report.md, so that other pages
// (the sign-off page) can link to one hop: "hop-2", or "hop-<node>-2" when
// the hop names its node (a matrix tour numbers hops per trail). Only
// [a-z0-9-] are kept.
func HopAnchor(h Hop) string {
	id := "hop-"
	if h.Node != "" {
		var b strings.Builder
		for _, r := range strings.ToLower(h.Node) {
			if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
				b.WriteRune(r)
			} else {
				b.WriteByte('-')
			}
		}
		id += b.String() + "-"
	}
	return id + strconv.Itoa(h.Number)
}
