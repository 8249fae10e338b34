package skewrun

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
)

// serverVersionTimeout bounds the discovery call that reads the API
// server's version after Up.
const serverVersionTimeout = 30 * time.Second

// runCluster is one provider's cluster for a validated run: made by
// newRunCluster, brought up by Up, shared by every runScenario on its nodes,
// and ended by finishRun.
type runCluster struct {
	Provider clusters.Provider
	// ServerVersion is the API server's version, read through discovery
	// by Up.
	ServerVersion *version.Version
	serverGit     string
	v             *validated
	up            bool
	// left are the run's scenarios, whatever they left in a shared
	// cluster removed by finishRun (removeLeftWorkloads); namespaces are
	// those the run's scenarios put their workloads in, which are all of
	// a shared cluster its evidence holds (apiScope). leftMu guards both.
	leftMu     sync.Mutex
	left       []madeInCluster
	namespaces []string
}

// newRunCluster makes the provider of v with one test node per initial
// kubelet (a sign-off run has one: the plan's first). Nothing is created
// until Up; errors are exitcode.ErrInvalid (an unusable provider setting).
func newRunCluster(v *validated, runID string, initialKubelets []binaries.Binary) (*runCluster, error) {
	prov, err := clusters.New(v.Options.Provider, v.clusterOptions(runID, initialKubelets), v.Options.ProviderSettings)
	if err != nil {
		return nil, fmt.Errorf("%w: PROVIDER=%s: %v", exitcode.ErrInvalid, v.Options.Provider, err)
	}
	return &runCluster{Provider: prov, v: v}, nil
}

// clusterOptions are the shared provider options for a run of v: the one
// construction newRunCluster makes the provider from and the checks before
// it (checkProvider) validate, so that both see the same settings; the
// provider's own settings go beside them as Options.ProviderSettings.
// runID is empty before the run has one; the checks then use a stand-in.
func (v *validated) clusterOptions(runID string, initialKubelets []binaries.Binary) clusters.Options {
	o := v.Options
	co := clusters.Options{RunID: runID, CacheDir: o.CacheDir, Logger: o.Logger,
		APIServerVersion: v.APIServer, InitialKubelets: initialKubelets, RunRoot: o.RunRoot,
		CSIMode: o.CSIMode, TimeoutFactor: o.TimeoutFactor}
	if runID != "" {
		co.ArtifactsDir = filepath.Join(v.ArtifactsRoot, runID)
	}
	return co
}

// checkProvider checks, without a cluster, what newRunCluster will make the
// provider of v from, with one test node per initial kubelet.
func (v *validated) checkProvider(initialKubelets []binaries.Binary) error {
	return clusters.CheckOptions(v.Options.Provider, v.clusterOptions("", initialKubelets), v.Options.ProviderSettings)
}

// Up brings the cluster up (or attaches), records the bring-up time in
// run, reads the API server's version through discovery and checks the
// plan against it before any node is touched. On failure run carries the
// verdict; finishRun must still be called to tear down what was made.
func (c *runCluster) Up(ctx context.Context, run *reports.Run) error {
	start := time.Now()
	if err := c.Provider.Up(ctx); err != nil {
		run.Fail("cluster bring-up: " + err.Error())
		return classify(fmt.Errorf("bring up the %s cluster: %w", c.Provider.Name(), err), exitcode.ErrInfrastructure)
	}
	c.up = true
	run.Timings = append(run.Timings, reports.Timing{Phase: "cluster up", Duration: time.Since(start)})
	rc, err := c.Provider.RESTConfig()
	if err == nil {
		c.ServerVersion, c.serverGit, err = serverVersion(ctx, rc)
	}
	if err != nil {
		run.Fail("read the API server's version: " + err.Error())
		return classify(fmt.Errorf("read the %s cluster's API server version: %w", c.Provider.Name(), err), exitcode.ErrInfrastructure)
	}
	if err := c.v.Plan.Validate(c.ServerVersion); err != nil {
		run.Fail(err.Error())
		return fmt.Errorf("%w: PLAN=%s against the cluster's API server %s: %v", exitcode.ErrInvalid, c.v.Options.Plan, c.ServerVersion, err)
	}
	return nil
}

