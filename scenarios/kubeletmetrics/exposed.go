package kubeletmetrics

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Which of the metrics the checks read each kubelet version registers, and
// under which name, is read from that version's source
// (k8s.io/kubernetes@vX, `go mod download -json k8s.io/kubernetes@vX`
// gives its directory): exposed_source_test.go reads the sources in the
// module cache again and fails where this table disagrees. A metric a
// version registers must be in its scrape; one it does not register is
// "not exposed", and only then.

// The files of k8s.io/kubernetes that register the metrics the checks read.
const (
	// VolumeManagerMetricsFile registers the reconstruction and force-cleanup
	// counters, without a subsystem, in Register, which volumeManager.Run
	// calls.
	VolumeManagerMetricsFile = "pkg/kubelet/volumemanager/metrics/metrics.go"
	// KubeletMetricsFile registers the kubelet's own metrics, under its
	// subsystem "kubelet", in Register, which the kubelet calls at start.
	KubeletMetricsFile = "pkg/kubelet/metrics/metrics.go"
)

// Exposure is one fact of the table: what kubelets First to Last register
// of Metric.
type Exposure struct {
	// Metric is the canonical name (ReconstructVolumeOperations, ...).
	Metric string
	// First and Last bound the range, both versions whose source was
	// read (SourcesRead); a patch release between them is taken to
	// register what both do.
	First, Last string
	// Name is the metric's name as the kubelet exposes it, with the
	// subsystem prefix where it has one; "" when the range does not
	// register it.
	Name string
	// File is where in k8s.io/kubernetes the fact was read.
	File string
}

// Registered reports whether the range registers the metric.
func (x Exposure) Registered() bool { return x.Name != "" }

// Range is "v1.27.9 to v1.37.2", or the one version.
func (x Exposure) Range() string {
	if x.First == x.Last {
		return x.First
	}
	return x.First + " to " + x.Last
}

// Source names the file the fact was read from, in the range's module:
// "k8s.io/kubernetes v1.27.9 to v1.37.2, pkg/kubelet/metrics/metrics.go".
func (x Exposure) Source() string {
	return "k8s.io/kubernetes " + x.Range() + ", " + x.File
}

// SourcesRead are the k8s.io/kubernetes versions whose source the table
// was read from: every kubelet skewtest runs or its docs and catalogue
// name. Each range of the table begins and ends at one of them.
var SourcesRead = []string{
	"v1.26.15",
	"v1.27.9", "v1.27.16",
	"v1.28.5", "v1.28.15",
	"v1.29.6",
	"v1.30.0", "v1.30.4", "v1.30.14",
	"v1.31.0", "v1.31.14",
	"v1.32.2", "v1.32.13",
	"v1.33.6", "v1.33.13",
	"v1.34.4", "v1.35.4", "v1.36.3", "v1.37.2",
}

// CheckedMetrics are the metrics the expectations read, in the table.
var CheckedMetrics = []string{
	ReconstructVolumeOperations,
	ReconstructVolumeOperationsErrors,
	ForceCleanedFailedVolumeOps,
	ForceCleanedFailedVolumeOpErrors,
	OrphanPodCleanedVolumes,
	OrphanPodCleanedVolumesErrors,
	OrphanedRuntimePods,
}

