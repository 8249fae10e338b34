package skewrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
)

// fakeJob is a batch job of plan p that holds its node hold long.
func fakeJob(t *testing.T, name, p string, hold time.Duration, mayLeave bool) *batchJob {
	t.Helper()
	pl, err := plan.Parse(p)
	if err != nil {
		t.Fatal(err)
	}
	return &batchJob{job: Job{Name: name}, v: &validated{Plan: pl, Options: Options{Logger: slog.New(slog.DiscardHandler)}},
		demand: reconstruction.Demand{Hold: hold, MayLeave: mayLeave}, record: &reports.BatchJob{Name: name}}
}

func names(jobs []*batchJob) string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.job.Name)
	}
	return strings.Join(out, ",")
}

func TestOrderLongestFirst(t *testing.T) {
	jobs := []*batchJob{
		fakeJob(t, "short", plan.Default, 20*time.Second, false),
		fakeJob(t, "leaks", plan.Default, 110*time.Second, true),
		fakeJob(t, "outage", plan.Default, 80*time.Second, false),
		fakeJob(t, "short2", plan.Default, 20*time.Second, false),
	}
	if got := names(order(jobs, 4)); got != "leaks,outage,short,short2" {
		t.Errorf("order on 4 nodes = %s, want the longest first, ties as given", got)
	}
	// One node: the job that may leave it unclean goes last, or the
	// others would need a second cluster.
	if got := names(order(jobs, 1)); got != "outage,short,short2,leaks" {
		t.Errorf("order on 1 node = %s, want the job that may leave its node last", got)
	}
}

// schedule on fake slots: every job runs once, never two on one slot, a
// slot retired after a job takes no other, a job whose first kubelet no
// slot runs is left, a control plane failure runs once more.
func TestSchedule(t *testing.T) {
	other := "v1.36.3,v1.37.2"
	queue := []*batchJob{
		fakeJob(t, "a", plan.Default, 0, false),
		fakeJob(t, "leaves", plan.Default, 0, true),
		fakeJob(t, "cp-flake", plan.Default, 0, false),
		fakeJob(t, "b", plan.Default, 0, false),
		fakeJob(t, "c", plan.Default, 0, false),
		fakeJob(t, "starts-elsewhere", other, 0, false),
	}
	slots := []*slot{{kubelet: "v1.37.2"}, {kubelet: "v1.37.2"}, {kubelet: "v1.37.2"}}
	var mu sync.Mutex
	busy := map[*slot]bool{}
	ran := map[string]int{}
	var maxBusy int
	run := func(s *slot, j *batchJob) {
		mu.Lock()
		if busy[s] {
			t.Errorf("job %s started on a busy slot", j.job.Name)
		}
		busy[s] = true
		maxBusy = max(maxBusy, len(busy))
		ran[j.job.Name]++
		j.attempts++
		j.result.Err = nil
		if j.job.Name == "cp-flake" && j.attempts == 1 {
			j.result = JobResult{Err: fmt.Errorf("pods never scheduled: %w", scenarios.ErrControlPlane), Result: &Result{}}
		}
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		delete(busy, s)
		mu.Unlock()
	}
	after := func(s *slot, j *batchJob) string {
		if j.job.Name == "leaves" {
			return "left pods/uid"
		}
		if j.result.Err != nil {
			return "failed"
		}
		return ""
	}
	left := schedule(context.Background(), slots, queue, nil, run, after, nil)
	if names(left) != "starts-elsewhere" {
		t.Errorf("left %q, want only the job no slot's kubelet starts", names(left))
	}
	for _, name := range []string{"a", "leaves", "b", "c"} {
		if ran[name] != 1 {
			t.Errorf("job %s ran %d times, want 1", name, ran[name])
		}
	}
	if ran["cp-flake"] != 2 {
		t.Errorf("the job the control plane failed ran %d times, want 2", ran["cp-flake"])
	}
	if maxBusy != 3 {
		t.Errorf("at most %d jobs ran at once on 3 slots, want 3", maxBusy)
	}
	retired := 0
	for _, s := range slots {
		if s.retired != "" {
			retired++
		}
	}
	// One after the job that left state, one after its failed run, and
	// the last when no job left starts at its kubelet.
	if retired != 3 {
		t.Errorf("%d slots retired, want 3", retired)
	}
}

