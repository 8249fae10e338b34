package scale

import (
	"time"

	"sigs.k8s.io/skewtest/reports"
)

// fixture is a result of two modes' pods shape and one mode's volumes
// shape, with two hops each, whose old pod dirs time grows as a line and
// whose node Ready time stays flat; at 100 volumes in ebs the counter
// lost increments to the race, and at 60 it does not match.
func fixture() *Result {
	r := &Result{
		Started:      time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC),
		Finished:     time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC),
		Provider:     "local",
		Plan:         []string{"v1.37.2", "v1.34.4", "v1.37.2"},
		Command:      "make bench-scale PLAN=v1.37.2,v1.34.4,v1.37.2",
		PollInterval: 250 * time.Millisecond,
		VolumeLimit:  128,
		MaxPods:      110,
	}
	for _, mode := range []string{"tmpfs", "ebs"} {
		for _, n := range []int{10, 30, 60, 100} {
			for hop, kubelet := range []string{"v1.34.4", "v1.37.2"} {
				p := Point{Mode: mode, Shape: ShapePods, Volumes: n, Pods: n, VolumesPerPod: 1, RunID: "run-" + mode, Hop: hop + 1, Kubelet: kubelet, Verdict: reports.Pass,
					Values: map[string]float64{
						reports.PhaseNodeReady:   0.7 + 0.01*float64(n%3),
						reports.PhaseMountsGone:  1.5 + 0.01*float64(n),
						reports.PhasePodDirsGone: 4 + 0.05*float64(n) + 0.01*float64(hop),
						reports.PhasePodsRunning: 2 + 0.03*float64(n),
						KubeletCPU:               1 + 0.05*float64(n),
						KubeletPeakRSS:           70 + 0.2*float64(n),
					},
					Counters: Counters{VolumesAtStart: n, Present: true, Reconstructed: float64(n)}}
				if mode == "ebs" && n == 100 && hop == 0 {
					p.Counters.Reconstructed, p.Counters.Race = 0, "kubelet metrics registration race"
				}
				if mode == "ebs" && n == 60 && hop == 1 {
					p.Counters.Reconstructed = 59
				}
				r.Points = append(r.Points, p)
			}
		}
	}
	for _, n := range []int{10, 30, 60, 100, 128} {
		r.Points = append(r.Points, Point{Mode: "tmpfs", Shape: ShapeVolumes, Volumes: n, Pods: 1, VolumesPerPod: n, RunID: "run-vol", Hop: 1, Kubelet: "v1.34.4", Verdict: reports.Pass,
			Values:   map[string]float64{reports.PhasePodDirsGone: 3 + 0.002*float64(n*n)},
			Counters: Counters{VolumesAtStart: n}})
	}
	r.FitAll()
	return r
}
