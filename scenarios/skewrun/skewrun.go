// Package skewrun is one whole skew run, as `make test-skew`, the Ginkgo
// suite, the benchmark and `skewtest run` run it. Run chains five verbs,
// one file each and internal to the package, which a matrix tour
// (RunMatrix) and a batch (RunBatch) reuse to share one cluster among many
// hops, runs and nodes:
//
//	Validate (validate.go)   the options, plan and kubelet sources; creates
//	                         nothing but the artifacts root, tried for
//	                         writing. Errors wrap exitcode.ErrInvalid (exit 2).
//	resolveKubelets          one kubelet binary per plan entry (cache, build,
//	(resolve.go)             download). Errors wrap exitcode.ErrInfrastructure,
//	                         or exitcode.ErrInvalid for a source the user
//	                         must change.
//	newRunCluster, Up        the provider, made with one initial kubelet per
//	(up.go)                  test node, brought up, and the plan checked
//	                         against its API server's version, read through
//	                         discovery, before any node is touched.
//	runScenario              the reconstruction scenario on one node with a
//	(scenario.go)            plan, a workload name and its own *reports.Run.
//	                         Failures wrap exitcode.ErrKubelet (exit 1).
//	finishRun (finish.go)    logs, teardown (or keep a failed cluster),
//	                         reports, JUnit published to the artifacts root.
//
// RunBatch (batch*.go) runs many jobs on the nodes of shared clusters,
// longest first. Package exitcode turns any of their errors into
// skewtest's exit code, and its SignalContext makes an interrupt visible
// to it.
//
// Providers are used through clusters.Provider and the optional
// one-method interfaces of clusters/capabilities, never as concrete types.
package skewrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// matrixReplicas is the workload size of a matrix tour's trails unless
// REPLICAS says otherwise: one pod proves each (from, to) pair, as one
// proves a fault, and three per trail doubled a tour on 2 cores (40 s
// against 21 s on 6 nodes: every hop re-creates every pod), while the
// sign-off plans keep three.
const matrixReplicas = 1

// Options is one run.
type Options struct {
	Provider string
	Plan     string
	// APIServer (APISERVER) is the kube-apiserver version of a cluster
	// the provider creates; empty for the plan's newest. An older plan
	// under a newer control plane (kubelets 1.28.5 and 1.26.15 under
	// v1.28.15) replays a sign-off whose own control plane cannot be built.
	APIServer string
	Replicas  int
	// VolumesPerPod is how many volumes each of the workload's pods has
	// (reconstruction.Config.VolumesPerPod); 0 for one. skewtest
	// bench-scale sets it.
	VolumesPerPod int
	// VolumeKind (VOLUME_KIND) is the workload's volumes: "csi" (the
	// default) or "local" (storage.ParseKind).
	VolumeKind string
	// KubeletSource says where plan versions' kubelets come from:
	// "module" (built from the k8s.io/kubernetes Go module, the default:
	// needs only the Go module proxy) or "release" (downloaded from
	// dl.k8s.io and checked against its published sha256).
	KubeletSource string
	// Kubelets, when set, gives one binary spec per plan entry (see
	// binaries.ParseSpec), e.g. file:/path/kubelet; it overrides
	// KubeletSource.
	Kubelets []string
	// ReleaseBaseURL is a dl.k8s.io mirror.
	ReleaseBaseURL string
	// ArtifactsDir is the artifacts root ($ARTIFACTS, default ./_artifacts):
	// each run writes into <root>/<run-id>/, and its JUnit file is also
	// copied to the root, where Prow and TestGrid look for junit_*.xml.
	ArtifactsDir         string
	KeepClusterOnFailure bool
	CacheDir             string
	// RunRoot is the parent of run directories (every provider's; empty
	// for its default).
	RunRoot        string
	PollInterval   time.Duration
	CleanupTimeout time.Duration
	// TimeoutFactor stretches the scenario's waits (SKEWTEST_TIMEOUT_FACTOR,
	// timeouts.FactorEnv); 0 counts as 1.
	TimeoutFactor time.Duration
	// CSIMode is the mode of skewtest's own CSI driver (CSI_MODE), for
	// every provider (see clusters.Options).
	CSIMode string
	// Matrix (MATRIX) are the versions of a matrix tour (RunMatrix), any
	// order; empty for matrix.Default. MatrixNodes (MATRIX_NODES) is how
	// many nodes run its trails at once; 0 for matrix.DefaultNodes.
	Matrix      string
	MatrixNodes int
	// BatchNodes (BATCH_NODES) is how many nodes of one cluster run a
	// batch's runs at once (RunBatch); 0 for defaultBatchNodes, capped at
	// what the provider can make.
	BatchNodes int
	// Scenario (SCENARIO) names the catalogue fault each hop plants
	// (reconstruction.Faults), or catalogue shapes to add to the workload
	// (reconstruction.Shapes; several separated by commas); empty for the
	// baseline.
	Scenario string
	// ProviderSettings are the chosen provider's own settings, as its
	// descriptor's FromEnv read them (OptionsFromEnv does); opaque here,
	// they go to clusters.New as they are. nil for the provider's
	// defaults.
	ProviderSettings any
	Logger           *slog.Logger
	// Out receives the human summary at the end.
	Out io.Writer
}

// Result is what a run leaves.
type Result struct {
	Run          *reports.Run
	ArtifactsDir string
	Files        []string
	// Kept is set when a failed cluster was left up on request, with how
	// to reach it and remove it.
	Kept string
}

// Run performs one run: validate, resolve, up, the scenario on the first
// test node, finish. The error is nil only if the scenario passed
// (possibly with expected deviations); exitcode.Of classifies it. The result
// is nil when the run stopped before a cluster was made.
func Run(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	v, err := validate(o)
	if err != nil {
		return nil, err
	}
	kubelets, err := resolveKubelets(ctx, v)
	if err != nil {
		return nil, interrupted(ctx, err)
	}
	run := v.NewRun(start, kubelets)
	lock, err := lockHost(v, run.ID)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	c, err := newRunCluster(v, run.ID, kubelets[:1])
	if err != nil {
		return nil, err
	}
	err = upAndRun(ctx, c, run, kubelets)
	return finishRun(ctx, c, run, interrupted(ctx, err))
}

// recoverRun turns a panic in a run's bring-up or scenario into the run's
// infrastructure failure (exit 3) with the panic and its stack in the
// report, so that finishRun still tears the cluster down. Call it deferred,
// with the function's named error.
func recoverRun(run *reports.Run, err *error) {
	p := recover()
	if p == nil {
		return
	}
	msg := fmt.Sprintf("skewtest panicked: %v\n%s", p, debug.Stack())
	run.Fail(msg)
	*err = classify(errors.New(msg), exitcode.ErrInfrastructure)
}

// upAndRun brings c up and runs the scenario of the whole plan on its
// first test node.
func upAndRun(ctx context.Context, c *runCluster, run *reports.Run, kubelets []binaries.Binary) (err error) {
	defer recoverRun(run, &err)
	if err := c.Up(ctx, run); err != nil {
		return err
	}
	testNodes, err := c.TestNodes(ctx)
	if err != nil {
		run.Fail(err.Error())
		return err
	}
	return runScenario(ctx, c, testNodes[0], nodeScenario{Plan: c.v.Plan, Kubelets: kubelets, Fault: c.v.Fault, Shapes: c.v.Shapes}, run)
}
