// Package kops is the provider that makes a kops cluster on AWS, as the
// manual sign-off of KEP-3756 ran: one control plane and one worker, the
// EBS CSI driver kops installs by default, and the kubelet swapped on the
// worker over SSH through the shared systemd kubelet driver. It drives the
// kops CLI as kops's own kubetest2 deployer does (one file per verb:
// up.go, down.go, dumplogs.go), calls AWS with aws-sdk-go-v2 (state store
// bucket, instances, EBS evidence, the sweep and the janitor) and tags
// everything it makes with the run's ID, owner and expiry so that nothing
// stays on the bill.
//
// Tested here against fakes only (an in-process S3, in-memory EC2 and
// ELB, and a fake kops executable) and, for the node side, a qemu guest
// laid out as a kops node; never against AWS.
package kops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/clusters/internal/statefile"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
)

// providerName is the provider's name.
const providerName = "kops"

// RunDirPrefix names a kops run's directory, kops-<run-id>, beside the
// other providers' run directories.
const RunDirPrefix = "kops-"

var (
	_ capabilities.WithRunDir          = &provider{}
	_ capabilities.WithTeardownTimeout = &provider{}
	_ capabilities.WithRunFacts        = &provider{}
	_ capabilities.WithCSIDriver       = &provider{}
	_ capabilities.WithStorageClass    = &provider{}
	_ capabilities.WithWorkloadImage   = &provider{}
)

// provider is one run's kops cluster. It implements clusters.Provider.
type provider struct {
	cfg     Config
	log     *slog.Logger
	clients *awsClients
	tags    map[string]string

	// kube makes the API client from the run's kubeconfig; tests
	// replace it.
	kube func(*rest.Config) (kubeAPI, error)
	// validateRetry is the pause between kops validate calls that
	// exited 2 (not valid yet).
	validateRetry time.Duration
	// settleTimeout bounds the wait for EBS attachments to settle.
	settleTimeout time.Duration
	// checkIPURL answers this machine's public address, for
	// --admin-access when KOPS_ADMIN_ACCESS is unset.
	checkIPURL string

	mu       sync.Mutex
	state    State
	cli      *cli
	cmds     commandLog
	node     *Node
	dumped   bool
	facts    []reports.KeyValue
	sweep    []resource
	evidence []ebsState
	started  time.Time
}

// State is what the run records in RunDir/state.json before it makes each
// thing, so that Down after any failure, and `skewtest clean` after a
// killed run, find everything.
type State struct {
	RunID string `json:"runID"`
	// Owner is the process acting on the run (the run, or a clean of it):
	// while it lives, clean leaves the run alone. kops runs take no host
	// lock, since they change nothing on this host.
	Owner   procfs.Owner      `json:"owner,omitzero"`
	Cluster string            `json:"cluster"`
	Region  string            `json:"region"`
	Tags    map[string]string `json:"tags"`
	// StateStore is the kops state store used; Bucket is set when the
	// run made that bucket itself (and so deletes it).
	StateStore string `json:"stateStore"`
	Bucket     string `json:"bucket,omitempty"`
	// Created says kops create cluster was started.
	Created bool   `json:"created,omitempty"`
	Kops    string `json:"kops,omitempty"`
	SSHKey  string `json:"sshKey,omitempty"`
	// ClusterUp is when the cluster validated; Instances are its
	// instance types, for the cost estimate.
	ClusterUp time.Time `json:"clusterUp,omitzero"`
	Instances []string  `json:"instances,omitempty"`
}

// stateFile is the state's file name in the run directory.
const stateFile = "state.json"

// defaultValidateRetry is the pause between validate calls that said "not
// valid yet", after kubetest2-kops's 10s settle sleep.
const defaultValidateRetry = 10 * time.Second

// defaultCheckIPURL answers the caller's public IPv4 address.
const defaultCheckIPURL = "https://checkip.amazonaws.com"

