package bench

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/reports/scale"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// The runs, mode by mode, pods shape first, smallest first; the counts
// checked against the kubelet's and the driver's limits.
func TestScaleJobs(t *testing.T) {
	jobs, err := scaleJobs("local", "30,10", "128", "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs {
		got = append(got, j.String())
	}
	want := []string{
		"tmpfs, 10 pods with a volume each", "tmpfs, 30 pods with a volume each", "tmpfs, one pod with 128 volumes",
		"ebs, 10 pods with a volume each", "ebs, 30 pods with a volume each", "ebs, one pod with 128 volumes",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("jobs %q, want %q", got, want)
	}
	o := jobs[2].options(skewrun.Options{Plan: "v1.37.2,v1.34.4,v1.37.2"})
	if o.CSIMode != "tmpfs" || o.Replicas != 1 || o.VolumesPerPod != 128 || o.Plan != "v1.37.2,v1.34.4,v1.37.2" {
		t.Errorf("options of %s: %+v", jobs[2], o)
	}
	if jobs, err := scaleJobs("local", "none", "10", "ebs"); err != nil || len(jobs) != 1 || jobs[0].shape != scale.ShapeVolumes {
		t.Errorf("-pods none -volumes 10 -modes ebs: %v, %v", jobs, err)
	}
	for _, bad := range []struct{ provider, pods, volumes, modes, want string }{
		{"local", "0", "", "", "-pods 0"},
		{"local", "111", "", "", "1 to 110 (the kubelet's maxPods)"},
		{"local", "10,x", "", "", `"x" is not a count`},
		{"local", "10,10", "", "", "10 twice"},
		{"local", "", "129", "", "1 to 128 (the CSI driver's volumes per node)"},
		{"local", "", "none", "", "both none"},
		{"local", "10", "", "tmpfs,zfs", "fix: -modes tmpfs,ebs"},
		{"kind", "10", "", "ebs", "provider kind runs skewtest's CSI driver in tmpfs"},
		{"nope", "10", "", "", "nope"},
	} {
		_, err := scaleJobs(bad.provider, bad.pods, bad.volumes, bad.modes)
		if !errors.Is(err, exitcode.ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("provider %s -pods %q -volumes %q -modes %q: %v, want bad input with %q", bad.provider, bad.pods, bad.volumes, bad.modes, err, bad.want)
		}
	}
}

// A run's hops become points: its phases, the kubelet's usage, and its
// counters, the race named where the run named it; a hop that measured
// nothing is no point.
func TestScalePoints(t *testing.T) {
	run := &reports.Run{ID: "20261203-1", Hops: []reports.Hop{
		{Number: 1, From: "v1.37.2", To: "v1.34.4", Verdict: reports.PassWithExpectedDeviations, VolumesAtStart: 120,
			Timings: []reports.Timing{{Phase: reports.PhaseNodeReady, Duration: 700 * time.Millisecond}, {Phase: reports.PhasePodDirsGone, Duration: 6 * time.Second}, {Phase: "swap binary", Duration: time.Second}},
			Kubelet: &reports.KubeletUsage{PID: 42, CPUSeconds: 3.5, PeakRSSBytes: 96 << 20},
			Metrics: []reports.Metric{
				{Name: kubeletmetrics.ReconstructVolumeOperations, Present: true, Value: 0, Verdict: reports.PassWithExpectedDeviations, Reason: "the log shows 120; expected deviation: " + kubeletmetrics.MetricsRegistrationRace},
				{Name: kubeletmetrics.ReconstructVolumeOperationsErrors, Present: true, Value: 0, Verdict: reports.Pass},
			}},
		{Number: 2, From: "v1.34.4", To: "v1.37.2", Verdict: reports.Skipped},
	}}
	pts := scalePoints(scaleJob{mode: "ebs", shape: scale.ShapeVolumes, pods: 1, volumesPerPod: 120}, run)
	if len(pts) != 1 {
		t.Fatalf("%d points, want the one hop that measured", len(pts))
	}
	p := pts[0]
	want := map[string]float64{reports.PhaseNodeReady: 0.7, reports.PhasePodDirsGone: 6, scale.KubeletCPU: 3.5, scale.KubeletPeakRSS: 96}
	if !reflect.DeepEqual(p.Values, want) || p.Volumes != 120 || p.Mode != "ebs" || p.RunID != run.ID || p.Kubelet != "v1.34.4" {
		t.Errorf("point %+v, want values %v at 120 volumes", p, want)
	}
	if check, _ := p.Counters.Check(); check != scale.CountersRace || p.Counters.VolumesAtStart != 120 {
		t.Errorf("counters %+v: %s, want the race", p.Counters, check)
	}
	run.Hops[0].Metrics[0].Reason = "reconstruct_volume_operations_total is 0, want >= 120"
	if check, _ := scalePoints(scaleJob{mode: "ebs", pods: 1, volumesPerPod: 120}, run)[0].Counters.Check(); check != scale.CountersMismatch {
		t.Errorf("a low counter the run did not explain: %s, want a mismatch", check)
	}
	if line := scaleLine(p); !strings.Contains(line, "hop 1 → v1.34.4") || !strings.Contains(line, "old pod dirs gone 6.00 s") || !strings.Contains(line, "kubelet peak RSS 96.00 MiB") {
		t.Errorf("progress line %q", line)
	}
}

func TestScaleCommand(t *testing.T) {
	t.Setenv("PLAN", "v1.37.2,v1.34.4,v1.37.2")
	t.Setenv("PROVIDER", "")
	if got, want := scaleCommand([]string{"-modes", "tmpfs"}), "PLAN=v1.37.2,v1.34.4,v1.37.2 skewtest bench-scale -modes tmpfs"; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
}

// The printed summary names each fit's verdict and every point whose
// counters are off.
func TestPrintScale(t *testing.T) {
	r := &scale.Result{Provider: "local", Plan: []string{"v1.37.2", "v1.34.4"}, PollInterval: 250 * time.Millisecond}
	for _, n := range []int{10, 30, 60} {
		r.Points = append(r.Points, scale.Point{Mode: "tmpfs", Shape: scale.ShapePods, Volumes: n, Hop: 1, Kubelet: "v1.34.4", RunID: "r",
			Values:   map[string]float64{reports.PhasePodDirsGone: 4 + 0.1*float64(n)},
			Counters: scale.Counters{VolumesAtStart: n, Present: true, Reconstructed: float64(n) - 1}})
	}
	r.Failures = []string{"tmpfs, 100 pods with a volume each (run x): boom"}
	r.FitAll()
	var b strings.Builder
	PrintScale(&b, r)
	out := b.String()
	for _, want := range []string{"old pod dirs gone", "slope 0.1 s/volume", ": linear (", "counters mismatch at 30 volumes", "failed: tmpfs, 100 pods"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
