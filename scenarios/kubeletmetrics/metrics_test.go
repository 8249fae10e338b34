package kubeletmetrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const fixture = "testdata/kubelet-v1.37.2-after-swap.prom"

func loadFixture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseFixture(t *testing.T) *Scrape {
	t.Helper()
	s, err := Parse(loadFixture(t))
	if err != nil {
		t.Fatalf("Parse(%s): %v", fixture, err)
	}
	return s
}

func mustParse(t *testing.T, text string) *Scrape {
	t.Helper()
	s, err := Parse([]byte(text))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func TestParseFixture(t *testing.T) {
	before := time.Now()
	raw := loadFixture(t)
	s, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Raw) != string(raw) {
		t.Error("Raw is not the input")
	}
	if s.Taken.Before(before) {
		t.Errorf("Taken %v is before the parse started (%v)", s.Taken, before)
	}
	wantTypes := map[string]dto.MetricType{
		ReconstructVolumeOperations:              dto.MetricType_COUNTER,
		ReconstructVolumeOperationsErrors:        dto.MetricType_COUNTER,
		ForceCleanedFailedVolumeOps:              dto.MetricType_COUNTER,
		ForceCleanedFailedVolumeOpErrors:         dto.MetricType_COUNTER,
		OrphanPodCleanedVolumes:                  dto.MetricType_GAUGE,
		OrphanPodCleanedVolumesErrors:            dto.MetricType_GAUGE,
		OrphanedRuntimePods:                      dto.MetricType_COUNTER,
		VolumeManagerTotalVolumes:                dto.MetricType_GAUGE,
		"storage_operation_duration_seconds":     dto.MetricType_HISTOGRAM,
		"rest_client_requests_total":             dto.MetricType_COUNTER,
		"go_goroutines":                          dto.MetricType_GAUGE,
		"kubelet_http_inflight_requests_untyped": dto.MetricType_UNTYPED,
	}
	for name, typ := range wantTypes {
		mf, ok := s.Families[name]
		if !ok {
			t.Errorf("family %s missing", name)
			continue
		}
		if mf.GetType() != typ {
			t.Errorf("family %s type = %v, want %v", name, mf.GetType(), typ)
		}
	}
	if got := len(s.Families); got != 17 {
		t.Errorf("got %d families, want 17", got)
	}
	if got := len(s.Families[VolumeManagerTotalVolumes].GetMetric()); got != 4 {
		t.Errorf("volume_manager_total_volumes has %d series, want 4", got)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, text, errHas string
	}{
		{name: "empty", text: "", errHas: "no metric families"},
		{name: "comments only", text: "# HELP x y\n# TYPE x counter\n", errHas: "no metric families"},
		{name: "bad value", text: "reconstruct_volume_operations_total banana\n", errHas: "Prometheus text format"},
		{name: "type clash", text: "# TYPE a counter\n# TYPE a gauge\na 1\n", errHas: "Prometheus text format"},
		{name: "html error page", text: "<html><body>502 Bad Gateway</body></html>\n", errHas: "Prometheus text format"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.text))
			if err == nil {
				t.Fatalf("Parse succeeded with %d families, want error", len(s.Families))
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("error %q does not contain %q", err, tc.errHas)
			}
		})
	}
}

func TestValue(t *testing.T) {
	s := parseFixture(t)
	tests := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
		wantOK bool
	}{
		{name: "counter", metric: ReconstructVolumeOperations, want: 3, wantOK: true},
		{name: "counter zero", metric: ForceCleanedFailedVolumeOpErrors, want: 0, wantOK: true},
		{name: "gauge", metric: OrphanPodCleanedVolumesErrors, want: 0, wantOK: true},
		{name: "gauge summed over series", metric: VolumeManagerTotalVolumes, want: 18, wantOK: true},
		{name: "gauge one label", metric: VolumeManagerTotalVolumes, labels: map[string]string{"state": "actual_state_of_world"}, want: 9, wantOK: true},
		{name: "gauge two labels", metric: VolumeManagerTotalVolumes, labels: map[string]string{"plugin_name": "kubernetes.io/local-volume", "state": "actual_state_of_world"}, want: 3, wantOK: true},
		{name: "gauge no series match", metric: VolumeManagerTotalVolumes, labels: map[string]string{"plugin_name": "kubernetes.io/csi"}, want: 0, wantOK: true},
		{name: "empty label value matches absent label", metric: VolumeManagerTotalVolumes, labels: map[string]string{"state": "desired_state_of_world", "driver": ""}, want: 9, wantOK: true},
		{name: "counter with labels", metric: "rest_client_requests_total", labels: map[string]string{"code": "200"}, want: 248, wantOK: true},
		{name: "untyped", metric: "kubelet_http_inflight_requests_untyped", want: 2, wantOK: true},
		{name: "histogram count", metric: StorageOperationDurationCount, want: 13, wantOK: true},
		{name: "histogram count by labels", metric: StorageOperationDurationCount, labels: map[string]string{"operation_name": "volume_unmount", "volume_plugin": "kubernetes.io/local-volume"}, want: 4, wantOK: true},
		{name: "histogram count failures", metric: StorageOperationDurationCount, labels: map[string]string{"status": "fail-unknown"}, want: 1, wantOK: true},
		{name: "histogram sum", metric: "storage_operation_duration_seconds_sum", labels: map[string]string{"volume_plugin": "kubernetes.io/projected"}, want: 0.0456, wantOK: true},
		{name: "histogram by base name is not a value", metric: "storage_operation_duration_seconds", wantOK: false},
		{name: "_count of a gauge family is absent", metric: "go_goroutines_count", wantOK: false},
		{name: "absent", metric: "orphaned_volumes_cleanup_errors_total", wantOK: false},
		{name: "prefixed name is not matched implicitly", metric: "kubelet_" + ReconstructVolumeOperations, wantOK: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := s.Value(tc.metric, tc.labels)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("Value(%s, %v) = %v, %v; want %v, %v", tc.metric, tc.labels, got, ok, tc.want, tc.wantOK)
			}
		})
	}
	var nilScrape *Scrape
	if _, ok := nilScrape.Value(ReconstructVolumeOperations, nil); ok {
		t.Error("Value on a nil scrape reported ok")
	}
}

