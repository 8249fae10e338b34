package reconstruction

import (
	"context"

	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
)

// bytesPerMiB converts peak memory for the notes.
const bytesPerMiB = 1 << 20

// recordKubeletUsage records in the hop what its kubelet has used since it
// started, its CPU time and peak memory, when the node can tell
// (nodes.WithKubeletUsage). It is a measurement, not a check: a node that
// cannot tell, or a read that fails, is noted and the hop goes on.
func (s *Scenario) recordKubeletUsage(ctx context.Context, sc *scenarios.StepContext) {
	n, ok := s.node.(nodes.WithKubeletUsage)
	if !ok {
		return
	}
	u, err := n.KubeletUsage(ctx)
	if err != nil {
		sc.Note("the kubelet's CPU time and peak memory were not read: %v", err)
		return
	}
	s.hop.Kubelet = &reports.KubeletUsage{PID: u.PID, CPUSeconds: u.CPU.Seconds(), PeakRSSBytes: u.PeakRSS}
	sc.Note("kubelet pid %d since its start: %.2f s of CPU, peak RSS %.0f MiB", u.PID, u.CPU.Seconds(), float64(u.PeakRSS)/bytesPerMiB)
}
