// Package skewrun is one whole skew run, as `make test-skew`, the Ginkgo
// suite and the benchmark run it: validate the plan, resolve the kubelet
// binaries, bring the cluster up (or attach), run the reconstruction
// scenario on one node, collect logs, write the reports, and tear down
// (also after a failure or an interrupt, unless told to keep a failed
// cluster).
package skewrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/existing"
	kindcluster "sigs.k8s.io/skewtest/clusters/kind"
	"sigs.k8s.io/skewtest/clusters/local"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
)

// DefaultPlan is the manual sign-off's plan: down one minor and back.
const DefaultPlan = "v1.37.2,v1.36.3,v1.37.2"

// Options is one run.
type Options struct {
	Provider string
	Plan     string
	Replicas int
	Kind     string
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
	LocalRunRoot         string
	PollInterval         time.Duration
	CleanupTimeout       time.Duration
	// KindNodeImage overrides the kind provider's offline node image.
	KindNodeImage string
	// KindCSI chooses the kind provider's CSI driver.
	KindCSI string
	// Existing cluster settings.
	Existing     existing.Config
	StorageClass string
	Image        string
	Logger       *slog.Logger
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

// ErrInvalid marks errors in the user's input, found before anything was
// created.
var ErrInvalid = errors.New("invalid input")

// Run performs one run. The error is nil only if the scenario passed
// (possibly with expected deviations).
func Run(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Provider == "" {
		o.Provider = clusters.Local
	}
	if o.Plan == "" {
		o.Plan = DefaultPlan
	}
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.CacheDir == "" {
		o.CacheDir = binaries.DefaultCacheDir()
	}
	kind, err := storage.ParseKind(defaultStr(o.Kind, string(storage.CSI)))
	if err != nil {
		return nil, fmt.Errorf("%w: VOLUME_KIND: %v", ErrInvalid, err)
	}
	pl, err := plan.Parse(o.Plan)
	if err != nil {
		return nil, fmt.Errorf("%w: PLAN=%s: %v", ErrInvalid, o.Plan, err)
	}
	if o.Provider != clusters.Existing {
		// Providers that create the cluster run the API server at the
		// plan's newest version.
		if err := pl.Validate(pl.Newest()); err != nil {
			return nil, fmt.Errorf("%w: PLAN=%s: %v", ErrInvalid, o.Plan, err)
		}
	}
	specs, err := kubeletSpecs(pl, o)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	runID := reports.NewRunID(start)
	root := defaultStr(o.ArtifactsDir, "_artifacts")
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	artifacts := filepath.Join(root, runID)
	// Unknown providers fail here, before binaries are built.
	if err := clusters.CheckOptions(o.Provider, clusters.Options{KindCSI: o.KindCSI}); err != nil {
		return nil, fmt.Errorf("%w: PROVIDER=%s: %v", ErrInvalid, o.Provider, err)
	}

	resolver := &binaries.Resolver{CacheDir: o.CacheDir, BaseURL: o.ReleaseBaseURL, Logger: logger, Module: &binaries.ModuleBuilder{CacheDir: o.CacheDir, Logger: logger}}
	logger.Info("resolving kubelet binaries", "plan", pl.String(), "sources", strings.Join(specs, ","))
	kubelets, err := resolver.ResolvePlan(ctx, "kubelet", specs)
	if err != nil {
		return nil, fmt.Errorf("resolve kubelets for plan %s: %w", pl, err)
	}
	for i, k := range kubelets {
		if want := "v" + pl.Versions[i].String(); k.Version != want {
			return nil, fmt.Errorf("%w: plan entry %d wants kubelet %s but %s is %s; give a kubelet of %s for that entry in KUBELETS, or change PLAN", ErrInvalid, i+1, want, k.Source, k.Version, want)
		}
	}

	run := &reports.Run{ID: runID, Scenario: reports.ReconstructionScenarioPrefix + string(kind), Provider: o.Provider, Plan: pl.Raw, Started: start, ArtifactsDir: artifacts}
	for _, k := range kubelets {
		run.Binaries = appendBinary(run.Binaries, k)
	}
	res := &Result{Run: run, ArtifactsDir: artifacts}

	prov, err := clusters.New(o.Provider, clusters.Options{RunID: runID, CacheDir: o.CacheDir, Logger: logger,
		APIServerVersion: pl.Newest(), InitialKubelet: kubelets[0], LocalRunRoot: o.LocalRunRoot, Existing: o.Existing, KindNodeImage: o.KindNodeImage, KindCSI: o.KindCSI})
	if err != nil {
		return nil, fmt.Errorf("%w: PROVIDER=%s: %v", ErrInvalid, o.Provider, err)
	}
	failed := true
	defer func() {
		teardown := time.Now()
		// Teardown must run even when ctx was cancelled by a signal.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		defer cancel()
		// An interrupted run is torn down even when a failed one would be
		// kept: the user asked it to stop.
		if failed && o.KeepClusterOnFailure && ctx.Err() == nil {
			res.Kept = keptMessage(prov)
			fmt.Fprintln(o.Out, res.Kept)
		} else if derr := prov.Down(dctx); derr != nil {
			err = errors.Join(err, fmt.Errorf("tear down the %s cluster: %w", o.Provider, derr))
			run.Verdict, run.Failure = reports.Fail, firstNonEmpty(run.Failure, "teardown failed: "+derr.Error())
		}
		run.Timings = append(run.Timings, reports.Timing{Phase: "teardown", Duration: time.Since(teardown)})
		run.Finished = time.Now()
		run.Timings = append(run.Timings, reports.Timing{Phase: "whole run", Duration: run.Finished.Sub(run.Started)})
		files, werr := reports.WriteAll(artifacts, run)
		res.Files = files
		if werr == nil {
			werr = publish(root, runID, run)
		}
		if werr != nil {
			err = errors.Join(err, fmt.Errorf("write reports to %s: %w", artifacts, werr))
		}
		fmt.Fprintln(o.Out, reports.Summary(run))
	}()

	upStart := time.Now()
	if err := prov.Up(ctx); err != nil {
		run.Verdict, run.Failure = reports.Fail, "cluster bring-up: "+err.Error()
		return res, fmt.Errorf("bring up the %s cluster: %w", o.Provider, err)
	}
	run.Timings = append(run.Timings, reports.Timing{Phase: "cluster up", Duration: time.Since(upStart)})
	if ex, ok := prov.(*existing.Provider); ok {
		sv, err := ex.ServerVersion(ctx)
		if err != nil {
			return res, err
		}
		if err := pl.Validate(sv); err != nil {
			run.Verdict, run.Failure = reports.Fail, err.Error()
			return res, fmt.Errorf("%w: PLAN=%s against the cluster's API server %s: %v", ErrInvalid, o.Plan, sv, err)
		}
	}
	testNodes, err := prov.TestNodes(ctx)
	if err != nil || len(testNodes) == 0 {
		run.Verdict, run.Failure = reports.Fail, fmt.Sprintf("no test node: %v", err)
		return res, fmt.Errorf("no test node in the %s cluster: %v", o.Provider, err)
	}
	node := testNodes[0]
	run.Node = node.String()
	cluster, err := scenarioCluster(prov, o)
	if err != nil {
		return res, err
	}
	run.Environment = environment(ctx, prov, node, kind, o)
	if bp, ok := prov.(interface{ Binaries() []binaries.Binary }); ok {
		for _, b := range bp.Binaries() {
			run.Binaries = appendBinary(run.Binaries, b)
		}
	}
	sc, err := reconstruction.New(reconstruction.Config{Plan: pl, Kubelets: kubelets, Replicas: o.Replicas, Kind: kind,
		PollInterval: o.PollInterval, CleanupTimeout: o.CleanupTimeout, Logger: logger}, cluster, node, run)
	if err != nil {
		return res, err
	}
	runner := &scenarios.Runner{Run: run, Node: node, ArtifactsDir: artifacts, Logger: logger}
	scenarioErr := runner.Execute(ctx, sc.Steps())
	if derr := prov.DumpClusterLogs(context.WithoutCancel(ctx), filepath.Join(artifacts, "logs")); derr != nil {
		logger.Warn("could not collect cluster logs", "err", derr)
	}
	if lp, ok := prov.(*local.Provider); ok {
		writeCSICalls(artifacts, lp)
	}
	run.ComputeVerdict()
	if scenarioErr != nil {
		return res, scenarioErr
	}
	if run.Verdict == reports.Fail {
		return res, fmt.Errorf("run failed: %s", run.Failure)
	}
	failed = false
	return res, nil
}

// publish copies the run's JUnit file to the artifacts root and points
// <root>/latest at the run.
func publish(root, runID string, run *reports.Run) error {
	name := reports.JUnitFileName(run.Scenario)
	b, err := os.ReadFile(filepath.Join(root, runID, name))
	if err != nil {
		return err
	}
	top := strings.TrimSuffix(name, ".xml") + "-" + runID + ".xml"
	if err := os.WriteFile(filepath.Join(root, top), b, 0o644); err != nil {
		return err
	}
	latest := filepath.Join(root, "latest")
	os.Remove(latest)
	return os.Symlink(runID, latest)
}

func kubeletSpecs(pl plan.Plan, o Options) ([]string, error) {
	if len(o.Kubelets) > 0 {
		if len(o.Kubelets) != len(pl.Versions) {
			return nil, fmt.Errorf("KUBELETS has %d entries for a plan of %d versions; give one per plan entry", len(o.Kubelets), len(pl.Versions))
		}
		return o.Kubelets, nil
	}
	specs := make([]string, len(pl.Versions))
	for i, v := range pl.Versions {
		switch defaultStr(o.KubeletSource, "module") {
		case "module":
			specs[i] = "module:v" + v.String()
		case "release":
			specs[i] = "release:v" + v.String()
		case "kindest":
			specs[i] = "image:" + kindcluster.NodeImageFor(v)
		default:
			return nil, fmt.Errorf("KUBELET_SOURCE=%q: want module (build from the Go module), release (download from dl.k8s.io) or kindest (extract from the kindest/node image of each version)", o.KubeletSource)
		}
	}
	return specs, nil
}

// scenarioCluster adapts a provider to what the scenario needs.
func scenarioCluster(p clusters.Provider, o Options) (reconstruction.Cluster, error) {
	if c, ok := p.(reconstruction.Cluster); ok {
		return c, nil
	}
	if o.StorageClass == "" {
		return nil, fmt.Errorf("%w: the %s provider needs STORAGE_CLASS, a StorageClass that provisions volumes on the test node", ErrInvalid, p.Name())
	}
	return &dynamicCluster{Provider: p, storageClass: o.StorageClass, image: defaultStr(o.Image, "registry.k8s.io/e2e-test-images/busybox:1.37.0-1")}, nil
}

// dynamicCluster uses a StorageClass of the cluster's own and a stock image.
type dynamicCluster struct {
	clusters.Provider
	storageClass, image string
}

func (d *dynamicCluster) ProvisionVolumes(context.Context, storage.Request) (storage.Volumes, error) {
	return storage.Volumes{StorageClass: d.storageClass}, nil
}

func (d *dynamicCluster) Workload() storage.Workload {
	return storage.Workload{Image: d.image, PullPolicy: "IfNotPresent", Command: storage.BusyboxCommand}
}

func environment(ctx context.Context, p clusters.Provider, node nodes.Node, kind storage.Kind, o Options) []reports.KeyValue {
	env := []reports.KeyValue{}
	add := func(k, v string) { env = append(env, reports.KeyValue{Key: k, Value: v}) }
	if cfg, err := p.RESTConfig(); err == nil {
		if cs, err := kubernetes.NewForConfig(cfg); err == nil {
			if v, err := cs.Discovery().ServerVersion(); err == nil {
				add("API server", v.GitVersion)
			}
			if n, err := cs.CoreV1().Nodes().Get(ctx, node.String(), metav1.GetOptions{}); err == nil {
				add("Container runtime", n.Status.NodeInfo.ContainerRuntimeVersion)
				add("Node OS", n.Status.NodeInfo.OSImage)
				add("Kernel", n.Status.NodeInfo.KernelVersion)
			}
		}
	}
	if r, err := exec.Output(ctx, node, "sh", "-c", "stat -fc %T /sys/fs/cgroup"); err == nil {
		mode := "v1 (hybrid or legacy)"
		if strings.TrimSpace(r.Stdout) == "cgroup2fs" {
			mode = "v2"
		}
		add("cgroup", mode)
	}
	add(reports.EnvVolumeKind, string(kind))
	if d, ok := p.(interface{ CSIDriver() string }); ok && kind == storage.CSI && d.CSIDriver() != "" {
		add("CSI driver", d.CSIDriver())
	}
	add("Replicas", fmt.Sprint(o.Replicas))
	add("Kubelet root", node.KubeletRootDir())
	add("Poll interval", defaultDur(o.PollInterval, 250*time.Millisecond).String())
	add("Harness", "skewtest, "+runtime.Version())
	return env
}

func keptMessage(p clusters.Provider) string {
	msg := fmt.Sprintf("The failed %s cluster was kept (KEEP_CLUSTER_ON_FAILURE).\n  Reach it:     KUBECONFIG=%s kubectl get nodes,pods -A", p.Name(), p.KubeconfigPath())
	if rp, ok := p.(interface{ RunDir() string }); ok {
		msg += fmt.Sprintf("\n  Its files:    %s\n  Tear it down: go run ./scripts/skewtest clean %s", rp.RunDir(), rp.RunDir())
	}
	return msg
}

func writeCSICalls(artifacts string, lp *local.Provider) {
	var b strings.Builder
	for _, c := range lp.CSICalls() {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\n", c.Time.Format("15:04:05.000"), c.Method, c.VolumeID, c.Path, c.Err)
	}
	_ = os.MkdirAll(filepath.Join(artifacts, "logs"), 0o755)
	_ = os.WriteFile(filepath.Join(artifacts, "logs", "csi-calls.tsv"), []byte(b.String()), 0o644)
}

func appendBinary(list []reports.Binary, b binaries.Binary) []reports.Binary {
	rb := reports.Binary{Component: b.Component, Version: b.Version, Source: b.Source, SHA256: b.SHA256}
	for _, x := range list {
		if x == rb {
			return list
		}
	}
	return append(list, rb)
}

func defaultStr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func defaultDur(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