// exposedTable is the table: per checked metric and range, the name the
// kubelet exposes it under ("" = not registered) and the file read. The
// volume manager's counters have no subsystem; the kubelet's metrics carry
// "kubelet_". 1.26 registers none of them: they came with KEP-3756's beta
// in 1.27 (#115965 for the volume manager's counters). From 1.27.9 to
// 1.37.2 each is registered unconditionally, under the same name.
var exposedTable = []Exposure{
	{ReconstructVolumeOperations, "v1.26.15", "v1.26.15", "", VolumeManagerMetricsFile},
	{ReconstructVolumeOperations, "v1.27.9", "v1.37.2", "reconstruct_volume_operations_total", VolumeManagerMetricsFile},
	{ReconstructVolumeOperationsErrors, "v1.26.15", "v1.26.15", "", VolumeManagerMetricsFile},
	{ReconstructVolumeOperationsErrors, "v1.27.9", "v1.37.2", "reconstruct_volume_operations_errors_total", VolumeManagerMetricsFile},
	{ForceCleanedFailedVolumeOps, "v1.26.15", "v1.26.15", "", VolumeManagerMetricsFile},
	{ForceCleanedFailedVolumeOps, "v1.27.9", "v1.37.2", "force_cleaned_failed_volume_operations_total", VolumeManagerMetricsFile},
	{ForceCleanedFailedVolumeOpErrors, "v1.26.15", "v1.26.15", "", VolumeManagerMetricsFile},
	{ForceCleanedFailedVolumeOpErrors, "v1.27.9", "v1.37.2", "force_cleaned_failed_volume_operation_errors_total", VolumeManagerMetricsFile},
	{OrphanPodCleanedVolumes, "v1.26.15", "v1.26.15", "", KubeletMetricsFile},
	{OrphanPodCleanedVolumes, "v1.27.9", "v1.37.2", "kubelet_orphan_pod_cleaned_volumes", KubeletMetricsFile},
	{OrphanPodCleanedVolumesErrors, "v1.26.15", "v1.26.15", "", KubeletMetricsFile},
	{OrphanPodCleanedVolumesErrors, "v1.27.9", "v1.37.2", "kubelet_orphan_pod_cleaned_volumes_errors", KubeletMetricsFile},
	{OrphanedRuntimePods, "v1.26.15", "v1.26.15", "", KubeletMetricsFile},
	{OrphanedRuntimePods, "v1.27.9", "v1.37.2", "kubelet_orphaned_runtime_pods_total", KubeletMetricsFile},
}

// ErrUnknownKubelet is a kubelet version the table has no fact for.
var ErrUnknownKubelet = errors.New("kubelet version not in the metrics table")

// ExposedValue reads metric from s under the name kubelet (its version)
// registers it by; x is what the table says of it, and ok is false when
// the version does not register it or the scrape lacks it. The error is
// Exposed's.
func (s *Scrape) ExposedValue(kubelet, metric string) (v float64, x Exposure, ok bool, err error) {
	if x, err = Exposed(kubelet, metric); err != nil || !x.Registered() {
		return 0, x, false, err
	}
	v, ok = s.Value(x.Name, nil)
	return v, x, ok, nil
}

// Exposed is what kubelet (a version such as v1.37.2) registers of
// metric. A version outside the table's ranges, or a metric not in it,
// is an error (ErrUnknownKubelet) that says how to add it.
func Exposed(kubelet, metric string) (Exposure, error) {
	v, err := version.ParseGeneric(kubelet)
	if err != nil {
		return Exposure{}, fmt.Errorf("kubelet version %q: %w", kubelet, err)
	}
	var ranges []string
	for _, x := range exposedTable {
		if x.Metric != metric {
			continue
		}
		ranges = append(ranges, x.Range())
		if v.AtLeast(version.MustParseGeneric(x.First)) && !v.GreaterThan(version.MustParseGeneric(x.Last)) {
			return x, nil
		}
	}
	if len(ranges) == 0 {
		return Exposure{}, fmt.Errorf("%w: metric %s is not in it (scenarios/kubeletmetrics/exposed.go): read which versions register it and add it", ErrUnknownKubelet, metric)
	}
	return Exposure{}, fmt.Errorf("%w: kubelet %s is outside its ranges (%s) for %s, so whether that kubelet exposes it is not known; read %s and %s of k8s.io/kubernetes@v%s (go mod download -json k8s.io/kubernetes@v%s) and add the version to SourcesRead and the table in scenarios/kubeletmetrics/exposed.go",
		ErrUnknownKubelet, kubelet, strings.Join(ranges, ", "), metric, VolumeManagerMetricsFile, KubeletMetricsFile, v, v)
}

// KnownKubelet is nil when the table has every checked metric's fact for
// kubelet, else the error Exposed gives: for checking a plan's kubelets
// before a run.
func KnownKubelet(kubelet string) error {
	for _, m := range CheckedMetrics {
		if _, err := Exposed(kubelet, m); err != nil {
			return err
		}
	}
	return nil
}
