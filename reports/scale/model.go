// Package scale is what `skewtest bench-scale` measures and shows: for each
// hop of a plan, how long a kubelet takes to get a busy node back (Ready,
// the old pods' mounts and directories gone, the re-created pods Running)
// and what it uses doing so (CPU time, peak memory), against the number of
// force-deleted pods' volumes it found at its start; its reconstruct
// counters against that number; least-squares fits that say whether each
// quantity grows linearly; and the JSON, the Markdown table and the SVG
// plot of them.
package scale

import (
	"fmt"
	"time"

	"sigs.k8s.io/skewtest/reports"
)

// Workload shapes a point measures: N volumes on the node as N pods with
// one volume each, or as one pod with N volumes.
const (
	ShapePods    = "pods"
	ShapeVolumes = "volumes"
)

// ShapeTitle says what a shape is, for people.
func ShapeTitle(shape string) string {
	switch shape {
	case ShapePods:
		return "N pods, one volume each"
	case ShapeVolumes:
		return "one pod with N volumes"
	}
	return shape
}

// Result is one bench-scale: every point it measured, and the fits.
type Result struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Provider string    `json:"provider"`
	// Plan are the kubelets in hop order: each hop's kubelet is measured.
	Plan []string `json:"plan"`
	// Command reproduces the result.
	Command string `json:"command"`
	// PollInterval is how often the cleanup was polled: the resolution of
	// the old mounts' and pod dirs' times.
	PollInterval time.Duration `json:"pollInterval"`
	// VolumeLimit is the CSI driver's volumes per node, the most the
	// one-pod shape takes; MaxPods the kubelet's pods per node.
	VolumeLimit int `json:"volumeLimit"`
	MaxPods     int `json:"maxPods"`
	// Host is the machine it ran on ("2 cores, cgroup v1 (hybrid)").
	Host   string  `json:"host,omitempty"`
	Points []Point `json:"points"`
	Fits   []Fit   `json:"fits"`
	// Failures are the runs that failed, one line each; their hops that
	// measured anything are points still.
	Failures []string `json:"failures,omitempty"`
}

// Point is one hop of one run: a kubelet started over Volumes volumes of
// force-deleted pods.
type Point struct {
	Mode  string `json:"mode"` // the CSI driver's mode
	Shape string `json:"shape"`
	// Volumes is N: Pods × VolumesPerPod.
	Volumes       int    `json:"volumes"`
	Pods          int    `json:"pods"`
	VolumesPerPod int    `json:"volumesPerPod"`
	RunID         string `json:"runId"`
	Hop           int    `json:"hop"`
	From          string `json:"from"`
	// Kubelet is the hop's kubelet, the one measured.
	Kubelet string          `json:"kubelet"`
	Verdict reports.Verdict `json:"verdict"`
	// Values are the point's measured quantities by name (Quantities);
	// one the hop did not measure is absent.
	Values   map[string]float64 `json:"values"`
	Counters Counters           `json:"counters"`
}

// Counters are the hop kubelet's reconstruct counters against what it had
// to reconstruct.
type Counters struct {
	// VolumesAtStart are the volume directories of the old pods the
	// kubelet found at its start (each pod's projected service account
	// token too, when it has one).
	VolumesAtStart int `json:"volumesAtStart"`
	// Present is false when the kubelet exposes no
	// reconstruct_volume_operations_total.
	Present       bool    `json:"present"`
	Reconstructed float64 `json:"reconstructed"`
	Errors        float64 `json:"errors"`
	// Race is the run's reason, quoting the kubelet's log, for a counter
	// below VolumesAtStart: the metrics registration race.
	Race string `json:"race,omitempty"`
}

// The counters' verdicts (Counters.Check).
const (
	CountersEqual      = "equal"
	CountersRace       = "race"
	CountersNotExposed = "not exposed"
	CountersMismatch   = "mismatch"
)

// Check says whether the counters are what the kubelet found: the total
// equal to the volumes at start with no error, or lower for the named
// race; a mismatch says how.
func (c Counters) Check() (string, string) {
	switch {
	case !c.Present:
		return CountersNotExposed, "this kubelet does not expose reconstruct_volume_operations_total"
	case c.Reconstructed == float64(c.VolumesAtStart) && c.Errors == 0:
		return CountersEqual, fmt.Sprintf("%g reconstructed of %d found", c.Reconstructed, c.VolumesAtStart)
	case c.Race != "" && c.Reconstructed < float64(c.VolumesAtStart):
		return CountersRace, fmt.Sprintf("%g counted of %d found: the metrics registration race, the kubelet's log shows them all", c.Reconstructed, c.VolumesAtStart)
	}
	return CountersMismatch, fmt.Sprintf("%g reconstructed (%g errors) of %d found", c.Reconstructed, c.Errors, c.VolumesAtStart)
}

