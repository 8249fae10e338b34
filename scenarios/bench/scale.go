package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/reports/scale"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// KubeletMaxPods is the kubelet's default maxPods, which the clusters
// skewtest makes keep: the most pods the pods shape puts on the node.
const KubeletMaxPods = 110

// ScaleDefaults are the sizes measured by default: N pods with a volume
// each, and one pod with N volumes up to the CSI driver's limit.
var ScaleDefaults = struct{ Pods, Volumes []int }{
	Pods:    []int{10, 30, 60, 100},
	Volumes: []int{10, 30, 60, 100, clusters.CSIDriverMaxVolumesPerNode},
}

// scaleSettings are the environment variables bench-scale's command line
// to reproduce it names when they are set: what chooses the cluster, the
// plan and its kubelets, and the waits.
var scaleSettings = []string{"PROVIDER", "PLAN", "APISERVER", "KUBELET_SOURCE", "KUBELETS", "POLL_INTERVAL", "CLEANUP_TIMEOUT", "SKEWTEST_TIMEOUT_FACTOR"}

// NoCounts skips a shape: what make passes for SCALE_PODS=none, where an
// empty variable means the default.
const NoCounts = "none"

// ScaleOptions are what Scale measures: Run's plan, per CSI driver mode
// (Modes, comma-separated; every mode the provider runs when empty), the
// pods shape at each of Pods and the one-pod shape at each of Volumes
// (comma-separated counts; NoCounts for none). Out is where the result
// goes (default $ARTIFACTS/bench-scale/<time>); Args are the command's
// own, for the command line that reproduces the result; Progress gets a
// line per run and point.
type ScaleOptions struct {
	Run                  skewrun.Options
	Pods, Volumes, Modes string
	Out                  string
	Args                 []string
	Progress             io.Writer
}

// scaleJob is one run of Scale: a mode and a workload.
type scaleJob struct {
	mode, shape         string
	pods, volumesPerPod int
}

func (j scaleJob) String() string {
	if j.shape == scale.ShapeVolumes {
		return fmt.Sprintf("%s, one pod with %d volumes", j.mode, j.volumesPerPod)
	}
	return fmt.Sprintf("%s, %d pods with a volume each", j.mode, j.pods)
}

// options are the run options of the job: o with its mode and workload.
func (j scaleJob) options(o skewrun.Options) skewrun.Options {
	o.CSIMode, o.Replicas, o.VolumesPerPod = j.mode, j.pods, j.volumesPerPod
	return o
}

