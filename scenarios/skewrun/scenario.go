package skewrun

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
)

// nodeScenario is one reconstruction scenario on one node of a shared
// cluster.
type nodeScenario struct {
	// Plan is the hop sequence; its first version must be the kubelet the
	// node runs now.
	Plan plan.Plan
	// Kubelets holds one binary per plan entry.
	Kubelets []binaries.Binary
	// Name and Namespace name the workload (the StatefulSet and its
	// namespace); empty for the scenario's defaults (the namespace of the
	// run's ID alone, workloads.Namespace). Scenarios running at once on
	// one cluster need distinct ones.
	Name, Namespace string
	// Fault is the catalogue fault each hop plants; nil for the baseline.
	Fault *reconstruction.Fault
	// Shapes are catalogue shapes added to the workload.
	Shapes []reconstruction.Shape
	// Replicas and Kind are the workload's size and volume kind; zero
	// for the cluster's run options' (a batch's runs each bring their
	// own).
	Replicas int
	Kind     storage.Kind
	// VolumeGroup names its PVs apart from another scenario's on the same
	// node (reconstruction.Config.VolumeGroup); empty for none.
	VolumeGroup string
}

// replicas and kind are the scenario's own, or the cluster's run's.
func (s nodeScenario) replicas(v *validated) int {
	if s.Replicas > 0 {
		return s.Replicas
	}
	return v.Options.Replicas
}

func (s nodeScenario) kind(v *validated) storage.Kind {
	if s.Kind != "" {
		return s.Kind
	}
	return v.VolumeKind
}

// runScenario runs the reconstruction scenario s on node of c, recording
// into run (its environment, binaries, steps, hops and verdict; steps'
// files go under run.ArtifactsDir). Replicas, volume kind, poll interval
// and cleanup timeout come from c's options. The error wraps exitcode.ErrKubelet
// when the scenario failed (a check, a leak, a kubelet that would not
// start) and is nil when it passed, possibly with expected deviations.
func runScenario(ctx context.Context, c *runCluster, node nodes.Node, s nodeScenario, run *reports.Run) error {
	o := c.v.Options
	run.Node = node.String()
	cluster, err := c.workloads()
	if err != nil {
		run.Fail(err.Error())
		return err
	}
	c.describe(ctx, node, run, s.replicas(c.v), s.kind(c.v))
	cfg := reconstruction.Config{Plan: s.Plan, Kubelets: s.Kubelets, Replicas: s.replicas(c.v), VolumesPerPod: o.VolumesPerPod, Kind: s.kind(c.v),
		RunID: run.ID, Name: s.Name, Namespace: s.Namespace, PollInterval: o.PollInterval, CleanupTimeout: o.CleanupTimeout, TimeoutFactor: o.TimeoutFactor, Fault: s.Fault, Shapes: s.Shapes, VolumeGroup: s.VolumeGroup, Logger: o.Logger}
	sc, err := c.newScenario(cfg, cluster, node, run)
	if err != nil {
		run.Fail(err.Error())
		return classify(err, exitcode.ErrInfrastructure)
	}
	runner := &scenarios.Runner{Run: run, Node: node, ArtifactsDir: run.ArtifactsDir, Logger: o.Logger}
	scenarioErr := runner.Execute(ctx, sc.Steps())
	run.ComputeVerdict()
	if scenarioErr != nil {
		return classify(scenarioErr, scenarioClass(scenarioErr))
	}
	if run.Verdict == reports.Fail {
		return classify(fmt.Errorf("run failed: %s", run.Failure), exitcode.ErrKubelet)
	}
	return nil
}

// scenarioClass is the class of a failed scenario's error: the kubelet's,
// unless the control plane did not act (scenarios.ErrControlPlane) or a
// name of the run's was taken by an object not its own
// (workloads.ErrNotOurs), which are the infrastructure's, or skewtest
// itself was at fault (scenarios.ErrHarness).
func scenarioClass(err error) error {
	switch {
	case errors.Is(err, scenarios.ErrHarness):
		return exitcode.ErrHarness
	case errors.Is(err, scenarios.ErrControlPlane), errors.Is(err, workloads.ErrNotOurs):
		return exitcode.ErrInfrastructure
	}
	return exitcode.ErrKubelet
}
