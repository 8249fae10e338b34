package reconstruction

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

// restartNode is a node whose kubelet the witness restarts: each start
// makes the fake API server's next heartbeat and scrape its own, and its
// log the next of logs.
type restartNode struct {
	fakeNode
	api          *fakeAPI
	logs         []string // logs[0]: the hop's kubelet; logs[i]: start i
	stops, start int
	// judged is the log the catalogue's judge was given after the
	// metrics step (Scenario.evidence).
	judged string
}

func (n *restartNode) StopKubelet(context.Context) error {
	n.stops++
	return nil
}

func (n *restartNode) StartKubelet(context.Context) error {
	n.start++
	n.api.started(n.start)
	return nil
}

func (n *restartNode) KubeletLog(context.Context) (string, error) {
	if n.start >= len(n.logs) {
		return "", fmt.Errorf("no log for start %d", n.start)
	}
	return n.logs[n.start], nil
}

// fakeAPI serves what the witness reads of the API server: discovery, the
// node with its Ready heartbeat, the workload's pods, and the kubelet's
// metrics through the node proxy, counters[i] after start i (counters[0]
// for the hop's own start).
type fakeAPI struct {
	mu       sync.Mutex
	counters []int
	running  bool
	kubelet  int       // which start serves
	beat     time.Time // the Ready condition's heartbeat
	// beatAfter is how many reads of the node after a start show the
	// stopped kubelet's heartbeat; staleScrapes counts the scrapes made
	// meanwhile.
	beatAfter, pending, staleScrapes int
}

func (a *fakeAPI) started(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.kubelet = n
	if a.pending = a.beatAfter; a.pending == 0 {
		a.beat = a.beat.Add(time.Minute)
	}
}

func (a *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	write := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	switch r.URL.Path {
	case "/api":
		write(metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
	case "/apis":
		write(metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}})
	case "/api/v1":
		write(metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList"}, GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "nodes", Kind: "Node", Verbs: []string{"get", "list"}},
			{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: []string{"get", "list"}},
		}})
	case "/api/v1/nodes/node-1":
		if a.pending > 0 {
			if a.pending--; a.pending == 0 {
				a.beat = a.beat.Add(time.Minute)
			}
		}
		write(corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(a.beat)}}}})
	case "/api/v1/namespaces/" + DefaultNamespace + "/pods":
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		if a.running {
			list.Items = append(list.Items, corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: DefaultNamespace},
				Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
		}
		write(list)
	case "/api/v1/nodes/node-1/proxy/metrics":
		if a.pending > 0 {
			a.staleScrapes++
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE reconstruct_volume_operations_total counter\nreconstruct_volume_operations_total %d\n", a.counters[a.kubelet])
		for _, m := range []string{"reconstruct_volume_operations_errors_total", "force_cleaned_failed_volume_operations_total", "force_cleaned_failed_volume_operation_errors_total",
			"kubelet_orphan_pod_cleaned_volumes", "kubelet_orphan_pod_cleaned_volumes_errors", "kubelet_orphaned_runtime_pods_total"} {
			fmt.Fprintf(w, "# TYPE %s gauge\n%s 0\n", m, m)
		}
	default:
		http.NotFound(w, r)
	}
}

type apiCluster struct {
	fakeCluster
	url string
}

func (c apiCluster) RESTConfig() (*rest.Config, error) { return &rest.Config{Host: c.url}, nil }