// An interrupted schedule starts nothing more and marks what it did not
// start as not run, with the interrupt.
func TestScheduleInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	queue := []*batchJob{fakeJob(t, "first", plan.Default, 0, false), fakeJob(t, "second", plan.Default, 0, false)}
	slots := []*slot{{kubelet: "v1.37.2"}}
	run := func(s *slot, j *batchJob) { cancel(&exitcode.Interrupted{}) }
	left := schedule(ctx, slots, queue, nil, run, func(*slot, *batchJob) string { return "" }, nil)
	if len(left) != 0 {
		t.Errorf("left %q after an interrupt, want none (they are marked not run)", names(left))
	}
	if err := queue[1].result.Err; err == nil || !strings.Contains(queue[1].record.Failure, "interrupted") {
		t.Errorf("the job not started: err %v, failure %q; want the interrupt", err, queue[1].record.Failure)
	}
}

func TestNamespaceOf(t *testing.T) {
	for _, tc := range []struct {
		i    int
		name string
		want string
	}{
		{0, "fault vol-data-deleted", "skewtest-20261205-234126-ab12-1-fault-vol-data-deleted"},
		{11, "plan v1.37.2,v1.34.4,v1.37.2 csi", "skewtest-20261205-234126-ab12-12-plan-v1-37-2-v1-34-4-v1-37-2-c"},
		{2, strings.Repeat("x", 80), "skewtest-20261205-234126-ab12-3-" + strings.Repeat("x", 31)},
	} {
		if got := namespaceOf("20261205-234126-ab12", tc.i, tc.name); got != tc.want || len(got) > 63 {
			t.Errorf("namespaceOf(%d, %q) = %q, want %q", tc.i, tc.name, got, tc.want)
		}
	}
}

func TestValidateBatchRefuses(t *testing.T) {
	o := Options{ArtifactsDir: t.TempDir(), CacheDir: t.TempDir()}
	good := Job{Name: "signoff", Options: o}
	for _, tc := range []struct {
		name string
		o    Options
		jobs []Job
		want string
	}{
		{"no jobs", o, nil, "no runs"},
		{"nodes", Options{BatchNodes: 99}, []Job{good}, "BATCH_NODES=99"},
		{"bad job", o, []Job{good, {Name: "broken", Options: Options{Plan: "v1.37.2,nonsense", ArtifactsDir: o.ArtifactsDir, CacheDir: o.CacheDir}}}, `run "broken"`},
		{"provider", Options{Provider: "kind"}, []Job{good}, "PROVIDER=local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validateBatch(tc.o, tc.jobs)
			if !errors.Is(err, exitcode.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("validateBatch: %v; want exitcode.ErrInvalid naming %q", err, tc.want)
			}
		})
	}
}

// The catalogue's jobs on a provider are its faults that run there, one
// each, then its shapes that run there in one job, each with the
// catalogue's replicas on the default plan.
func TestCatalogueJobs(t *testing.T) {
	for _, provider := range []string{"local", "kind"} {
		jobs := Options{Provider: provider}.CatalogueJobs()
		if len(jobs) < 2 {
			t.Fatalf("%s: %d catalogue jobs", provider, len(jobs))
		}
		seen := map[string]bool{}
		for _, j := range jobs {
			if seen[j.Options.Scenario] {
				t.Errorf("%s: scenario %s twice", provider, j.Options.Scenario)
			}
			seen[j.Options.Scenario] = true
			if j.Options.Replicas != catalogue.Replicas || j.Options.Plan != plan.Default || j.Options.Provider != provider {
				t.Errorf("%s: job %s has replicas %d plan %q provider %q", provider, j.Name, j.Options.Replicas, j.Options.Plan, j.Options.Provider)
			}
		}
		var shapeJobs []string
		for _, j := range jobs {
			if strings.HasPrefix(j.Name, "shapes ") {
				shapeJobs = append(shapeJobs, j.Options.Scenario)
			}
		}
		// The block shape needs the driver's ebs mode: a workload, and a
		// cluster, of its own; the others share the tmpfs runs' cluster.
		want := []string{"csi-inline-ephemeral,emptydir-memory,generic-ephemeral,projected-secret-configmap,subpath"}
		if provider == "local" {
			want = append(want, reconstruction.ShapeBlock)
		}
		if strings.Join(shapeJobs, " ") != strings.Join(want, " ") {
			t.Errorf("%s: shape jobs %q, want %q", provider, shapeJobs, want)
		}
		if !seen["vol-data-deleted"] != (provider == "kind") {
			t.Errorf("%s: vol-data-deleted runs on local only", provider)
		}
	}
}