func TestLookup(t *testing.T) {
	s := mustParse(t, `# TYPE kubelet_reconstruct_volume_operations_total counter
kubelet_reconstruct_volume_operations_total 5
# TYPE reconstruct_volume_operations_errors_total counter
reconstruct_volume_operations_errors_total 1
# TYPE kubelet_reconstruct_volume_operations_errors_total counter
kubelet_reconstruct_volume_operations_errors_total 7
`)
	tests := []struct {
		names    []string
		wantName string
		want     float64
		wantOK   bool
	}{
		{names: []string{ReconstructVolumeOperations, "kubelet_" + ReconstructVolumeOperations}, wantName: "kubelet_" + ReconstructVolumeOperations, want: 5, wantOK: true},
		{names: []string{ReconstructVolumeOperationsErrors, "kubelet_" + ReconstructVolumeOperationsErrors}, wantName: ReconstructVolumeOperationsErrors, want: 1, wantOK: true},
		{names: []string{"kubelet_" + ReconstructVolumeOperationsErrors, ReconstructVolumeOperationsErrors}, wantName: "kubelet_" + ReconstructVolumeOperationsErrors, want: 7, wantOK: true},
		{names: []string{"a", "b"}, wantOK: false},
		{names: nil, wantOK: false},
	}
	for _, tc := range tests {
		name, v, ok := s.Lookup(tc.names...)
		if name != tc.wantName || v != tc.want || ok != tc.wantOK {
			t.Errorf("Lookup(%v) = %q, %v, %v; want %q, %v, %v", tc.names, name, v, ok, tc.wantName, tc.want, tc.wantOK)
		}
	}
}

func TestFetch(t *testing.T) {
	body := loadFixture(t)
	var gotAccept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/nodes/n1/proxy/metrics":
			gotAccept = r.Header.Get("Accept")
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			_, _ = w.Write(body)
		case "/api/v1/nodes/down/proxy/metrics":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("error trying to reach service: dial tcp 10.0.0.7:10250: connect: connection refused"))
		case "/api/v1/nodes/garbled/proxy/metrics":
			_, _ = w.Write([]byte("not metrics at all\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s, err := Fetch(ctx, cs, "n1")
	if err != nil {
		t.Fatalf("Fetch(n1): %v", err)
	}
	if !strings.HasPrefix(gotAccept, "text/plain") {
		t.Errorf("Accept header = %q, want text/plain first", gotAccept)
	}
	if v, ok := s.Value(ReconstructVolumeOperationsErrors, nil); !ok || v != 3 {
		t.Errorf("fetched %s = %v, %v; want 3, true", ReconstructVolumeOperationsErrors, v, ok)
	}
	if string(s.Raw) != string(body) {
		t.Error("fetched Raw differs from the served body")
	}

	for _, tc := range []struct {
		node   string
		errHas []string
	}{
		{node: "down", errHas: []string{`node "down"`, "/api/v1/nodes/down/proxy/metrics", "connection refused"}},
		{node: "garbled", errHas: []string{`node "garbled"`, "/api/v1/nodes/garbled/proxy/metrics", "Prometheus text format"}},
		{node: "", errHas: []string{"no node name"}},
	} {
		_, err := Fetch(ctx, cs, tc.node)
		if err == nil {
			t.Errorf("Fetch(%q) succeeded, want error", tc.node)
			continue
		}
		for _, want := range tc.errHas {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Fetch(%q) error %q does not contain %q", tc.node, err, want)
			}
		}
	}
}