// Scale measures what reconstruction costs on a busy node: one run of the
// plan (PLAN, the default's otherwise) per CSI driver mode and size, N
// pods with one volume each and one pod with N volumes, and per hop the
// times from the kubelet's start, the kubelet's CPU and peak memory, and
// its reconstruct counters against N; then it fits each against N and
// writes the JSON, the Markdown table and an SVG chart per mode and shape
// into o.Out, returning what it wrote. A run that fails is recorded and
// the others go on; bad input stops it before any run.
func Scale(ctx context.Context, o ScaleOptions) (*scale.Result, []string, error) {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Run.Scenario != "" {
		return nil, nil, fmt.Errorf("%w: SCENARIO=%s: bench-scale measures the baseline force-delete; unset SCENARIO", exitcode.ErrInvalid, o.Run.Scenario)
	}
	jobs, err := scaleJobs(o.Run.Provider, o.Pods, o.Volumes, o.Modes)
	if err != nil {
		return nil, nil, err
	}
	// Every run's settings are checked before the first run makes
	// anything.
	var checked skewrun.Options
	for _, j := range jobs {
		if checked, err = j.options(o.Run).Check(); err != nil {
			return nil, nil, fmt.Errorf("bench-scale %s: %w", j, err)
		}
	}
	out := o.Out
	if out == "" {
		out = filepath.Join(checked.ArtifactsDir, "bench-scale", time.Now().UTC().Format("20060102-150405"))
	}
	res := &scale.Result{Started: time.Now(), Provider: checked.Provider, Plan: strings.Split(checked.Plan, ","), Command: scaleCommand(o.Args),
		PollInterval: o.Run.PollInterval, VolumeLimit: clusters.CSIDriverMaxVolumesPerNode, MaxPods: KubeletMaxPods}
	if res.PollInterval == 0 {
		res.PollInterval = reconstruction.DefaultPollInterval
	}
	fmt.Fprintf(o.Progress, "bench-scale: %d runs of plan %s on %s, writing %s\n", len(jobs), checked.Plan, res.Provider, out)
	var errs []error
	for i, j := range jobs {
		fmt.Fprintf(o.Progress, "=== bench-scale %d/%d: %s\n", i+1, len(jobs), j)
		started := time.Now()
		r, err := skewrun.Run(ctx, j.options(o.Run))
		if r != nil {
			res.Host = scaleHost(r.Run)
			points := scalePoints(j, r.Run)
			res.Points = append(res.Points, points...)
			for _, p := range points {
				fmt.Fprintf(o.Progress, "    %s\n", scaleLine(p))
			}
		}
		fmt.Fprintf(o.Progress, "    run %d/%d took %s\n", i+1, len(jobs), time.Since(started).Round(time.Second))
		if err == nil {
			continue
		}
		id := "no run"
		if r != nil {
			id = "run " + r.Run.ID
		}
		res.Failures = append(res.Failures, fmt.Sprintf("%s (%s): %s", j, id, reports.OneLine(err.Error())))
		errs = append(errs, fmt.Errorf("bench-scale %s: %w", j, err))
		if ctx.Err() != nil || errors.Is(err, exitcode.ErrInvalid) {
			break
		}
	}
	res.Finished = time.Now()
	res.FitAll()
	paths, werr := scale.Write(out, res)
	return res, paths, errors.Join(append(errs, werr)...)
}

// scaleJobs checks the counts and modes and lists the runs, mode by mode,
// the pods shape's then the one-pod shape's, smallest first.
func scaleJobs(provider, pods, volumes, modes string) ([]scaleJob, error) {
	d, err := clusters.Lookup(defaultProvider(provider))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", exitcode.ErrInvalid, err)
	}
	podCounts, err := parseCounts("-pods", pods, KubeletMaxPods, "the kubelet's maxPods")
	if err != nil {
		return nil, err
	}
	volumeCounts, err := parseCounts("-volumes", volumes, clusters.CSIDriverMaxVolumesPerNode, "the CSI driver's volumes per node")
	if err != nil {
		return nil, err
	}
	if len(podCounts)+len(volumeCounts) == 0 {
		return nil, fmt.Errorf("%w: -pods and -volumes are both none: nothing to measure; give either, e.g. -pods %s", exitcode.ErrInvalid, JoinInts(ScaleDefaults.Pods))
	}
	ms := d.CSIModes
	if modes != "" {
		ms = strings.Split(modes, ",")
	}
	for _, m := range ms {
		if !slices.Contains(d.CSIModes, m) {
			return nil, fmt.Errorf("%w: -modes %s: provider %s runs skewtest's CSI driver in %s; fix: -modes %s",
				exitcode.ErrInvalid, modes, d.Name, strings.Join(d.CSIModes, " and "), strings.Join(d.CSIModes, ","))
		}
	}
	var jobs []scaleJob
	for _, m := range ms {
		for _, n := range podCounts {
			jobs = append(jobs, scaleJob{mode: m, shape: scale.ShapePods, pods: n, volumesPerPod: 1})
		}
		for _, n := range volumeCounts {
			jobs = append(jobs, scaleJob{mode: m, shape: scale.ShapeVolumes, pods: 1, volumesPerPod: n})
		}
	}
	return jobs, nil
}

