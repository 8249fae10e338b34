package skewrun

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes/nodestest"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/matrix"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// recordingShared is the provider of a shared cluster that keeps the
// run's workload records for `skewtest clean`, as the existing one does.
type recordingShared struct {
	sharedBorrowed
	records []workloads.Record
}

func (r *recordingShared) RecordWorkload(w workloads.Record) error {
	r.records = append(r.records, w)
	return nil
}

// nowhere is a cluster a scenario is made for and never deploys on.
type nowhere struct{}

func (nowhere) RESTConfig() (*rest.Config, error) {
	return &rest.Config{Host: "https://127.0.0.1:1"}, nil
}
func (nowhere) ProvisionVolumes(context.Context, storage.Request) (storage.Volumes, error) {
	return storage.Volumes{}, errors.New("no volumes here")
}
func (nowhere) Workload() storage.Workload { return storage.Workload{} }

// A matrix tour on a shared cluster: each trail's deployment gets a
// namespace of its own and of this run, the provider records what each
// scenario makes, and finishRun hands each the removal of what it left.
func TestTourScenariosAreRecordedAndRemoved(t *testing.T) {
	var events []string
	p := &recordingShared{sharedBorrowed: sharedBorrowed{borrowed{events: &events}}}
	v := &validated{Options: Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	c := &runCluster{Provider: p, v: v}
	m := &validatedMatrix{validated: v}
	pl, err := plan.Parse("v1.37.2,v1.36.3")
	if err != nil {
		t.Fatal(err)
	}
	run := &reports.Run{ID: "20261206-010203-ab12"}
	namespace := trailNamespace(run.ID)
	newScenario := m.trailScenario(c, nowhere{}, run, map[string]binaries.Binary{})
	var want []string
	for _, td := range [][2]int{{1, 1}, {1, 2}, {2, 1}} {
		ns := namespace(td[0], td[1])
		if slices.Contains(want, ns) || !strings.HasPrefix(ns, workloads.Namespace(run.ID)+"-trail-") || len(ns) > 63 {
			t.Errorf("trail %d deployment %d: namespace %q is not its own and of run %s (so far %q)", td[0], td[1], ns, run.ID, want)
		}
		want = append(want, ns)
		sc, err := newScenario(nodestest.Idle{Cmder: exec.Local{}, Name: "w1"}, pl, 0, matrix.Workload{Namespace: ns, Name: "web"}, &reports.Run{ID: run.ID})
		if err != nil {
			t.Fatal(err)
		}
		// Its Remove, with nothing made yet, records that nothing of its
		// namespace is left: the provider is told of each trail's.
		if err := sc.(madeInCluster).Remove(t.Context(), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var recorded []string
	for _, r := range p.records {
		if r.Run != run.ID {
			t.Errorf("record %+v is not of run %s", r, run.ID)
		}
		recorded = append(recorded, r.Namespace)
	}
	if !slices.Equal(recorded, want) {
		t.Errorf("the provider was told of the namespaces %q, want each trail's %q", recorded, want)
	}
	if len(c.left) != len(want) {
		t.Errorf("finishRun would remove what %d scenarios left, want the %d trails'", len(c.left), len(want))
	}
}
