// Package kind is the provider that runs the scenario on a kind cluster
// (sigs.k8s.io/kind as a library): one control plane, tainted, and one
// worker per initial kubelet (test node), where the StatefulSets' pods
// land. It works offline: the node image is built locally
// (internal/nodeimage), skewtest's CSI node plugin runs as a DaemonSet
// from a locally built image, and on hosts whose capability bounding set
// lacks CAP_SYS_RESOURCE a private dockerd with a runtime shim
// (internal/capshim, internal/dockerd) lets kind's privileged node
// containers start.
package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	kindlog "sigs.k8s.io/kind/pkg/log"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
	"sigs.k8s.io/skewtest/clusters/kind/internal/dockerd"
	"sigs.k8s.io/skewtest/clusters/kind/internal/nodeimage"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/registry"
	"sigs.k8s.io/skewtest/clusters/timeouts"
)

// The optional capabilities the kind provider has.
var (
	_ capabilities.WithBinaries    = &Provider{}
	_ capabilities.WithRunDir      = &Provider{}
	_ capabilities.WithCSIDriver   = &Provider{}
	_ capabilities.WithPrefetch    = &Provider{}
	_ capabilities.WithVolumes     = &Provider{}
	_ capabilities.WithWorkload    = &Provider{}
	_ capabilities.WithOwnWorkload = &Provider{}
)

// Config configures a kind cluster.
type Config struct {
	RunID    string
	RunRoot  string
	CacheDir string
	// APIServerVersion is the node image's Kubernetes version: APISERVER,
	// or the plan's newest.
	APIServerVersion *version.Version
	// Kubelets are the workers' first kubelets, one worker each, in
	// order (a sign-off run has one, the plan's first; a matrix tour or a
	// batch one per node), at most MaxWorkers.
	Kubelets []binaries.Binary
	// NodeImage chooses the node image (see chooseNodeImage): empty for
	// the default, "offline" for the locally built image, "upstream" for
	// kindest/node at the API server's version, or any image reference.
	NodeImage string
	// CSI chooses the CSI driver (see chooseCSI): empty for the default,
	// CSISkewtest or CSIHostpath.
	CSI string
	// TimeoutFactor stretches the provider's waits (registry.Options); 0
	// counts as 1.
	TimeoutFactor time.Duration
	Logger        *slog.Logger
}

// UpstreamNodeImage is the node image the kind release in go.mod uses by
// default, pinned by digest.
const UpstreamNodeImage = binaries.UpstreamKindNodeImage

// chooseNodeImage picks the node image for Kubernetes version v. By
// default a normal Docker host pulls kindest/node at v (pinned by digest
// when it is the version kind's release pins), while a host that needs the
// private dockerd (no CAP_SYS_RESOURCE: our VMs, which have no registry
// either) builds the offline image. offline reports that choice.
func chooseNodeImage(setting string, privateDocker bool, v *version.Version) (ref string, offline bool) {
	upstream := binaries.KindNodeImage(v)
	switch setting {
	case "offline":
		return "", true
	case "upstream":
		return upstream, false
	case "":
		if privateDocker {
			return "", true
		}
		return upstream, false
	}
	return setting, false
}

// Provider is a kind cluster.
type Provider struct {
	cfg    Config
	name   string
	dir    string
	logger *slog.Logger

	mu      sync.Mutex
	docker  *dockerd.Daemon
	oldHost *string
	kind    *kindcluster.Provider
	// workers are the test nodes, in the order of cfg.Kubelets.
	workers  []*Node
	created  bool
	restCfg  *rest.Config
	binaries []binaries.Binary
	// csi is the CSI driver chosen in Up.
	csi string
}

