// Package existing is the provider that attaches to a cluster someone else
// runs: it talks to the API server through a kubeconfig and reaches the
// nodes it disrupts over SSH, driving their kubelet through systemd. It
// never creates or deletes the cluster; Down only closes connections.
package existing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/version"
	apiversion "k8s.io/apimachinery/pkg/version"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/internal/sshnode"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/clusters/timeouts"
	"sigs.k8s.io/skewtest/reports"
)

// providerName is the provider's name.
const providerName = "existing"

var (
	_ capabilities.WithRunDir         = &provider{}
	_ capabilities.WithSharedCluster  = &provider{}
	_ capabilities.WithWorkloadRecord = &provider{}
	_ capabilities.WithStorageClass   = &provider{}
	_ capabilities.WithWorkloadImage  = &provider{}
)

// Defaults.
const (
	defaultKubeletRootDir = "/var/lib/kubelet"
	defaultKubeletUnit    = "kubelet"
	defaultKubeletBinary  = "/usr/bin/kubelet"
	defaultSSHPort        = sshnode.DefaultPort
	defaultSSHTimeout     = sshnode.DefaultTimeout
)

// apiTimeout bounds one request to the API server when ctx has no sooner
// deadline.
const apiTimeout = 30 * time.Second

// Labels and taints that mark a control-plane node, which is never a test
// node unless named in Config.Nodes.
var controlPlaneKeys = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// Config says which cluster to attach to and how to reach its nodes.
type Config struct {
	// Kubeconfig is the kubeconfig file's path; required.
	Kubeconfig string
	// Context is the kubeconfig context to use; empty means its current
	// context.
	Context string
	// Nodes are the names of the nodes to test. Empty means every node
	// without the control-plane (or master) role label or taint.
	Nodes []string
	SSH   SSHConfig
	// KubeletRootDir is the kubelet's --root-dir; default /var/lib/kubelet.
	KubeletRootDir string
	// KubeletUnit is the kubelet's systemd unit; default "kubelet".
	KubeletUnit string
	// KubeletBinary is the path the unit runs, which SwapKubelet replaces;
	// default /usr/bin/kubelet.
	KubeletBinary string
	// KubeletHealthzURL is the kubelet's health endpoint as the node
	// reaches it, polled after each start; default
	// systemdkubelet.DefaultHealthzURL (the kubelet's own default). A
	// node whose kubelet sets healthzPort or healthzBindAddress names it.
	KubeletHealthzURL string
	// StorageClass provisions the workload's volumes on the test nodes
	// (STORAGE_CLASS); required.
	StorageClass string
	// Image is the workload's image (IMAGE); default storage.StockImage.
	Image string
	// RunID names the run in the state.
	RunID string
	// StateDir is where the run records each node's own kubelet before it
	// first changes the node (StateFile), for Down and `skewtest clean`.
	// Empty keeps the record in memory only: Down still restores, but a
	// killed run cannot be cleaned.
	StateDir string
	// TimeoutFactor stretches the waits for a kubelet and a node
	// (registry.Options); 0 counts as 1.
	TimeoutFactor time.Duration
	Logger        *slog.Logger
}

// SSHConfig is how nodes are reached.
type SSHConfig struct {
	// User to log in as; default the current user. When it is not root,
	// commands run under sudo -n, which must not ask for a password.
	User string
	// Port is sshd's port, for addresses without one; default 22.
	Port int
	// KeyFile is an unencrypted private key. Empty means the keys of the
	// ssh-agent at $SSH_AUTH_SOCK.
	KeyFile string
	// KnownHostsFile holds the nodes' host keys; default
	// ~/.ssh/known_hosts. Host keys are always checked: add a node's with
	// ssh-keyscan -p PORT HOST >> FILE, after verifying it.
	KnownHostsFile string
	// Address maps a node name to host or host:port. nil, or an empty
	// result, means the node's InternalIP from the API server.
	Address func(nodeName string) string
	// Timeout bounds dialling and the SSH handshake; default 10s.
	Timeout time.Duration
}