// serverVersion asks the API server for its version through discovery.
func serverVersion(ctx context.Context, rc *rest.Config) (*version.Version, string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, serverVersionTimeout)
	defer cancel()
	info, err := dc.ServerVersionWithContext(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("API server %s: %w", rc.Host, err)
	}
	v, err := version.ParseSemantic(info.GitVersion)
	if err != nil {
		if v, err = version.ParseGeneric(info.GitVersion); err != nil {
			return nil, "", fmt.Errorf("API server %s: version %q: %w", rc.Host, info.GitVersion, err)
		}
	}
	return v, info.GitVersion, nil
}

// TestNodes are the nodes scenarios may disrupt; an error (exitcode.ErrInfrastructure)
// when there are none.
func (c *runCluster) TestNodes(ctx context.Context) ([]nodes.Node, error) {
	ns, err := c.Provider.TestNodes(ctx)
	if err == nil && len(ns) == 0 {
		err = fmt.Errorf("the provider reported none")
	}
	if err != nil {
		return nil, classify(fmt.Errorf("no test node in the %s cluster: %w", c.Provider.Name(), err), exitcode.ErrInfrastructure)
	}
	return ns, nil
}

// workloads adapts the provider to what the scenario needs: a provider
// with volumes of its own (capabilities.WithOwnWorkload) is the
// scenario's cluster itself, unwrapped, so that the scenario finds its
// other capabilities there too (the CSI driver's call record the
// *-fails-final faults judge); others name a StorageClass of the
// cluster's and a stock image (their own settings, checked before
// anything was built).
func (c *runCluster) workloads() (reconstruction.Cluster, error) {
	if rc, ok := c.Provider.(reconstruction.Cluster); ok {
		return rc, nil
	}
	sp, ok := c.Provider.(capabilities.WithStorageClass)
	if !ok || sp.StorageClass() == "" {
		return nil, fmt.Errorf("%w: the %s provider has neither volumes of its own nor a StorageClass for the workload's", exitcode.ErrHarness, c.Provider.Name())
	}
	image := storage.StockImage
	if ip, ok := c.Provider.(capabilities.WithWorkloadImage); ok && ip.WorkloadImage() != "" {
		image = ip.WorkloadImage()
	}
	return &dynamicCluster{Provider: c.Provider, storageClass: sp.StorageClass(), image: image}, nil
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

// describe fills run's environment for node and a workload of replicas
// pods on kind volumes, and adds the binaries the cluster runs besides the
// kubelets.
func (c *runCluster) describe(ctx context.Context, node nodes.Node, run *reports.Run, replicas int, kind storage.Kind) {
	run.Environment = c.environment(ctx, node, replicas, kind)
	if bp, ok := c.Provider.(capabilities.WithBinaries); ok {
		for _, b := range bp.Binaries() {
			run.Binaries = appendBinary(run.Binaries, b)
		}
	}
}

// clientset is a client of the cluster's API server; valid after Up.
func (c *runCluster) clientset() (kubernetes.Interface, error) {
	cfg, err := c.Provider.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func (c *runCluster) environment(ctx context.Context, node nodes.Node, replicas int, kind storage.Kind) []reports.KeyValue {
	o := c.v.Options
	env := []reports.KeyValue{}
	add := func(k, v string) { env = append(env, reports.KeyValue{Key: k, Value: v}) }
	if c.serverGit != "" {
		add("API server", c.serverGit)
	}
	if cs, err := c.clientset(); err == nil {
		if n, err := cs.CoreV1().Nodes().Get(ctx, node.String(), metav1.GetOptions{}); err == nil {
			add("Container runtime", n.Status.NodeInfo.ContainerRuntimeVersion)
			add("Node OS", n.Status.NodeInfo.OSImage)
			add("Kernel", n.Status.NodeInfo.KernelVersion)
		}
	}
	if h, err := nodes.ProbeHost(ctx, node); err == nil {
		add(reports.EnvCgroup, h.CgroupMode)
		add(reports.EnvInitSystem, h.Init)
	}
	add(reports.EnvVolumeKind, string(kind))
	if d, ok := c.Provider.(capabilities.WithCSIDriver); ok && kind == storage.CSI && d.CSIDriver() != "" {
		add("CSI driver", d.CSIDriver())
	}
	add("Replicas", fmt.Sprint(replicas))
	if n := o.VolumesPerPod; n > 1 {
		add("Volumes per pod", fmt.Sprint(n))
	}
	add("Kubelet root", node.KubeletRootDir())
	add("Poll interval", defaultDur(o.PollInterval, 250*time.Millisecond).String())
	add("Harness", "skewtest, "+runtime.Version())
	return env
}