// Quantity is one measured quantity of a point.
type Quantity struct {
	Name string
	Unit string
	// Resolution is the smallest difference the measurement tells; the
	// fit's rule does not call a spread below it a departure from a line.
	// 0: the result's poll interval.
	Resolution float64
	// Plotted quantities go on the plot (times from the kubelet's start).
	Plotted bool
}

// Names of the kubelet's usage among the quantities.
const (
	KubeletCPU     = "kubelet CPU"
	KubeletPeakRSS = "kubelet peak RSS"
)

// bytesPerMiB converts peak memory to the unit it is shown in.
const bytesPerMiB = 1 << 20

// The resolutions of the phases: how soon the harness sees a change in
// the API (the node's Ready condition is polled every 100 ms, the
// re-created pods are watched), and how often the kubelet removes orphaned
// pod directories, which bounds the old pod dirs' time however often the
// node is polled.
const (
	apiResolution = 100 * time.Millisecond
	housekeeping  = 2 * time.Second
)

// Quantities are what a point measures, in the order tables show them: the
// hop's phases from the kubelet's start, then the kubelet's CPU time (the
// kernel's 10 ms tick) and peak memory (1 MiB). The old mounts are polled
// on the node: their resolution is the result's poll interval.
var Quantities = []Quantity{
	{Name: reports.PhaseNodeReady, Unit: "s", Resolution: apiResolution.Seconds(), Plotted: true},
	{Name: reports.PhaseMountsGone, Unit: "s", Plotted: true},
	{Name: reports.PhasePodDirsGone, Unit: "s", Resolution: housekeeping.Seconds(), Plotted: true},
	{Name: reports.PhasePodsRunning, Unit: "s", Resolution: apiResolution.Seconds(), Plotted: true},
	{Name: KubeletCPU, Unit: "s", Resolution: 0.01},
	{Name: KubeletPeakRSS, Unit: "MiB", Resolution: 1},
}

// Series identifies the points of one line: a mode, a shape and a hop's
// kubelet.
type Series struct {
	Mode  string `json:"mode"`
	Shape string `json:"shape"`
	Hop   int    `json:"hop"`
	// Kubelet is the hop's kubelet.
	Kubelet string `json:"kubelet"`
}

// SeriesOf is the series p belongs to.
func SeriesOf(p Point) Series {
	return Series{Mode: p.Mode, Shape: p.Shape, Hop: p.Hop, Kubelet: p.Kubelet}
}

// HopLabel names a series' hop for people: "hop 1 → v1.34.4".
func (s Series) HopLabel() string { return fmt.Sprintf("hop %d → %s", s.Hop, s.Kubelet) }

// Panel is one chart's points: a mode and a shape.
type Panel struct{ Mode, Shape string }

// Title is "tmpfs · N pods, one volume each".
func (p Panel) Title() string { return p.Mode + " · " + ShapeTitle(p.Shape) }

// ChartFile is the SVG file of the panel in the result's directory.
func (p Panel) ChartFile() string { return fmt.Sprintf("%s-%s.svg", p.Shape, p.Mode) }

// Panels are the result's charts in the order its points came: by mode,
// then shape.
func (r *Result) Panels() []Panel {
	var out []Panel
	seen := map[Panel]bool{}
	for _, p := range r.Points {
		k := Panel{p.Mode, p.Shape}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// PointsOf are the panel's points.
func (r *Result) PointsOf(pn Panel) []Point {
	var out []Point
	for _, p := range r.Points {
		if p.Mode == pn.Mode && p.Shape == pn.Shape {
			out = append(out, p)
		}
	}
	return out
}

// seriesIn are the series of points in the order they first appear.
func seriesIn(points []Point) []Series {
	var out []Series
	seen := map[Series]bool{}
	for _, p := range points {
		s := SeriesOf(p)
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// HopPoint is what a point takes from a run's hop: its kubelets, verdict,
// the volumes its kubelet found, its phases and its kubelet's usage. The
// caller sets the workload (mode, shape, sizes), the run and the
// counters.
func HopPoint(h reports.Hop) Point {
	p := Point{Hop: h.Number, From: h.From, Kubelet: h.To, Verdict: h.Verdict, Values: map[string]float64{},
		Counters: Counters{VolumesAtStart: h.VolumesAtStart}}
	for _, q := range Quantities {
		if t, ok := h.Timing(q.Name); ok {
			p.Values[q.Name] = t.Duration.Seconds()
		}
	}
	if u := h.Kubelet; u != nil {
		p.Values[KubeletCPU] = u.CPUSeconds
		p.Values[KubeletPeakRSS] = float64(u.PeakRSSBytes) / bytesPerMiB
	}
	return p
}