// provider attaches to an existing cluster. It implements clusters.Provider.
type provider struct {
	cfg Config
	// context is the kubeconfig context the run's clients use:
	// Config.Context, or the current one when New ran.
	context string
	log     *slog.Logger
	dialer  *sshnode.Dialer

	// stateMu guards state, which records the nodes the run changed.
	stateMu sync.Mutex
	state   *State

	// slow multiplies the waits for a kubelet and a node
	// (timeouts.FactorEnv): a node in an emulated guest starts its
	// kubelet 10-18 times slower. 0 counts as 1.
	slow time.Duration

	// started is when the run made the provider: the nodes' journals
	// before it are their owner's (logs.go).
	started time.Time
	// maxLog caps each node's kubelet log among the artifacts
	// (reports.MaxLogBytes; smaller in tests).
	maxLog int64
	// restoreFacts say, per node, what the restore did to its kubelet's
	// checkpoint files, for the report (restore.go).
	factsMu      sync.Mutex
	restoreFacts []reports.KeyValue

	mu     sync.Mutex
	rest   *rest.Config
	core   corev1client.CoreV1Interface
	nodes  []*Node          // test nodes, once resolved
	byName map[string]*Node // every Node made, so connections are reused
}

// newProvider validates cfg, fills in defaults and loads the SSH
// credentials and known_hosts. It does not contact the cluster; Up does.
func newProvider(cfg Config) (*provider, error) {
	if cfg.Kubeconfig == "" {
		return nil, errors.New("existing: Config.Kubeconfig is required")
	}
	abs, err := filepath.Abs(cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("existing: kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	cfg.Kubeconfig = abs
	raw, err := clientcmd.LoadFromFile(cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("existing: kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	if cfg.Context != "" {
		if _, ok := raw.Contexts[cfg.Context]; !ok {
			var names []string
			for n := range raw.Contexts {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("existing: kubeconfig %s has no context %q (it has: %s)", cfg.Kubeconfig, cfg.Context, strings.Join(names, ", "))
		}
	} else if raw.CurrentContext == "" {
		return nil, fmt.Errorf("existing: kubeconfig %s has no current-context; set Config.Context", cfg.Kubeconfig)
	}

	if cfg.KubeletRootDir == "" {
		cfg.KubeletRootDir = defaultKubeletRootDir
	}
	if cfg.KubeletUnit == "" {
		cfg.KubeletUnit = defaultKubeletUnit
	}
	if cfg.KubeletBinary == "" {
		cfg.KubeletBinary = defaultKubeletBinary
	}
	if err := cfg.layout().Validate(); err != nil {
		return nil, fmt.Errorf("existing: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}

	factor := max(cfg.TimeoutFactor, 1)
	d, err := newDialer(&cfg.SSH, cfg.Logger)
	if err != nil {
		return nil, err
	}
	// The run's own clients stay on the context it started with, and its
	// state names that cluster, whatever the kubeconfig's current context
	// becomes.
	id, err := clusterIdentity(cfg.Kubeconfig, cfg.Context)
	if err != nil {
		return nil, fmt.Errorf("existing: %w", err)
	}
	st := &State{RunID: cfg.RunID, Kubeconfig: cfg.Kubeconfig, Context: cfg.Context, Cluster: id, SSH: stateSSH{
		User: cfg.SSH.User, Port: cfg.SSH.Port, KeyFile: cfg.SSH.KeyFile, KnownHostsFile: cfg.SSH.KnownHostsFile,
	}}
	return &provider{cfg: cfg, context: id.Context, log: cfg.Logger, dialer: d, byName: map[string]*Node{}, state: st, slow: factor, started: time.Now(), maxLog: reports.MaxLogBytes}, nil
}

// layout is where every test node keeps its kubelet.
func (c *Config) layout() systemdkubelet.Layout {
	return systemdkubelet.Layout{Unit: c.KubeletUnit, Binary: c.KubeletBinary, RootDir: c.KubeletRootDir, HealthzURL: c.KubeletHealthzURL}
}

// RunDir is Config.StateDir: `skewtest clean` given it puts back the
// kubelets of a run that was killed or kept after a failure.
func (p *provider) RunDir() string { return p.cfg.StateDir }

// newDialer fills in s's defaults and loads its key and known_hosts
// (sshnode.NewDialer).
func newDialer(s *SSHConfig, log *slog.Logger) (*sshnode.Dialer, error) {
	c := sshnode.Config{User: s.User, Port: s.Port, KeyFile: s.KeyFile, KnownHostsFile: s.KnownHostsFile, Timeout: s.Timeout,
		DialHint: "set SSH.Address or SSH.Port otherwise (SSH_ADDRESSES=NODE=HOST:PORT)"}
	d, err := sshnode.NewDialer(&c, log)
	if err != nil {
		return nil, fmt.Errorf("existing: %w", err)
	}
	s.User, s.Port, s.KnownHostsFile, s.Timeout = c.User, c.Port, c.KnownHostsFile, c.Timeout
	return d, nil
}

// Name implements clusters.Provider.
func (p *provider) Name() string { return providerName }

// KubeconfigPath is Config.Kubeconfig (absolute). With Config.Context set,
// kubectl needs --context too.
func (p *provider) KubeconfigPath() string { return p.cfg.Kubeconfig }

// SharedCluster names the cluster the run borrows: the kubeconfig's API
// server, or the kubeconfig when it cannot be read.
func (p *provider) SharedCluster() string {
	if rc, _, err := p.clients(); err == nil {
		return rc.Host
	}
	return p.cfg.Kubeconfig
}

// RESTConfig is the kubeconfig's client config for Config.Context.
func (p *provider) RESTConfig() (*rest.Config, error) {
	rc, _, err := p.clients()
	if err != nil {
		return nil, err
	}
	return rest.CopyConfig(rc), nil
}

// clients loads the kubeconfig once.
func (p *provider) clients() (*rest.Config, corev1client.CoreV1Interface, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rest != nil {
		return p.rest, p.core, nil
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: p.cfg.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: p.context},
	).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("existing: kubeconfig %s: %w", p.cfg.Kubeconfig, err)
	}
	rc.UserAgent = "skewtest"
	core, err := corev1client.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("existing: kubeconfig %s: %w", p.cfg.Kubeconfig, err)
	}
	p.rest, p.core = rc, core
	return rc, core, nil
}

// apiError says which API server failed and why.
func (p *provider) apiError(host string, err error) error {
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return fmt.Errorf("API server %s from kubeconfig %s rejected the credentials: %w", host, p.cfg.Kubeconfig, err)
	}
	return fmt.Errorf("API server %s from kubeconfig %s unreachable: %w", host, p.cfg.Kubeconfig, err)
}

// ServerVersion asks the API server for its version.
func (p *provider) ServerVersion(ctx context.Context) (*version.Version, error) {
	rc, core, err := p.clients()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	body, err := core.RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, p.apiError(rc.Host, err)
	}
	var info apiversion.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("API server %s: parse /version: %w", rc.Host, err)
	}
	v, err := version.ParseSemantic(info.GitVersion)
	if err != nil {
		if v, err = version.ParseGeneric(info.GitVersion); err != nil {
			return nil, fmt.Errorf("API server %s: version %q: %w", rc.Host, info.GitVersion, err)
		}
	}
	return v, nil
}