// witnessRun runs a hop's metrics check against api and node, for a hop
// whose kubelet found 6 volume dirs, and returns the run's record.
func witnessRun(t *testing.T, api *fakeAPI, node *restartNode) (*reports.Run, error) {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	node.api = api
	r := &reports.Run{}
	s, err := New(Config{Plan: mustPlan(t, "v1.37.2,v1.37.2"), Kubelets: make([]binaries.Binary, 2), PollInterval: 10 * time.Millisecond}, apiCluster{url: srv.URL}, node, r)
	if err != nil {
		t.Fatal(err)
	}
	steps := []scenarios.Step{{Hop: 1, Name: "hop 1: kubelet metrics", Run: func(ctx context.Context, sc *scenarios.StepContext) error {
		s.run.Hops = append(s.run.Hops, reports.Hop{Number: 1, To: "v1.37.2"})
		s.hop = &s.run.Hops[0]
		s.startHopPath()
		s.volsAtStart, s.pathVolumes = 6, 6
		err := s.checkMetrics(ctx, sc)
		var o catalogue.Observation
		s.evidence(ctx, &o, nil)
		node.judged = o.Log
		return err
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = (&scenarios.Runner{Run: r, Node: node, ArtifactsDir: t.TempDir()}).Execute(ctx, steps)
	return r, err
}

// firstVolumes is log with only its first n volumes' reconstructions.
func firstVolumes(log string, n int) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "Volume is marked as uncertain and added into the actual state") {
			if n == 0 {
				continue
			}
			n--
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// The hop's counter read 0 while its kubelet's log shows 6
// reconstructions: a witness start of the same kubelet decides. The race
// does not recur: the counter moves, and the hop passes with the race as
// an expected deviation. A counter that never moves reads 0 on every
// start, and the hop fails naming the starts. A hop that does not look
// like the race restarts nothing, and one whose pods do not run cannot
// take a witness and fails saying so.
func TestWitnessStarts(t *testing.T) {
	b, err := os.ReadFile("../kubeletmetrics/testdata/kubelet-v1.34.4-race.log")
	if err != nil {
		t.Fatal(err)
	}
	hopLog, witnessLog := string(b), firstVolumes(string(b), 3)
	beat := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

	t.Run("the race", func(t *testing.T) {
		node := &restartNode{logs: []string{hopLog, witnessLog}}
		r, err := witnessRun(t, &fakeAPI{counters: []int{0, 3}, running: true, beat: beat}, node)
		if err != nil {
			t.Fatal(err)
		}
		if node.stops != 1 || node.start != 1 {
			t.Errorf("%d stops and %d starts, want one witness start", node.stops, node.start)
		}
		if node.judged != hopLog {
			t.Errorf("the catalogue's judge was given the witness start's log (%d bytes), not the hop's (%d bytes)", len(node.judged), len(hopLog))
		}
		st := r.Steps[0]
		if len(st.Deviations) != 1 || !strings.Contains(st.Deviations[0].Reason, "witness start 1: counter 3, its log 3") || !strings.Contains(st.Deviations[0].Reason, "registration race") {
			t.Errorf("deviations %+v", st.Deviations)
		}
		notes := strings.Join(st.Notes, "\n")
		if !strings.Contains(notes, "restarted kubelet v1.37.2 with the hop's running pods") {
			t.Errorf("notes lack the witness start: %s", notes)
		}
		var names []string
		for _, e := range st.Evidence {
			names = append(names, e.Name)
		}
		if all := strings.Join(names, "|"); !strings.Contains(all, "kubelet metrics after witness start 1") || !strings.Contains(all, "reconstruction log lines since witness start 1") {
			t.Errorf("evidence %s", all)
		}
		if m := r.Hops[0].Metrics; len(m) == 0 || m[3].Name != "reconstruct_volume_operations_total" || m[3].Value != 0 || m[3].Verdict != reports.PassWithExpectedDeviations {
			t.Errorf("hop metrics %+v", m)
		}
	})

	t.Run("the race again at the first witness", func(t *testing.T) {
		node := &restartNode{logs: []string{hopLog, witnessLog, witnessLog}}
		if _, err := witnessRun(t, &fakeAPI{counters: []int{0, 0, 3}, running: true, beat: beat}, node); err != nil {
			t.Fatal(err)
		}
		if node.start != 2 {
			t.Errorf("%d witness starts, want 2", node.start)
		}
	})

	t.Run("a counter that never moves", func(t *testing.T) {
		node := &restartNode{logs: []string{hopLog, witnessLog, witnessLog}}
		_, err := witnessRun(t, &fakeAPI{counters: []int{0, 0, 0}, running: true, beat: beat}, node)
		if err == nil {
			t.Fatal("a counter that never moves passed")
		}
		for _, want := range []string{"reconstruct_volume_operations_total is 0, but the kubelet's log since its start shows 6", "witness start 1: counter 0, its log 3", "witness start 2: counter 0, its log 3", "a counter that never moves"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q: %v", want, err)
			}
		}
		if node.start != 2 {
			t.Errorf("%d witness starts, want %d", node.start, 2)
		}
	})

	t.Run("no race, no restart", func(t *testing.T) {
		node := &restartNode{logs: []string{hopLog}}
		if _, err := witnessRun(t, &fakeAPI{counters: []int{6}, running: true, beat: beat}, node); err != nil {
			t.Fatal(err)
		}
		// A low counter the log does not contradict fails as it is.
		node2 := &restartNode{logs: []string{firstVolumes(hopLog, 2)}}
		_, err := witnessRun(t, &fakeAPI{counters: []int{0}, running: true, beat: beat}, node2)
		if err == nil || !strings.Contains(err.Error(), "reconstruct_volume_operations_total is 0, want >= 6") {
			t.Errorf("low counter, log of 2: %v", err)
		}
		if node.stops+node.start+node2.stops+node2.start != 0 {
			t.Errorf("restarted a kubelet whose hop does not look like the race")
		}
	})

	t.Run("no pod runs: no witness, and no pass", func(t *testing.T) {
		node := &restartNode{logs: []string{hopLog}}
		r, err := witnessRun(t, &fakeAPI{counters: []int{0}, beat: beat}, node)
		if err == nil || !strings.Contains(err.Error(), "could take none: no pod of the workload runs on node node-1") {
			t.Errorf("no running pods: %v", err)
		}
		if node.start != 0 {
			t.Errorf("%d witness starts without pods", node.start)
		}
		if notes := strings.Join(r.Steps[0].Notes, "\n"); !strings.Contains(notes, "cannot take a witness start") {
			t.Errorf("notes: %s", notes)
		}
	})

	t.Run("the scrape waits for the new kubelet's heartbeat", func(t *testing.T) {
		node := &restartNode{logs: []string{hopLog, witnessLog}}
		api := &fakeAPI{counters: []int{0, 3}, running: true, beat: beat, beatAfter: 3}
		if _, err := witnessRun(t, api, node); err != nil {
			t.Fatal(err)
		}
		if api.staleScrapes != 0 {
			t.Errorf("%d scrapes before the new kubelet's first heartbeat", api.staleScrapes)
		}
	})
}
