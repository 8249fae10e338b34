package kubeletmetrics

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

func TestExposed(t *testing.T) {
	for _, tc := range []struct {
		kubelet, metric, name, file, rng string
	}{
		{"v1.37.2", ReconstructVolumeOperations, "reconstruct_volume_operations_total", VolumeManagerMetricsFile, "v1.27.9 to v1.37.2"},
		{"v1.36.3", ForceCleanedFailedVolumeOpErrors, "force_cleaned_failed_volume_operation_errors_total", VolumeManagerMetricsFile, "v1.27.9 to v1.37.2"},
		{"v1.27.9", OrphanPodCleanedVolumes, "kubelet_orphan_pod_cleaned_volumes", KubeletMetricsFile, "v1.27.9 to v1.37.2"},
		{"v1.28.15", OrphanPodCleanedVolumesErrors, "kubelet_orphan_pod_cleaned_volumes_errors", KubeletMetricsFile, "v1.27.9 to v1.37.2"},
		{"v1.34.4", OrphanedRuntimePods, "kubelet_orphaned_runtime_pods_total", KubeletMetricsFile, "v1.27.9 to v1.37.2"},
		// A patch release between two read ones, and a pre-release.
		{"v1.30.7", ReconstructVolumeOperationsErrors, "reconstruct_volume_operations_errors_total", VolumeManagerMetricsFile, "v1.27.9 to v1.37.2"},
		{"v1.32.4-rc.0", ReconstructVolumeOperations, "reconstruct_volume_operations_total", VolumeManagerMetricsFile, "v1.27.9 to v1.37.2"},
		// 1.26 registers none of them.
		{"v1.26.15", ReconstructVolumeOperations, "", VolumeManagerMetricsFile, "v1.26.15"},
		{"1.26.15", OrphanedRuntimePods, "", KubeletMetricsFile, "v1.26.15"},
	} {
		x, err := Exposed(tc.kubelet, tc.metric)
		if err != nil {
			t.Errorf("%s %s: %v", tc.kubelet, tc.metric, err)
			continue
		}
		if x.Name != tc.name || x.File != tc.file || x.Range() != tc.rng || x.Registered() != (tc.name != "") {
			t.Errorf("%s %s: %+v (range %s), want name %q file %s range %s", tc.kubelet, tc.metric, x, x.Range(), tc.name, tc.file, tc.rng)
		}
		if want := "k8s.io/kubernetes " + tc.rng + ", " + tc.file; x.Source() != want {
			t.Errorf("Source = %q, want %q", x.Source(), want)
		}
	}
}

// Versions outside the table's ranges, a metric not in it and a version
// that is none are errors that say what to do.
func TestExposedOutsideTheTable(t *testing.T) {
	for _, kubelet := range []string{"v1.38.0", "v1.37.3", "v1.27.2", "v1.26.14", "v1.25.16"} {
		_, err := Exposed(kubelet, ReconstructVolumeOperations)
		if !errors.Is(err, ErrUnknownKubelet) {
			t.Errorf("%s: %v, want ErrUnknownKubelet", kubelet, err)
			continue
		}
		for _, want := range []string{"kubelet " + kubelet, "v1.26.15, v1.27.9 to v1.37.2", VolumeManagerMetricsFile, KubeletMetricsFile, "add the version to SourcesRead and the table"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error lacks %q: %v", kubelet, want, err)
			}
		}
		if KnownKubelet(kubelet) == nil {
			t.Errorf("KnownKubelet(%s) = nil", kubelet)
		}
	}
	if _, err := Exposed("v1.37.2", "go_goroutines"); !errors.Is(err, ErrUnknownKubelet) || !strings.Contains(err.Error(), "metric go_goroutines is not in it") {
		t.Errorf("metric outside the table: %v", err)
	}
	if _, err := Exposed("latest", ReconstructVolumeOperations); err == nil || errors.Is(err, ErrUnknownKubelet) || !strings.Contains(err.Error(), `"latest"`) {
		t.Errorf("not a version: %v", err)
	}
	for _, v := range SourcesRead {
		if err := KnownKubelet(v); err != nil {
			t.Errorf("KnownKubelet(%s) = %v", v, err)
		}
	}
}

// The table's shape: each range starts and ends at a version whose source
// was read, every checked metric has exactly one fact for every version
// read, and the ranges of a metric do not overlap.
func TestExposedTableShape(t *testing.T) {
	for _, x := range exposedTable {
		if !slices.Contains(SourcesRead, x.First) || !slices.Contains(SourcesRead, x.Last) {
			t.Errorf("%s range %s: its ends are not both in SourcesRead", x.Metric, x.Range())
		}
		if version.MustParseGeneric(x.Last).LessThan(version.MustParseGeneric(x.First)) {
			t.Errorf("%s range %s ends before it starts", x.Metric, x.Range())
		}
		if !slices.Contains(CheckedMetrics, x.Metric) {
			t.Errorf("%s is in the table but not in CheckedMetrics", x.Metric)
		}
	}
	for _, m := range CheckedMetrics {
		for _, v := range SourcesRead {
			n := 0
			for _, x := range exposedTable {
				pv := version.MustParseGeneric(v)
				if x.Metric == m && pv.AtLeast(version.MustParseGeneric(x.First)) && !pv.GreaterThan(version.MustParseGeneric(x.Last)) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s at %s: %d facts, want 1", m, v, n)
			}
		}
	}
	// Every metric the expectations read is in the table.
	for _, e := range CSIExpectations(1) {
		if !slices.Contains(CheckedMetrics, e.Metric) {
			t.Errorf("expectation on %s, which the table does not hold", e.Metric)
		}
	}
}