// IsUp reports whether the API server answers /version. An unreachable or
// refusing server is (false, nil); an unusable kubeconfig is an error.
func (p *provider) IsUp(ctx context.Context) (bool, error) {
	if _, _, err := p.clients(); err != nil {
		return false, err
	}
	if _, err := p.ServerVersion(ctx); err != nil {
		p.log.Debug("API server not up", "err", err)
		return false, nil
	}
	return true, nil
}

// Up attaches: it checks that the API server answers, that the test nodes
// exist and are Ready, and that each is reachable over SSH (running true,
// under sudo -n for a non-root user). Errors name what failed and the fix;
// every node is checked before Up returns.
func (p *provider) Up(ctx context.Context) error {
	v, err := p.ServerVersion(ctx)
	if err != nil {
		return err
	}
	p.log.Info("attached to cluster", "kubeconfig", p.cfg.Kubeconfig, "context", p.context, "version", v.String())
	if err := p.initState(); err != nil {
		return err
	}
	ns, err := p.resolve(ctx, true)
	if err != nil {
		return err
	}
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() { errs[i] = n.checkReachable(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("existing: %w", err)
	}
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = n.String() + "@" + n.Address()
	}
	p.log.Info("test nodes reachable over SSH", "nodes", names)
	return nil
}

// Down puts back the own kubelet of every node the run changed (stopped
// or swapped), after a pass, a failure or an interrupt alike, waits until
// each is Ready through the API server at its own kubelet's version,
// removes the state directory once all are, and closes the SSH
// connections. The cluster itself is left as it is (the run removes the
// workload a failed scenario left: capabilities.WithSharedCluster). A node that cannot be
// restored is an error naming it and the state directory to clean.
func (p *provider) Down(ctx context.Context) error {
	errs := []error{p.restoreAll(ctx)}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.byName {
		if err := n.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close ssh to %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// TestNodes returns the nodes to test, resolved once through the API server.
func (p *provider) TestNodes(ctx context.Context) ([]nodes.Node, error) {
	ns, err := p.resolve(ctx, false)
	if err != nil {
		return nil, err
	}
	return nodes.List(ns), nil
}

// Node returns the Node for name reached at address (host or host:port),
// without asking the API server; TestNodes hands out the same Node for the
// same name.
func (p *provider) Node(name, address string) *Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodeLocked(name, address)
}

func (p *provider) nodeLocked(name, address string) *Node {
	addr := p.dialer.HostPort(address)
	if n, ok := p.byName[name]; ok && n.Address() == addr {
		return n
	}
	n := &Node{Node: sshnode.New(p.dialer, name, addr), p: p, log: p.log}
	n.driver = &systemdkubelet.Driver{Node: n, Layout: p.cfg.layout(), Log: p.log,
		Timeout: timeouts.Scale(systemdkubelet.DefaultTimeout, p.slow)}
	if old, ok := p.byName[name]; ok {
		old.Close()
	}
	p.byName[name] = n
	return n
}

// resolve finds the test nodes through the API server, once; checkReady
// also requires them to be Ready (checked on every call).
func (p *provider) resolve(ctx context.Context, checkReady bool) ([]*Node, error) {
	rc, core, err := p.clients()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	cached := p.nodes
	p.mu.Unlock()
	if cached != nil && !checkReady {
		return cached, nil
	}
	lctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := core.Nodes().List(lctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("existing: list nodes: %w", p.apiError(rc.Host, err))
	}
	selected, err := selectNodes(list.Items, p.cfg.Nodes)
	if err != nil {
		return nil, fmt.Errorf("existing: %w", err)
	}
	var errs []error
	if checkReady {
		for _, n := range selected {
			if err := nodeReady(&n); err != nil {
				errs = append(errs, err)
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*Node, 0, len(selected))
	for _, n := range selected {
		addr := ""
		if p.cfg.SSH.Address != nil {
			addr = p.cfg.SSH.Address(n.Name)
		}
		if addr == "" {
			addr = internalIP(&n)
		}
		if addr == "" {
			errs = append(errs, fmt.Errorf("node %s has no InternalIP address; set SSH.Address for it", n.Name))
			continue
		}
		node := p.nodeLocked(n.Name, addr)
		node.kubeletVersion = n.Status.NodeInfo.KubeletVersion
		out = append(out, node)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("existing: %w", err)
	}
	p.nodes = out
	return out, nil
}

// selectNodes picks the named nodes, or every node that is not a control
// plane, sorted by name.
func selectNodes(all []corev1.Node, names []string) ([]corev1.Node, error) {
	var out []corev1.Node
	if len(names) == 0 {
		for _, n := range all {
			if !isControlPlane(&n) {
				out = append(out, n)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no worker nodes: all %d nodes have a control-plane role label or taint; name the nodes to test in Config.Nodes", len(all))
		}
	} else {
		byName := map[string]corev1.Node{}
		var known []string
		for _, n := range all {
			byName[n.Name] = n
			known = append(known, n.Name)
		}
		sort.Strings(known)
		var missing []string
		for _, name := range names {
			n, ok := byName[name]
			if !ok {
				missing = append(missing, name)
				continue
			}
			if !slices.ContainsFunc(out, func(o corev1.Node) bool { return o.Name == name }) {
				out = append(out, n)
			}
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("nodes %s not in the cluster (it has: %s)", strings.Join(missing, ", "), strings.Join(known, ", "))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func isControlPlane(n *corev1.Node) bool {
	for _, k := range controlPlaneKeys {
		if _, ok := n.Labels[k]; ok {
			return true
		}
		for _, t := range n.Spec.Taints {
			if t.Key == k {
				return true
			}
		}
	}
	return false
}

func nodeReady(n *corev1.Node) error {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s is not Ready (%s: %s); fix it or leave it out of Config.Nodes", n.Name, c.Reason, c.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition; fix it or leave it out of Config.Nodes", n.Name)
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "" {
			return a.Address
		}
	}
	return ""
}

// StorageClass implements capabilities.WithStorageClass: STORAGE_CLASS,
// the owner's class the workload's claims name.
func (p *provider) StorageClass() string { return p.cfg.StorageClass }

// WorkloadImage implements capabilities.WithWorkloadImage: IMAGE, or
// storage.StockImage.
func (p *provider) WorkloadImage() string {
	if p.cfg.Image == "" {
		return storage.StockImage
	}
	return p.cfg.Image
}
