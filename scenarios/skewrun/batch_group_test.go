package skewrun

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// Two sources of one version are two kubelets: a node that ends a run on
// a patched v1.37.2 does not run the module's v1.37.2.
func TestKubeletKey(t *testing.T) {
	j := fakeJob(t, "a", plan.Default, 0, false)
	j.kubelets = []binaries.Binary{{Version: "v1.37.2", SHA256: "aaa"}, {Version: "v1.36.3", SHA256: "bbb"}, {Version: "v1.37.2", SHA256: "ccc"}}
	if j.first() == j.last() {
		t.Errorf("first %q and last %q are one kubelet, want two (their binaries differ)", j.first(), j.last())
	}
	if j.first() != "v1.37.2@aaa" || j.last() != "v1.37.2@ccc" {
		t.Errorf("first %q last %q, want the plan entry and the binary's sha256", j.first(), j.last())
	}
}

// A slot whose kubelet no queued job starts at takes the first job that
// sets no gates, after swapping its kubelet for the job's first; a slot
// that runs gates is not swapped; a swap that fails retires the slot and
// gives the job back to the queue.
func TestScheduleSwapsKubelet(t *testing.T) {
	queue := []*batchJob{
		fakeJob(t, "gated", "v1.28.15+NewVolumeManagerReconstruction=false,v1.28.5", 0, false),
		fakeJob(t, "plain", "v1.36.3,v1.37.2", 0, false),
		fakeJob(t, "plain2", "v1.36.3,v1.37.2", 0, false),
	}
	broken := &slot{kubelet: "v1.34.4"}
	slots := []*slot{{kubelet: "v1.35.4", gated: true}, broken, {kubelet: "v1.35.4"}}
	var mu sync.Mutex
	ran := map[string]*slot{}
	swapped := map[*slot][]string{}
	run := func(s *slot, j *batchJob) {
		mu.Lock()
		defer mu.Unlock()
		ran[j.job.Name] = s
	}
	swap := func(s *slot, j *batchJob) error {
		mu.Lock()
		defer mu.Unlock()
		swapped[s] = append(swapped[s], j.job.Name)
		if s == broken {
			return fmt.Errorf("kubelet never Ready")
		}
		return nil
	}
	left := schedule(context.Background(), slots, queue, nil, run, func(*slot, *batchJob) string { return "" }, swap)
	if len(left) != 1 || left[0].job.Name != "gated" {
		t.Errorf("left %q, want only the job whose first kubelet sets gates (no slot runs it, none may be swapped to it)", names(left))
	}
	if ran["plain"] == nil || ran["plain2"] == nil {
		t.Fatalf("ran %v, want both plain jobs run after a swap", ran)
	}
	if ran["plain"] == broken || ran["plain2"] == broken {
		t.Errorf("a job ran on the slot whose swap failed")
	}
	if len(swapped[slots[0]]) != 0 {
		t.Errorf("the gated slot was swapped for %v; its gates are a run's to take out", swapped[slots[0]])
	}
	if !strings.Contains(broken.retired, "could not be swapped") || !strings.Contains(slots[0].retired, "no run left") {
		t.Errorf("retired: broken %q, gated %q", broken.retired, slots[0].retired)
	}
	if s := slots[2]; s.kubelet != "v1.37.2" {
		t.Errorf("the swapped slot runs %q after its jobs, want their last kubelet v1.37.2", s.kubelet)
	}
}

// A job that fails on a kubelet check stops its group: the group's jobs
// not started are skipped, with why, on this cluster and on the next;
// other groups and jobs without one run on. A failure of another class
// stops nothing.
func TestScheduleStopsGroup(t *testing.T) {
	job := func(name, group string) *batchJob {
		j := fakeJob(t, name, plan.Default, 0, false)
		j.job.Group = group
		return j
	}
	queue := []*batchJob{job("m1-kill", "m1"), job("m1-b", "m1"), job("m2-infra", "m2"), job("m2-b", "m2"), job("none", ""), job("m1-c", "m1")}
	later := job("m1-next-cluster", "m1")
	g := &groups{}
	var ran []string
	run := func(s *slot, j *batchJob) {
		ran = append(ran, j.job.Name)
		switch j.job.Name {
		case "m1-kill":
			j.result.Err = fmt.Errorf("old pods not cleaned up: %w", exitcode.ErrKubelet)
		case "m2-infra":
			j.result.Err = fmt.Errorf("node gone: %w", exitcode.ErrInfrastructure)
		}
	}
	after := func(*slot, *batchJob) string { return "" }
	schedule(context.Background(), []*slot{{kubelet: "v1.37.2"}}, queue, g, run, after, nil)
	if got := strings.Join(ran, ","); got != "m1-kill,m2-infra,m2-b,none" {
		t.Errorf("ran %s, want m1's other jobs skipped after its kill, and the rest run", got)
	}
	for _, j := range []*batchJob{queue[1], queue[5]} {
		if !strings.Contains(j.result.Skipped, `"m1-kill"`) || j.result.Err != nil || j.result.Result != nil {
			t.Errorf("job %s: skipped %q err %v; want skipped naming the kill, no error", j.job.Name, j.result.Skipped, j.result.Err)
		}
	}
	if left := g.pending([]*batchJob{later}); len(left) != 0 || later.result.Skipped == "" {
		t.Errorf("the next cluster's job of the stopped group is pending (%q), want it skipped", names(left))
	}
}

// Clusters come up in the jobs' order; with groups that stop at their
// first failure, the cluster of fewest jobs first.
func TestClusterOrder(t *testing.T) {
	job := func(cluster, group string) *batchJob {
		return &batchJob{group: cluster, job: Job{Name: cluster + "/" + group, Group: group}}
	}
	plain := []*batchJob{job("big", ""), job("big", ""), job("small", "")}
	if order, _ := clusterOrder(plain); !slices.Equal(order, []string{"big", "small"}) {
		t.Errorf("without groups: %v, want the jobs' order", order)
	}
	grouped := []*batchJob{job("big", "m1"), job("big", "m2"), job("big", "m1"), job("small", "m1"), job("small", "m2")}
	order, byGroup := clusterOrder(grouped)
	if !slices.Equal(order, []string{"small", "big"}) {
		t.Errorf("with groups: %v, want the cluster of fewest jobs first", order)
	}
	if len(byGroup["big"]) != 3 || byGroup["big"][0].job.Name != "big/m1" || byGroup["big"][1].job.Name != "big/m2" {
		t.Errorf("the big cluster's jobs: %v", byGroup["big"])
	}
}
