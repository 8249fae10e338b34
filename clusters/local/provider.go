// Package local is the provider that runs a real cluster on this Linux host
// with no Docker, cloud account or registry: etcd and the control plane,
// built or installed offline, and one or more nodes, each a real kubelet
// with a containerd and skewtest's own CSI node plugin of its own making
// real mounts. Everything a run makes lives under one run directory
// (sockets, state, logs, the kubelets' roots) so it never collides with a
// containerd or kubelet the host already runs, and Down removes it all.
//
// Nodes are named as kind names workers: skewtest-worker, then
// skewtest-worker2, skewtest-worker3, ... (NodeNames). The first node's
// files and host objects are named as they were when the provider had one
// node (kubelet/, containerd/, logs/kubelet-1-v1.37.2.log, cgroup
// /skewtest-<id>, bridge skw<id>); node i+1 adds the suffix i+1 to each
// (kubelet2/, containerd2/, logs/kubelet2-1-v1.36.3.log,
// /skewtest-<id>2, skw<id>2). The control plane is shared.
package local

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/local/internal/process"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/registry"
	"sigs.k8s.io/skewtest/clusters/timeouts"
)

// The optional capabilities the local provider has.
var (
	_ capabilities.WithBinaries    = &Provider{}
	_ capabilities.WithRunDir      = &Provider{}
	_ capabilities.WithCSIDriver   = &Provider{}
	_ capabilities.WithCSICalls    = &Provider{}
	_ capabilities.WithPrefetch    = &Provider{}
	_ capabilities.WithVolumes     = &Provider{}
	_ capabilities.WithWorkload    = &Provider{}
	_ capabilities.WithOwnWorkload = &Provider{}
)

// harnessQPS is the request rate the harness's clients of the run's API
// server may sustain (RESTConfig).
const harnessQPS = 100

// DefaultRunRoot holds one directory per run.
const DefaultRunRoot = registry.DefaultRunRoot

// Config configures a local cluster.
type Config struct {
	// RunID names the run directory <RunRoot>/<RunID>.
	RunID   string
	RunRoot string
	// CacheDir is the binary cache (binaries.DefaultCacheDir()).
	CacheDir string
	// APIServerVersion is the control plane's version: the plan's newest.
	APIServerVersion *version.Version
	// Kubelets are the kubelets the nodes start with, one per node in node
	// order (NodeNames(len(Kubelets))): for a single node, the plan's
	// first; for a matrix tour, each trail's first.
	Kubelets []binaries.Binary
	// CSIMode is the CSI driver's mode: "tmpfs" (the default when empty)
	// or "ebs" (loop devices, ext4 or raw block, attached through
	// VolumeAttachments by the external-attacher).
	CSIMode string
	// TimeoutFactor stretches the start timeouts (registry.Options); 0
	// counts as 1.
	TimeoutFactor time.Duration
	Logger        *slog.Logger
}

// Provider is a local cluster.
type Provider struct {
	cfg     Config
	dir     string
	logger  *slog.Logger
	csiMode csidriver.Mode

	mu     sync.Mutex
	procs  []*process.Process // control plane, in start order
	nodes  []*Node
	nodeIP net.IP
	// host is this host's cgroup mode and init system, and daemonCgroup
	// the cgroup v2 directory every daemon starts in ("" on a v1 host),
	// both set by Up before any daemon starts.
	host         cgroups.Host
	daemonCgroup string
	// devicePluginHolder is the host's mount holding hostDevicePluginDir,
	// which each kubelet's namespace makes a slave (mountns.go); set by Up
	// before any kubelet starts.
	devicePluginHolder string
	// slow multiplies start timeouts (timeouts.FactorEnv); 0 counts as 1.
	slow     time.Duration
	ports    ports
	binaries []binaries.Binary
	csiBin   string // the CSI driver's command, built by Up
	// stopRecording ends the VolumeAttachment record (ModeEBS).
	stopRecording context.CancelFunc
	restCfg       *rest.Config
	clientset     kubernetes.Interface
}