// New validates cfg; nothing is created until Up.
func New(cfg Config) (*Provider, error) {
	if cfg.RunID == "" || cfg.APIServerVersion == nil || len(cfg.Kubelets) == 0 {
		return nil, fmt.Errorf("kind provider: run ID, API server version and initial kubelets are required")
	}
	for i, k := range cfg.Kubelets {
		if k.Path == "" {
			return nil, fmt.Errorf("kind provider: initial kubelet %d of %d has no path", i+1, len(cfg.Kubelets))
		}
	}
	if len(cfg.Kubelets) > MaxWorkers {
		return nil, fmt.Errorf("kind provider: %d workers asked for, at most %d", len(cfg.Kubelets), MaxWorkers)
	}
	if err := CheckCSI(cfg.CSI); err != nil {
		return nil, err
	}
	if err := checkCSIWorkers(cfg.CSI, len(cfg.Kubelets)); err != nil {
		return nil, err
	}
	cfg.RunRoot = registry.HostRunRoot(cfg.RunRoot)
	if cfg.CacheDir == "" {
		cfg.CacheDir = binaries.DefaultCacheDir()
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Provider{cfg: cfg, name: clusterName(cfg.RunID), dir: filepath.Join(cfg.RunRoot, RunDirPrefix+cfg.RunID), logger: logger}, nil
}

// Name implements clusters.Provider.
func (p *Provider) Name() string { return "kind" }

// KubeconfigPath implements clusters.Provider.
func (p *Provider) KubeconfigPath() string { return filepath.Join(p.dir, "kubeconfig") }

// RESTConfig implements clusters.Provider.
func (p *Provider) RESTConfig() (*rest.Config, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.restCfg == nil {
		cfg, err := clientcmd.BuildConfigFromFlags("", p.KubeconfigPath())
		if err != nil {
			return nil, fmt.Errorf("kind provider: load %s (is the cluster up?): %w", p.KubeconfigPath(), err)
		}
		p.restCfg = cfg
	}
	return rest.CopyConfig(p.restCfg), nil
}

// IsUp implements clusters.Provider.
func (p *Provider) IsUp(ctx context.Context) (bool, error) {
	p.mu.Lock()
	kp, created := p.kind, p.created
	p.mu.Unlock()
	if kp == nil || !created {
		return false, nil
	}
	names, err := kp.List()
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if n == p.name {
			return true, nil
		}
	}
	return false, nil
}

// TestNodes implements clusters.Provider: the workers, in the order of
// the initial kubelets.
func (p *Provider) TestNodes(context.Context) ([]nodes.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.workers) == 0 {
		return nil, fmt.Errorf("kind provider: no worker (Up has not completed)")
	}
	return nodes.List(p.workers), nil
}

// Binaries implements the report's list of what the cluster runs.
func (p *Provider) Binaries() []binaries.Binary {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]binaries.Binary(nil), p.binaries...)
}

