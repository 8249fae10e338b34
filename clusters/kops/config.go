package kops

import (
	"fmt"
	"log/slog"
	"os/user"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
)

// layout is where kops's nodeup puts the kubelet on its default images
// (nodeup/pkg/model/kubelet.go): the binary, the unit's EnvironmentFile
// holding DAEMON_ARGS, and the KubeletConfiguration.
var layout = systemdkubelet.Layout{
	Unit:            "kubelet.service",
	Binary:          "/usr/local/bin/kubelet",
	EnvironmentFile: "/etc/sysconfig/kubelet",
	Config:          "/var/lib/kubelet/kubelet.conf",
	RootDir:         "/var/lib/kubelet",
}

// Defaults of Config.
const (
	// defaultNodeSize and DefaultControlPlaneSize are the instance types:
	// kubetest2-kops's control plane size, and the same for the one worker
	// (the EBS CSI node plugin and 3 pods fit in 2 vCPUs and 4 GiB).
	defaultNodeSize         = "c5.large"
	defaultControlPlaneSize = "c5.large"
	// defaultVolumeSize is each instance's root volume in GiB, as
	// kubetest2-kops.
	defaultVolumeSize = 48
	// defaultTTL is how long the run's resources may live before `make
	// janitor-aws` deletes them: a round takes about 30 minutes.
	defaultTTL = 6 * time.Hour
	// defaultValidateTimeout bounds `kops validate cluster --wait`, as
	// kubetest2-kops (20m).
	defaultValidateTimeout = 20 * time.Minute
	// defaultDeleteTimeout bounds `kops delete cluster` and the sweep after
	// it; kubetest2-kops waits up to 60m.
	defaultDeleteTimeout = 60 * time.Minute
	// defaultReleaseURL is where kops release binaries are published:
	// <url>/<version>/<os>/<arch>/kops and kops.sha256 beside it.
	defaultReleaseURL = "https://artifacts.k8s.io/binaries/kops"
)

// Config is the kops provider's settings (KOPS_*, AWS_REGION, SSH_KEY; see
// scenarios/skewrun/env.go). Nothing here is a secret: credentials come
// from the AWS SDK's default chain and stay in the SDK.
type Config struct {
	// RunID names the cluster (skewtest-<run-id>.k8s.local) and tags
	// every resource.
	RunID string
	// Kops is the kops binary (KOPS); empty: from KopsVersion, else PATH.
	Kops string
	// StorageClass is the workload's claims' class (STORAGE_CLASS);
	// empty: kops's default EBS CSI class.
	StorageClass string
	// Image is the workload's image (IMAGE); default storage.StockImage.
	Image string
	// KopsVersion (KOPS_VERSION), e.g. v1.34.0: download that release
	// into the cache and check its published sha256.
	KopsVersion string
	// ReleaseURL is the kops release mirror (KOPS_RELEASE_URL).
	ReleaseURL string
	// Kubectl is the kubectl used for the log dump; empty: from PATH (the
	// dump does without it and says so).
	Kubectl string
	// Region (AWS_REGION or AWS_DEFAULT_REGION) and Zones (KOPS_ZONES;
	// default the region's "a" zone).
	Region string
	Zones  []string
	// StateStore (KOPS_STATE_STORE), s3://bucket[/prefix]; empty: a
	// bucket made for the run, tagged, deleted at the end.
	StateStore string
	// SSHKey (SSH_KEY) is the private key whose SSHKey+".pub" kops
	// installs; empty: a keypair made for the run.
	SSHKey string
	// Owner (KOPS_OWNER, default the current user) and TTL (KOPS_TTL) go into the
	// tags: who to ask, and when the janitor may delete.
	Owner string
	TTL   time.Duration
	// AdminAccess (KOPS_ADMIN_ACCESS) is the CIDR allowed to reach the API
	// server and SSH; empty: this machine's public address as a /32.
	AdminAccess string
	// NodeSize and ControlPlaneSize (KOPS_NODE_SIZE,
	// KOPS_CONTROL_PLANE_SIZE) are instance types.
	NodeSize         string
	ControlPlaneSize string
	// CreateArgs (KOPS_CREATE_ARGS) are added to kops create cluster.
	CreateArgs []string
	// ValidateTimeout and DeleteTimeout bound validation and deletion.
	ValidateTimeout time.Duration
	DeleteTimeout   time.Duration
	// APIServerVersion is the cluster's Kubernetes version: APISERVER,
	// or the plan's newest.
	APIServerVersion *version.Version
	// Kubelet is the test node's first kubelet, swapped in after Up.
	Kubelet binaries.Binary
	// RunDir holds the run's files (kubeconfig, keypair, known_hosts);
	// ArtifactsDir receives the log dump when Down runs before
	// DumpClusterLogs did (a failed Up).
	RunDir       string
	ArtifactsDir string
	CacheDir     string
	// TimeoutFactor stretches the node's kubelet waits
	// (registry.Options); 0 counts as 1.
	TimeoutFactor time.Duration
	Logger        *slog.Logger
}

// ClusterName is the kops cluster's name: gossip DNS (.k8s.local), so no
// Route 53 zone is needed, and unique per run.
func (c *Config) ClusterName() string {
	return "skewtest-" + strings.ToLower(c.RunID) + ".k8s.local"
}

// Tag keys every resource of a run carries (through kops's --cloud-labels
// and the provider's own calls).
const (
	tagRunID  = "skewtest.k8s.io/run-id"
	tagOwner  = "skewtest.k8s.io/owner"
	tagExpiry = "skewtest.k8s.io/expiry"
	// tagCluster is kops's own tag on what it makes, and the EBS CSI
	// driver's on PVC volumes (--k8s-tag-cluster-id).
	tagCluster = "KubernetesCluster"
)

// Tags are the run's tags, expiring ttl after now.
func (c *Config) Tags(now time.Time) map[string]string {
	return map[string]string{tagRunID: c.RunID, tagOwner: c.Owner, tagExpiry: now.Add(c.ttl()).UTC().Format(time.RFC3339)}
}

func (c *Config) ttl() time.Duration {
	if c.TTL > 0 {
		return c.TTL
	}
	return defaultTTL
}

// cloudLabels is kops's --cloud-labels value for tags, sorted.
func cloudLabels(tags map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(tags) {
		parts = append(parts, k+"="+tags[k])
	}
	return strings.Join(parts, ",")
}

func (c *Config) defaults() {
	if c.NodeSize == "" {
		c.NodeSize = defaultNodeSize
	}
	if c.ControlPlaneSize == "" {
		c.ControlPlaneSize = defaultControlPlaneSize
	}
	if c.ValidateTimeout <= 0 {
		c.ValidateTimeout = defaultValidateTimeout
	}
	if c.DeleteTimeout <= 0 {
		c.DeleteTimeout = defaultDeleteTimeout
	}
	if c.ReleaseURL == "" {
		c.ReleaseURL = defaultReleaseURL
	}
	if c.TTL <= 0 {
		c.TTL = defaultTTL
	}
	if len(c.Zones) == 0 && c.Region != "" {
		c.Zones = []string{c.Region + "a"}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Owner == "" {
		if u, err := user.Current(); err == nil {
			c.Owner = u.Username
		}
	}
}

// stateStoreBucket splits s3://bucket/prefix.
func stateStoreBucket(store string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(store, "s3://")
	if !ok || rest == "" {
		return "", "", fmt.Errorf("KOPS_STATE_STORE=%q: want s3://BUCKET[/PREFIX]", store)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	return bucket, prefix, nil
}