// newProvider fills in cfg's defaults. Nothing is checked against AWS or created
// until Up (Validate checks the settings; its Descriptor.Check calls it).
func newProvider(cfg Config) (*provider, error) {
	cfg.defaults()
	if cfg.RunID == "" {
		return nil, errors.New("kops: Config.RunID is required")
	}
	if cfg.RunDir == "" {
		return nil, errors.New("kops: Config.RunDir is required")
	}
	p := &provider{cfg: cfg, log: cfg.Logger, kube: func(rc *rest.Config) (kubeAPI, error) {
		return kubernetes.NewForConfig(rc)
	}, validateRetry: defaultValidateRetry, settleTimeout: ebsSettleTimeout, checkIPURL: defaultCheckIPURL}
	p.state = State{RunID: cfg.RunID, Cluster: cfg.ClusterName(), Region: cfg.Region, StateStore: cfg.StateStore}
	return p, nil
}

// Name implements clusters.Provider.
func (p *provider) Name() string { return providerName }

// RunDir holds the run's state, kubeconfig and keypair; `skewtest clean`
// given it deletes a kept or abandoned cluster.
func (p *provider) RunDir() string { return p.cfg.RunDir }

// TeardownTimeout is kops delete cluster's wait plus the sweep: minutes,
// not the seconds local clusters need.
func (p *provider) TeardownTimeout() time.Duration { return p.cfg.DeleteTimeout + sweepTimeout }

// defaultTeardownTimeout is TeardownTimeout with the default delete
// timeout: what a suite must leave a kops run to tear down after an
// interrupt.
const defaultTeardownTimeout = defaultDeleteTimeout + sweepTimeout

// CSIDriver names the driver kops installs, for the report.
func (p *provider) CSIDriver() string {
	return "aws-ebs-csi-driver (" + ebsDriver + ", installed by kops; StorageClass " + defaultStorageClass + ")"
}

// KubeconfigPath is the admin kubeconfig kops update cluster --admin
// wrote for the run.
func (p *provider) KubeconfigPath() string { return filepath.Join(p.cfg.RunDir, "kubeconfig") }

// RESTConfig is the admin kubeconfig's client config.
func (p *provider) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", p.KubeconfigPath())
}

// kubeAPI is what the provider reads from the API server: the nodes and
// PVs of core/v1, and the server's version. Every kubernetes.Interface is
// one; tests use clusters/internal/kubefake.
type kubeAPI interface {
	CoreV1() corev1client.CoreV1Interface
	Discovery() discovery.DiscoveryInterfaces
}

func (p *provider) kubeClient() (kubeAPI, error) {
	rc, err := p.RESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kops: kubeconfig %s: %w", p.KubeconfigPath(), err)
	}
	return p.kube(rc)
}

// IsUp reports whether the API server answers.
func (p *provider) IsUp(ctx context.Context) (bool, error) {
	cs, err := p.kubeClient()
	if err != nil {
		return false, nil
	}
	if _, err := cs.Discovery().ServerVersionWithContext(ctx); err != nil {
		return false, nil
	}
	return true, nil
}

// TestNodes is the one worker, found by Up.
func (p *provider) TestNodes(context.Context) ([]nodes.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.node == nil {
		return nil, errors.New("kops: no worker found (Up did not finish)")
	}
	return []nodes.Node{p.node}, nil
}

// updateState changes the state and writes it before the caller makes
// what the change describes.
func (p *provider) updateState(f func(*State)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.state)
	return writeState(p.cfg.RunDir, &p.state)
}

func writeState(dir string, s *State) error {
	if err := statefile.Write(dir, stateFile, s, 0o600); err != nil {
		return fmt.Errorf("kops: write the run's state: %w", err)
	}
	return nil
}

// readState reads a run directory's state.
func readState(dir string) (*State, error) {
	var s State
	if err := statefile.Read(dir, stateFile, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

func (p *provider) snapshot() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// StorageClass is the workload's PVCs' class: STORAGE_CLASS, or kops's
// default EBS CSI StorageClass.
func (p *provider) StorageClass() string {
	if p.cfg.StorageClass == "" {
		return defaultStorageClass
	}
	return p.cfg.StorageClass
}

// WorkloadImage is IMAGE, or storage.StockImage.
func (p *provider) WorkloadImage() string {
	if p.cfg.Image == "" {
		return storage.StockImage
	}
	return p.cfg.Image
}
