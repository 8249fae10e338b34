// Package kubeletmetrics scrapes the kubelet's /metrics through the API
// server's node proxy, parses the Prometheus text format and checks the
// volume reconstruction metrics of KEP-3756 against per-scenario
// expectations.
//
// The reconstruction and force-cleanup counters are process-local and reset
// at every kubelet start, so a scrape describes the last start only.
package kubeletmetrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// Metric names as the kubelet exposes them (its volume manager's
// pkg/kubelet/volumemanager/metrics; docs/checks.md says what each
// proves).
const (
	ReconstructVolumeOperations       = "reconstruct_volume_operations_total"
	ReconstructVolumeOperationsErrors = "reconstruct_volume_operations_errors_total"
	ForceCleanedFailedVolumeOps       = "force_cleaned_failed_volume_operations_total"
	ForceCleanedFailedVolumeOpErrors  = "force_cleaned_failed_volume_operation_errors_total"
	OrphanPodCleanedVolumes           = "kubelet_orphan_pod_cleaned_volumes"
	OrphanPodCleanedVolumesErrors     = "kubelet_orphan_pod_cleaned_volumes_errors"
	OrphanedRuntimePods               = "kubelet_orphaned_runtime_pods_total"
	VolumeManagerTotalVolumes         = "volume_manager_total_volumes"             // labels plugin_name, state
	StorageOperationDurationCount     = "storage_operation_duration_seconds_count" // labels operation_name, volume_plugin, status
)

// Scrape is one parsed kubelet /metrics response.
type Scrape struct {
	Families map[string]*dto.MetricFamily
	Raw      []byte
	Taken    time.Time
}

// Parse parses the Prometheus text exposition format. Taken is set to now.
func Parse(text []byte) (*Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parsing kubelet metrics (%d bytes) as Prometheus text format: %w", len(text), err)
	}
	if len(fams) == 0 {
		return nil, fmt.Errorf("parsing kubelet metrics: no metric families in %d bytes", len(text))
	}
	return &Scrape{Families: fams, Raw: text, Taken: time.Now()}, nil
}

// MetricsPath is the API server path proxying to a node's kubelet /metrics.
func MetricsPath(node string) string {
	return path.Join("/api/v1/nodes", node, "proxy", "metrics")
}

const maxBodyInError = 512

// Fetch scrapes the kubelet of node through the API server's node proxy
// (GET /api/v1/nodes/<node>/proxy/metrics). Errors name the node and the path.
func Fetch(ctx context.Context, cs kubernetes.Interface, node string) (*Scrape, error) {
	if node == "" {
		return nil, errors.New("fetching kubelet metrics: no node name given")
	}
	p := MetricsPath(node)
	raw, err := cs.CoreV1().RESTClient().Get().
		AbsPath(p).
		SetHeader("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1").
		DoRaw(ctx)
	if err != nil {
		// client-go replaces the body of some statuses (503: "the server is
		// currently unable to handle the request") with a generic message;
		// the proxy's body says why (e.g. "connection refused").
		if body := strings.TrimSpace(string(raw)); body != "" && !strings.Contains(err.Error(), body) {
			if len(body) > maxBodyInError {
				body = body[:maxBodyInError] + "..."
			}
			return nil, fmt.Errorf("fetching kubelet metrics of node %q (GET %s): %w (response: %s)", node, p, err, body)
		}
		return nil, fmt.Errorf("fetching kubelet metrics of node %q (GET %s): %w", node, p, err)
	}
	s, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("kubelet metrics of node %q (GET %s): %w", node, p, err)
	}
	return s, nil
}

// Value returns the sum of the series of the family name whose labels match
// labels (nil or empty matches all; a label wanted as "" matches a series
// without it). Counters, gauges and untyped metrics are summed. A name ending
// in _count or _sum that is not a family of its own is read from the
// histogram or summary it belongs to (e.g.
// storage_operation_duration_seconds_count). ok is false when the family is
// absent or of another type.
func (s *Scrape) Value(name string, labels map[string]string) (float64, bool) {
	if s == nil {
		return 0, false
	}
	if mf, ok := s.Families[name]; ok {
		switch mf.GetType() {
		case dto.MetricType_COUNTER, dto.MetricType_GAUGE, dto.MetricType_UNTYPED:
			return sum(mf, labels, sampleValue), true
		}
		return 0, false
	}
	for _, part := range []struct {
		suffix string
		get    func(*dto.Metric) float64
	}{{"_count", sampleCount}, {"_sum", sampleSum}} {
		base, found := strings.CutSuffix(name, part.suffix)
		if !found || base == "" {
			continue
		}
		if mf, ok := s.Families[base]; ok {
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM, dto.MetricType_SUMMARY:
				return sum(mf, labels, part.get), true
			}
			return 0, false
		}
	}
	return 0, false
}

// Lookup tries names in order and returns the first exposed one with its
// value: use it for metrics the kubelet exposes under different names in
// different versions.
func (s *Scrape) Lookup(names ...string) (name string, v float64, ok bool) {
	for _, n := range names {
		if v, ok := s.Value(n, nil); ok {
			return n, v, true
		}
	}
	return "", 0, false
}

func sum(mf *dto.MetricFamily, labels map[string]string, get func(*dto.Metric) float64) float64 {
	var total float64
	for _, m := range mf.GetMetric() {
		if matches(m, labels) {
			total += get(m)
		}
	}
	return total
}

func matches(m *dto.Metric, want map[string]string) bool {
	if len(want) == 0 {
		return true
	}
	have := make(map[string]string, len(m.GetLabel()))
	for _, lp := range m.GetLabel() {
		have[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return m.GetUntyped().GetValue()
}

func sampleCount(m *dto.Metric) float64 {
	if m.Histogram != nil {
		return float64(m.Histogram.GetSampleCount())
	}
	return float64(m.GetSummary().GetSampleCount())
}

func sampleSum(m *dto.Metric) float64 {
	if m.Histogram != nil {
		return m.Histogram.GetSampleSum()
	}
	return m.GetSummary().GetSampleSum()
}