// parseCounts reads a flag's comma-separated counts, each from 1 to max;
// "" and NoCounts are none.
func parseCounts(flagName, s string, max int, what string) ([]int, error) {
	if s == "" || s == NoCounts {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > max {
			return nil, fmt.Errorf("%w: %s %s: %q is not a count from 1 to %d (%s); fix: for example %s 10,30,60", exitcode.ErrInvalid, flagName, s, f, max, what, flagName)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%w: %s %s: %d twice; give each count once", exitcode.ErrInvalid, flagName, s, n)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// JoinInts writes counts as a flag takes them: comma-separated.
func JoinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ",")
}

// scalePoints are the run's hops that measured anything, as points of
// job j, with the hop kubelet's reconstruct counters.
func scalePoints(j scaleJob, run *reports.Run) []scale.Point {
	var out []scale.Point
	for _, h := range run.Hops {
		p := scale.HopPoint(h)
		if len(p.Values) == 0 {
			continue
		}
		p.Mode, p.Shape, p.Pods, p.VolumesPerPod, p.Volumes, p.RunID = j.mode, j.shape, j.pods, j.volumesPerPod, j.pods*j.volumesPerPod, run.ID
		for _, m := range h.Metrics {
			switch m.Name {
			case kubeletmetrics.ReconstructVolumeOperations:
				p.Counters.Present, p.Counters.Reconstructed = m.Present, m.Value
				if m.Verdict == reports.PassWithExpectedDeviations && strings.Contains(m.Reason, kubeletmetrics.MetricsRegistrationRace) {
					p.Counters.Race = m.Reason
				}
			case kubeletmetrics.ReconstructVolumeOperationsErrors:
				p.Counters.Errors = m.Value
			}
		}
		out = append(out, p)
	}
	return out
}

// scaleLine is a point's progress line.
func scaleLine(p scale.Point) string {
	var parts []string
	for _, q := range scale.Quantities {
		if v, ok := p.Values[q.Name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f %s", q.Name, v, q.Unit))
		}
	}
	_, counters := p.Counters.Check()
	return fmt.Sprintf("%s (%s): %s; %s", scale.SeriesOf(p).HopLabel(), p.Verdict, strings.Join(parts, ", "), counters)
}

// scaleHost is the machine's cores and the node host's cgroup mode.
func scaleHost(run *reports.Run) string {
	h := fmt.Sprintf("%d cores", runtime.NumCPU())
	for _, kv := range run.Environment {
		if kv.Key == reports.EnvCgroup {
			h += ", cgroup " + kv.Value
		}
	}
	return h
}

// scaleCommand is the command line that makes the result again: the
// settings that shape it, then the subcommand and its flags.
func scaleCommand(args []string) string {
	var parts []string
	for _, k := range scaleSettings {
		if v := os.Getenv(k); v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	parts = append(parts, "skewtest", "bench-scale")
	return strings.Join(append(parts, args...), " ")
}

// PrintScale prints the fits, a line per mode, shape, hop and quantity,
// and the points whose counters are not what the kubelet found.
func PrintScale(w io.Writer, r *scale.Result) {
	fmt.Fprintf(w, "skewtest bench-scale: provider %s, plan %s, %d points (seconds from the kubelet's start; CPU s; peak RSS MiB)\n", r.Provider, strings.Join(r.Plan, ","), len(r.Points))
	fmt.Fprintf(w, "growth rule: %s\n", scale.Rule)
	for _, f := range r.Fits {
		if f.Verdict == scale.TooFew {
			continue
		}
		fmt.Fprintf(w, "%s %s %s %-18s slope %.4g %s/volume, intercept %.3g %s, R² %.3f: %s (%s)\n",
			f.Series.Mode, f.Series.Shape, f.Series.HopLabel(), f.Quantity, f.Slope, f.Unit, f.Intercept, f.Unit, f.R2, f.Verdict, f.Why)
	}
	for _, p := range r.Points {
		if check, why := p.Counters.Check(); check == scale.CountersMismatch || check == scale.CountersRace {
			fmt.Fprintf(w, "counters %s at %d volumes (%s %s, run %s): %s\n", check, p.Volumes, p.Mode, scale.SeriesOf(p).HopLabel(), p.RunID, why)
		}
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "failed: %s\n", f)
	}
}
