package skewrun

import (
	"context"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/matrix"
	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
)

// maxMatrixNodes bounds MATRIX_NODES: more trails than this would not
// make a tour faster on one host, and the default tour has 12 hops.
const maxMatrixNodes = 12

// validatedMatrix is a matrix tour's input once checked: the run's
// validated with the circuit as its plan, the versions and the trails.
type validatedMatrix struct {
	*validated
	Versions matrix.Versions
	// Trails are the circuit split for the nodes, Trails[i] starting at
	// circuit entry Starts[i].
	Trails []plan.Plan
	Starts []int
}

// CheckMatrix checks a matrix tour's settings as RunMatrix does before it
// makes anything, and returns the tour's versions and the trails (test
// nodes) its circuit is split into.
func (o Options) CheckMatrix() (versions matrix.Versions, trails int, err error) {
	m, err := validateMatrix(o)
	if err != nil {
		return nil, 0, err
	}
	return m.Versions, len(m.Trails), nil
}

// validateMatrix checks a matrix tour's settings without creating
// anything: MATRIX (parsable, distinct, within the skew policy of its
// newest), MATRIX_NODES, and the rest as validate does with the tour's
// circuit as the plan. PLAN and KUBELETS, which name plan entries, are
// refused. Every error wraps exitcode.ErrInvalid.
func validateMatrix(o Options) (*validatedMatrix, error) {
	given := defaultStr(o.Matrix, matrix.Default)
	vs, err := matrix.Parse(given)
	if err != nil {
		return nil, fmt.Errorf("%w: MATRIX=%s: %v", exitcode.ErrInvalid, given, err)
	}
	if o.Plan != "" {
		return nil, fmt.Errorf("%w: PLAN=%s is set, but a matrix tour makes its own hops from MATRIX; unset PLAN (it is for make test-skew)", exitcode.ErrInvalid, o.Plan)
	}
	if len(o.Kubelets) > 0 {
		return nil, fmt.Errorf("%w: KUBELETS gives a binary per PLAN entry, but a matrix tour takes its kubelets from KUBELET_SOURCE; unset KUBELETS", exitcode.ErrInvalid)
	}
	if o.MatrixNodes < 0 || o.MatrixNodes > maxMatrixNodes {
		return nil, fmt.Errorf("%w: MATRIX_NODES=%d: want a number from 1 to %d", exitcode.ErrInvalid, o.MatrixNodes, maxMatrixNodes)
	}
	if o.Replicas == 0 {
		o.Replicas = matrixReplicas
	}
	circuit := matrix.Circuit(vs)
	trails := matrix.Split(circuit, matrixNodes(o))
	o.Plan = strings.Join(circuit.Raw, ",")
	v, err := validate(o)
	if err != nil {
		return nil, err
	}
	// A provider that cannot make as many test nodes, or whose settings
	// will not do, says so now, before any binary is built: the settings
	// are the plain run's (clusterOptions), with one node per trail.
	if err := v.checkProvider(make([]binaries.Binary, len(trails))); err != nil {
		return nil, fmt.Errorf("%w: MATRIX_NODES=%d with PROVIDER=%s: %v", exitcode.ErrInvalid, len(trails), v.Options.Provider, err)
	}
	m := &validatedMatrix{validated: v, Versions: vs, Trails: trails}
	start := 0
	for _, t := range trails {
		m.Starts = append(m.Starts, start)
		start += len(t.Versions) - 1
	}
	return m, nil
}

// RunMatrix runs a matrix tour: validate, resolve each version's kubelet
// once, bring up one cluster at the newest version with one test node per
// trail (each starting at its trail's first kubelet), run the trails at
// once (matrix.Tour), merge them into one run, finish. The error is nil
// only if every pair was reached and passed (possibly with expected
// deviations); exitcode.Of classifies it.
func RunMatrix(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	m, err := validateMatrix(o)
	if err != nil {
		return nil, err
	}
	kubelets, err := resolveKubelets(ctx, m.validated)
	if err != nil {
		return nil, interrupted(ctx, err)
	}
	run := m.NewRun(start, kubelets)
	lock, err := lockHost(m.validated, run.ID)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	run.Scenario = "matrix-" + string(m.VolumeKind)
	initial := make([]binaries.Binary, len(m.Trails))
	for i, s := range m.Starts {
		initial[i] = kubelets[s]
	}
	c, err := newRunCluster(m.validated, run.ID, initial)
	if err != nil {
		return nil, err
	}
	merged, err := m.tour(ctx, c, run, kubelets)
	return finishRun(ctx, c, merged, interrupted(ctx, err))
}