// Up implements clusters.Provider.
func (p *Provider) Up(ctx context.Context) (err error) {
	// The images loaded beside the cluster's creation (preloadImages): a
	// failed bring-up stops and waits for them before Down removes the
	// run's directory and the cluster.
	var pending <-chan error
	preloadCtx, cancelPreload := context.WithCancel(ctx)
	defer cancelPreload()
	defer func() {
		if pending != nil {
			cancelPreload()
			<-pending
		}
		if err != nil {
			// Bounded, as Finish's teardown is: nothing waits forever.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.scaled(timeouts.Teardown))
			defer cancel()
			if derr := p.Down(dctx); derr != nil {
				err = errors.Join(err, fmt.Errorf("teardown after failed bring-up: %w", derr))
			}
		}
	}()
	ph := newPhases()
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	private, needShim, err := dockerChoice(ctx)
	if err != nil {
		return err
	}
	image, img, err := p.chooseImage(ctx, private)
	if err != nil {
		return err
	}
	ph.done("nodeImage")
	seed := ""
	if img != nil && private {
		if seed, err = seedDir(ctx, *img); err != nil {
			return err
		}
	}
	if private {
		if err := p.startDocker(ctx, needShim, seed); err != nil {
			return err
		}
	} else {
		p.logger.Info("using the host's Docker")
	}
	ph.done("docker")
	if img != nil {
		if err := p.importImage(ctx, *img, seed); err != nil {
			return err
		}
		ph.done("importImage")
	}
	p.mu.Lock()
	p.csi = chooseCSI(p.cfg.CSI, img != nil, len(p.cfg.Kubelets))
	p.mu.Unlock()
	kp := kindcluster.NewProvider(kindcluster.ProviderWithDocker(), kindcluster.ProviderWithLogger(&slogAdapter{p.logger}))
	p.mu.Lock()
	p.kind = kp
	p.mu.Unlock()
	pending = p.preloadImages(preloadCtx, kp)
	p.mu.Lock()
	hostDocker := p.docker == nil
	p.mu.Unlock()
	// Before the cluster exists: clean after a kill finds it by name.
	if err := writeState(p.dir, runState(p.cfg.RunID, p.name, hostDocker)); err != nil {
		return err
	}
	p.logger.Info("creating kind cluster", "name", p.name, "image", image)
	p.mu.Lock()
	p.created = true // from here on, Down deletes it
	p.mu.Unlock()
	if err := kp.Create(p.name,
		kindcluster.CreateWithV1Alpha4Config(clusterConfig(clusterSpec{cgroupV1: cgroupV1Host(), workers: len(p.cfg.Kubelets), version: p.cfg.APIServerVersion, kubeProxy: p.csiDriver() == CSIHostpath})),
		kindcluster.CreateWithNodeImage(image),
		// kind's own wait runs kubectl in the control plane node
		// without a pause between tries, taking CPU from the nodes it
		// waits for; Up waits through the API server instead
		// (nodesReady).
		kindcluster.CreateWithWaitForReady(0),
		kindcluster.CreateWithKubeconfigPath(p.KubeconfigPath()),
		kindcluster.CreateWithDisplayUsage(false),
		kindcluster.CreateWithDisplaySalutation(false),
	); err != nil {
		return fmt.Errorf("kind provider: create cluster %s: %w", p.name, err)
	}
	ph.done("create")
	if err := p.findWorkers(kp); err != nil {
		return err
	}
	err = <-pending
	pending = nil
	if err != nil {
		return err
	}
	ph.done("loadImages")
	// Before the CSI driver, so that it registers with the kubelets the
	// runs start with.
	if err := p.initialKubelets(ctx); err != nil {
		return err
	}
	ph.done("initialKubelets")
	if err := p.deployCSI(ctx); err != nil {
		return err
	}
	ph.done("csi")
	if err := p.nodesReady(ctx); err != nil {
		return err
	}
	ph.done("nodesReady")
	ph.log(p.logger, "kind cluster up", "name", p.name, "workers", len(p.cfg.Kubelets))
	return nil
}

// scaled is d scaled by the run's timeout factor.
func (p *Provider) scaled(d time.Duration) time.Duration {
	return timeouts.Scale(d, p.cfg.TimeoutFactor)
}

// DumpClusterLogs implements clusters.Provider with kind's own log
// collection.
func (p *Provider) DumpClusterLogs(_ context.Context, dir string) error {
	p.mu.Lock()
	kp, created := p.kind, p.created
	p.mu.Unlock()
	if kp == nil || !created {
		return fmt.Errorf("kind provider: no cluster")
	}
	return kp.CollectLogs(p.name, dir)
}

