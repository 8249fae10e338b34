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
	// PhasePodsRunning is when the re-created pods all ran and were
	// ready, from the kubelet's start; recorded after the cleanup phases,
	// though it may happen before them.
	PhasePodsRunning = "pods Running"
)

// PhaseTour is the run timing of a matrix tour's trails, from the first
// hop's start to the last trail's end: the tour without bring-up and
// teardown.
const PhaseTour = "tour"

const (
	// EnvVolumeKind is the Run.Environment key of the volume kind.
	EnvVolumeKind = "Volume kind"
	// EnvCgroup is the Run.Environment key of the node host's cgroup mode
	// ("v2 (unified)", "v1 (hybrid: ...)", "v1 (legacy)"), and
	// EnvInitSystem that of its init system ("systemd", "not systemd
	// (PID 1: ...)").
	EnvCgroup     = "cgroup"
	EnvInitSystem = "Init system"
	// ReconstructionScenarioPrefix starts the scenario name of a skew run;
	// the volume kind follows ("reconstruction-csi").
	ReconstructionScenarioPrefix = "reconstruction-"
	// CatalogueScenarioPrefix starts the scenario name of a run of a
	// catalogue entry ("catalogue-reboot").
	CatalogueScenarioPrefix = "catalogue-"
)

// CatalogueEntry is the catalogue entry a run ran ("reboot"), "" for the
// baseline and the matrix tour.
func (r *Run) CatalogueEntry() string {
	e, _ := strings.CutPrefix(r.Scenario, CatalogueScenarioPrefix)
	if e == r.Scenario {
		return ""
	}
	return oneLine(e)
}

// JudgesEntry tells whether the step is the catalogue's judging of entry
// on its hop's kubelet: "hop 1: catalogue fault pvc-terminating on
// kubelet v1.32.2", as the reconstruction scenario names it.
func (s Step) JudgesEntry(entry string) bool {
	head, _, _ := strings.Cut(s.Name, " on kubelet ")
	return strings.Contains(head, "catalogue ") && strings.HasSuffix(head, " "+entry)
}

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

// HopAnchor is the id of the hop's row in report.md ("hop-2"), so that the
// matrix table and other pages (the sign-off page) can link to one hop.
// Hop numbers are unique within a run: a matrix tour numbers the hops of
// all its trails in one sequence when it merges them.
func HopAnchor(h Hop) string {
	return "hop-" + strconv.Itoa(h.Number)
}