// tour brings c up and runs the trails on its test nodes, returning the
// merged run (run itself when no trail started).
func (m *validatedMatrix) tour(ctx context.Context, c *runCluster, run *reports.Run, kubelets []binaries.Binary) (merged *reports.Run, err error) {
	merged = run
	defer recoverRun(run, &err)
	o := m.Options
	if err := c.Up(ctx, run); err != nil {
		return run, err
	}
	testNodes, err := c.TestNodes(ctx)
	if err != nil {
		run.Fail(err.Error())
		return run, err
	}
	if len(testNodes) < len(m.Trails) {
		err := fmt.Errorf("%w: the tour has %d trails (MATRIX_NODES), but the %s cluster has %d test nodes; use MATRIX_NODES=%d, or a cluster with more nodes", exitcode.ErrInvalid, len(m.Trails), c.Provider.Name(), len(testNodes), len(testNodes))
		run.Fail(err.Error())
		return run, err
	}
	testNodes = testNodes[:len(m.Trails)]
	cluster, err := c.workloads()
	if err != nil {
		run.Fail(err.Error())
		return run, err
	}
	c.describe(ctx, testNodes[0], run, o.Replicas, m.VolumeKind)
	names := make([]string, len(testNodes))
	for i, n := range testNodes {
		names[i] = n.String()
	}
	run.Environment = append(run.Environment,
		reports.KeyValue{Key: "Matrix", Value: m.Versions.String()},
		reports.KeyValue{Key: "Nodes", Value: fmt.Sprintf("%d (%s), one trail each", len(names), strings.Join(names, ", "))})
	rc, err := c.Provider.RESTConfig()
	if err != nil {
		return run, classify(err, exitcode.ErrInfrastructure)
	}
	usable, err := matrix.NodeUsable(rc, matrix.UsableTimeout)
	if err != nil {
		return run, classify(err, exitcode.ErrInfrastructure)
	}
	byVersion := map[string]binaries.Binary{}
	for i, raw := range m.Plan.Raw {
		byVersion[raw] = kubelets[i]
	}
	t := &matrix.Tour{
		Trails: m.Trails, Nodes: testNodes, Usable: usable, ArtifactsDir: run.ArtifactsDir, Logger: o.Logger,
		Namespace:   trailNamespace(run.ID),
		NewScenario: m.trailScenario(c, cluster, run, byVersion),
	}
	tourStart := time.Now()
	trails, err := t.Run(ctx)
	if err != nil {
		run.Fail(err.Error())
		return run, classify(err, exitcode.ErrInfrastructure)
	}
	run.Timings = append(run.Timings, reports.Timing{Phase: reports.PhaseTour, Duration: time.Since(tourStart)})
	merged = matrix.Merge(*run, trails)
	if merged.Verdict == reports.Fail {
		return merged, classify(fmt.Errorf("tour failed: %s", merged.Failure), exitcode.ErrKubelet)
	}
	return merged, nil
}

// trailScenario makes the tour's scenarios, on the tour's run's cluster
// c: each trail's deployment in its own namespace (matrix.Tour.Namespace),
// made, recorded and, on a shared cluster, removed as every scenario of a
// run is (runCluster.newScenario).
func (m *validatedMatrix) trailScenario(c *runCluster, cluster reconstruction.Cluster, run *reports.Run, byVersion map[string]binaries.Binary) func(nodes.Node, plan.Plan, int, matrix.Workload, *reports.Run) (matrix.Scenario, error) {
	o := m.Options
	return func(node nodes.Node, p plan.Plan, firstHop int, w matrix.Workload, r *reports.Run) (matrix.Scenario, error) {
		bins := make([]binaries.Binary, len(p.Raw))
		for i, raw := range p.Raw {
			bins[i] = byVersion[raw]
		}
		sc, err := c.newScenario(reconstruction.Config{Plan: p, Kubelets: bins, Replicas: o.Replicas, Kind: m.VolumeKind,
			RunID: run.ID, Name: w.Name, Namespace: w.Namespace, PollInterval: o.PollInterval, CleanupTimeout: o.CleanupTimeout, TimeoutFactor: o.TimeoutFactor,
			FirstHop: firstHop, Logger: o.Logger.With("node", node.String())}, cluster, node, r)
		if err != nil {
			return nil, err
		}
		return sc, nil
	}
}

// trailNamespace names the namespace of trail i's deployment d (both
// from 1) of run: skewtest-<run>-trail-<i>[-<d>], each its own and of this
// run alone (workloads.Namespace).
func trailNamespace(run string) func(trail, deployment int) string {
	return func(trail, deployment int) string {
		parts := []string{"trail", fmt.Sprint(trail)}
		if deployment > 1 {
			parts = append(parts, fmt.Sprint(deployment))
		}
		return workloads.Namespace(run, parts...)
	}
}

// matrixNodes is MATRIX_NODES, or by default matrix.DefaultNodes capped
// at what the provider can make (kind: one worker so far).
func matrixNodes(o Options) int {
	if o.MatrixNodes != 0 {
		return o.MatrixNodes
	}
	if d, err := clusters.Lookup(defaultStr(o.Provider, clusters.Default().Name)); err == nil && d.MaxTestNodes > 0 {
		return min(matrix.DefaultNodes, d.MaxTestNodes)
	}
	return matrix.DefaultNodes
}