// Down implements clusters.Provider: deletes the cluster, stops the
// private dockerd (restoring iptables, links and kernel settings) or, on
// the host's Docker, restores the kernel settings the nodes changed, and
// removes the run directory. When any of that fails the run directory is kept, and the
// error names it, for a second Down or `skewtest clean`.
func (p *Provider) Down(ctx context.Context) error {
	var errs []error
	ph := newPhases()
	p.mu.Lock()
	kp, created, d, oldHost := p.kind, p.created, p.docker, p.oldHost
	p.created, p.docker, p.oldHost = false, nil, nil
	p.mu.Unlock()
	if kp != nil && created {
		if err := kp.Delete(p.name, p.KubeconfigPath()); err != nil {
			errs = append(errs, fmt.Errorf("delete kind cluster %s: %w", p.name, err))
			p.mu.Lock()
			p.created = true
			p.mu.Unlock()
		}
		ph.done("deleteCluster")
	}
	if d != nil {
		if err := stopDocker(ctx, d); err != nil {
			errs = append(errs, err)
			// A second Down tries again; the Daemon keeps its lock.
			p.mu.Lock()
			p.docker = d
			p.mu.Unlock()
		}
		ph.done("stopDocker")
	}
	if len(errs) == 0 {
		// The nodes are gone: on the host's Docker, their kernel settings
		// are the run's to put back (a private dockerd's teardown did).
		if s, err := readState(p.dir); err == nil {
			if err := restoreHostSettings(s, p.logger); err != nil {
				errs = append(errs, err)
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("kind provider: read the run's state: %w", err))
		}
	}
	if oldHost != nil {
		if *oldHost == "" {
			os.Unsetenv("DOCKER_HOST")
		} else {
			os.Setenv("DOCKER_HOST", *oldHost)
		}
	}
	if len(errs) > 0 {
		// The directory holds what is left to undo: the dockerd's state
		// (the host's iptables, links and kernel settings from before)
		// and the kubeconfig. Removing it would leave clean nothing.
		errs = append(errs, fmt.Errorf("kind provider: kept the run directory %s for `skewtest clean %s`", p.dir, p.dir))
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(p.dir); err != nil {
		return err
	}
	ph.done("removeRunDir")
	ph.log(p.logger, "kind cluster down", "name", p.name)
	return nil
}

// cgroupV1Host says whether this host's cgroups are not unified v2
// (hybrid or legacy), where kind's nodes need the v1 settings.
func cgroupV1Host() bool {
	m, err := cgroups.DetectMode()
	return err != nil || m != cgroups.Unified
}

// slogAdapter gives kind's logger interface a slog.Logger.
type slogAdapter struct{ l *slog.Logger }

func (s *slogAdapter) Warn(message string) { s.l.Warn(message, "component", "kind") }
func (s *slogAdapter) Warnf(format string, args ...interface{}) {
	s.l.Warn(fmt.Sprintf(format, args...), "component", "kind")
}
func (s *slogAdapter) Error(message string) { s.l.Error(message, "component", "kind") }
func (s *slogAdapter) Errorf(format string, args ...interface{}) {
	s.l.Error(fmt.Sprintf(format, args...), "component", "kind")
}
func (s *slogAdapter) V(level kindlog.Level) kindlog.InfoLogger {
	return &slogInfo{l: s.l, enabled: level <= 0}
}

type slogInfo struct {
	l       *slog.Logger
	enabled bool
}

func (i *slogInfo) Info(message string) {
	if i.enabled {
		i.l.Info(message, "component", "kind")
	}
}
func (i *slogInfo) Infof(format string, args ...interface{}) { i.Info(fmt.Sprintf(format, args...)) }
func (i *slogInfo) Enabled() bool                            { return i.enabled }

// RunDir is the directory holding this run's kind files and private
// dockerd.
func (p *Provider) RunDir() string { return p.dir }

// Clean removes what a kind run left when the harness was killed: its
// private dockerd (which takes the node containers with it, restoring
// iptables, links and kernel settings), or its cluster on the host's
// Docker and the kernel settings that cluster changed, and its directory.
func Clean(ctx context.Context, dir string) error {
	if err := cleanHostCluster(ctx, dir, filepath.Join(dir, "kubeconfig"), slog.Default()); err != nil {
		return fmt.Errorf("clean %s: %w", dir, err)
	}
	if err := dockerd.Clean(ctx, filepath.Join(dir, "docker")); err != nil {
		return fmt.Errorf("clean %s: %w", dir, err)
	}
	return os.RemoveAll(dir)
}

// BuildNodeImage builds (or finds in the cache) the offline node image of
// version v, for `make kind-node-image`.
func BuildNodeImage(ctx context.Context, v *version.Version, cacheDir string, logger *slog.Logger) (nodeimage.Image, error) {
	return nodeimage.Build(ctx, nodeimage.Config{Version: v, CacheDir: cacheDir, Logger: logger})
}