// New validates cfg; nothing is created until Up.
func New(cfg Config) (*Provider, error) {
	if cfg.RunID == "" {
		return nil, fmt.Errorf("local provider: a run ID is required")
	}
	if cfg.RunRoot == "" {
		cfg.RunRoot = DefaultRunRoot
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = binaries.DefaultCacheDir()
	}
	if cfg.APIServerVersion == nil {
		return nil, fmt.Errorf("local provider: the API server version is required")
	}
	if len(cfg.Kubelets) == 0 {
		return nil, fmt.Errorf("local provider: the initial kubelet binary is required (one per node)")
	}
	if len(cfg.Kubelets) > MaxNodes {
		return nil, fmt.Errorf("local provider: %d nodes asked for, at most %d run on one host; split the tour into fewer trails", len(cfg.Kubelets), MaxNodes)
	}
	for i, k := range cfg.Kubelets {
		if k.Path == "" {
			return nil, fmt.Errorf("local provider: the initial kubelet binary is required for node %d (%s)", i+1, NodeNames(i + 1)[i])
		}
	}
	mode, err := csidriver.ParseMode(cfg.CSIMode)
	if err != nil {
		return nil, fmt.Errorf("local provider: CSI_MODE: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("local provider: must run as root (it mounts volumes and runs a kubelet); try sudo -E make test-skew")
	}
	factor := max(cfg.TimeoutFactor, 1)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Provider{cfg: cfg, dir: filepath.Join(cfg.RunRoot, cfg.RunID), logger: logger, csiMode: mode, slow: factor}, nil
}

// Name implements clusters.Provider.
func (p *Provider) Name() string { return "local" }

// RunDir is the directory holding everything this run made.
func (p *Provider) RunDir() string { return p.dir }

func (p *Provider) path(elem ...string) string {
	return filepath.Join(append([]string{p.dir}, elem...)...)
}

// KubeconfigPath implements clusters.Provider.
func (p *Provider) KubeconfigPath() string { return p.path("kubeconfig", "admin.kubeconfig") }

// RESTConfig implements clusters.Provider.
func (p *Provider) RESTConfig() (*rest.Config, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.restCfg != nil {
		return rest.CopyConfig(p.restCfg), nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", p.KubeconfigPath())
	if err != nil {
		return nil, fmt.Errorf("local provider: load %s (is the cluster up?): %w", p.KubeconfigPath(), err)
	}
	// The client's key pair in memory, not as files: client-go reloads
	// certificate files in the background for as long as the process
	// lives, and logs an error a minute once teardown removed them (a
	// batch outlives its clusters).
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, fmt.Errorf("local provider: read the key pair %s names: %w", p.KubeconfigPath(), err)
	}
	cfg.CertFile, cfg.KeyFile, cfg.CAFile = "", "", ""
	// client-go's default limit (5 requests a second, bursts of 10) is
	// shared by every wait on one client: sixteen nodes' readiness waits
	// at bring-up starved one another past their deadline. The API server
	// is the run's own, on loopback, serving the harness alone.
	cfg.QPS, cfg.Burst = harnessQPS, 2*harnessQPS
	p.restCfg = cfg
	return rest.CopyConfig(cfg), nil
}

// IsUp implements clusters.Provider.
func (p *Provider) IsUp(ctx context.Context) (bool, error) {
	cs, err := p.client()
	if err != nil {
		return false, nil
	}
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return false, nil
	}
	return true, nil
}

// TestNodes implements clusters.Provider: every node, in node order.
func (p *Provider) TestNodes(context.Context) ([]nodes.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.nodes) == 0 {
		return nil, fmt.Errorf("local provider: no node (Up has not completed)")
	}
	return nodes.List(p.nodes), nil
}

// Binaries are the binaries this cluster runs (control plane, runtime),
// for the report; the kubelets are reported by the scenario.
func (p *Provider) Binaries() []binaries.Binary {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]binaries.Binary(nil), p.binaries...)
}

// DumpClusterLogs implements clusters.Provider: copies every component log
// (one file per kubelet run) into dir. In the CSI driver's EBS mode it
// first waits (bounded) for the volumes no pod uses to be detached, so the
// logs show their detach.
func (p *Provider) DumpClusterLogs(ctx context.Context, dir string) error {
	if p.csiMode == csidriver.ModeEBS {
		// So that the logs show the workload's volumes detached.
		p.awaitDetach(ctx)
	}
	src := p.path("logs")
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("dump local cluster logs from %s: %w", src, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (p *Provider) client() (kubernetes.Interface, error) {
	p.mu.Lock()
	cs := p.clientset
	p.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	cfg, err := p.RESTConfig()
	if err != nil {
		return nil, err
	}
	cs, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.clientset = cs
	p.mu.Unlock()
	return cs, nil
}

func (p *Provider) resources() (*resources.Resources, error) {
	cfg, err := p.RESTConfig()
	if err != nil {
		return nil, err
	}
	return resources.New(cfg)
}

// timeout is d scaled by timeouts.FactorEnv.
func (p *Provider) timeout(d time.Duration) time.Duration { return timeouts.Scale(d, p.slow) }
