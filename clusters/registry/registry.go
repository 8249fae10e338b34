// Package registry says what a cluster provider is and how it describes
// itself to the rest of skewtest, after kubetest2, whose deployers each
// own and bind their own flags: the Provider interface (one cluster's
// lifecycle), the Options every provider shares, and the Descriptor each
// provider package exports as its one value for package clusters to list
// (its name, its run directories, its properties, its own settings, how it
// reads and checks them and how it makes a provider and cleans up after a
// killed run).
//
// The package is a leaf, as clusters/capabilities is: it imports no
// provider, so providers can import it although package clusters, which
// lists their descriptors, imports them.
package registry

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/rest"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/clusters/nodes"
)

// Provider is one cluster's lifecycle, after kubetest2's deployer (Up, Down,
// IsUp, DumpClusterLogs) and kind's cluster.Provider.
type Provider interface {
	// Name is the provider's name ("local", "existing", ...).
	Name() string
	// Up creates the cluster, or attaches to an existing one, and returns
	// when the API server answers and the nodes are Ready.
	Up(ctx context.Context) error
	// Down deletes everything Up made (processes, mounts, directories,
	// clusters); for an attached cluster it only releases connections. It
	// is safe to call after a failed or partial Up, and more than once.
	Down(ctx context.Context) error
	// IsUp reports whether the API server answers.
	IsUp(ctx context.Context) (bool, error)
	// RESTConfig is the admin client config; valid after Up.
	RESTConfig() (*rest.Config, error)
	// KubeconfigPath is a kubeconfig file a person can use with kubectl.
	KubeconfigPath() string
	// TestNodes are the nodes a scenario may disrupt (workers only).
	TestNodes(ctx context.Context) ([]nodes.Node, error)
	// DumpClusterLogs copies component logs into dir.
	DumpClusterLogs(ctx context.Context, dir string) error
}

// Options are what every provider is made with; each provider's own
// settings travel beside them, as the value its Descriptor.FromEnv reads.
// Fields a provider does not use are ignored.
type Options struct {
	RunID    string
	CacheDir string
	Logger   *slog.Logger
	// APIServerVersion and InitialKubelets are for providers that create
	// the cluster: the plan's newest version, and the kubelet each test
	// node starts with (one node per entry; a sign-off run has one, a
	// matrix tour one per trail). Descriptor.MaxTestNodes bounds the
	// nodes; a provider that attaches to a cluster ignores both.
	APIServerVersion *version.Version
	InitialKubelets  []binaries.Binary
	// RunRoot is the parent of run directories; empty for the provider's
	// default (Descriptor.RunRoot).
	RunRoot string
	// ArtifactsDir is the run's artifacts directory, where a provider
	// dumps logs when Down runs before DumpClusterLogs did.
	ArtifactsDir string
	// CSIMode is the mode of skewtest's own CSI driver (CSI_MODE): "tmpfs"
	// (the default when empty) or "ebs". It is shared rather than a
	// setting of each provider that runs the driver because the run
	// chooses it, not the provider: a catalogue shape that needs raw
	// block volumes picks ebs when CSI_MODE is unset, before the provider
	// is made, and every provider is checked against it
	// (Descriptor.CSIModes), so that CSI_MODE=ebs on a provider that does
	// not run that mode is refused rather than ignored.
	CSIMode string
	// TimeoutFactor stretches the provider's waits, as the scenario's
	// (SKEWTEST_TIMEOUT_FACTOR, read once with the run's settings); 0
	// counts as 1.
	TimeoutFactor time.Duration
}

// Setting is one environment variable a provider reads (several names
// joined by " / " when they go together), its default and what it means:
// a row of `skewtest settings` and docs/settings.md.
type Setting struct{ Name, Default, Help string }

// RunDir is what `skewtest clean` knows of a directory before it cleans
// it (Descriptor.Inspect).
type RunDir struct {
	Path string
	// NotARun says why Path is not a run's directory that Clean knows:
	// it has no state of its provider (by its name's prefix) that parses
	// and names the run. nil when it is one.
	NotARun error
	// Live is set when the run takes no host lock (an existing cluster's)
	// and the process acting on it still runs; Undecided when whether it
	// does cannot be told. Both say what was found.
	Live, Undecided string
}

// OwnedBy sets Live or Undecided from whether the process a run's state
// records (procfs.Owner) still runs, for providers whose runs take no
// host lock.
func (r *RunDir) OwnedBy(o procfs.Owner) {
	switch l, what := o.Liveness(); l {
	case procfs.Live:
		r.Live = what
	case procfs.Unknown:
		r.Undecided = what
	}
}

// Descriptor is a provider as the rest of skewtest knows it: each provider
// package exports one (local.Descriptor, ...), package clusters lists
// them, and nothing else needs to know which provider it has. Settings
// values are opaque to everyone but the provider: FromEnv makes one, and
// Check and New take it back (nil for the provider's defaults).
type Descriptor struct {
	// Name is PROVIDER's value for it.
	Name string
	// Help says in a few words what the provider runs on, for PROVIDER's
	// row of the settings.
	Help string
	// RunDirPrefix names its run directories, <prefix><run-id>, under
	// its RunRoot; empty for the provider whose run directories are
	// named by the run ID alone (local).
	RunDirPrefix string
	// RunRoot is where its run directories go, given Options.RunRoot
	// (empty for its default): HostRunRoot or UserRunRoot.
	RunRoot func(given string) string

	// CreatesCluster says its Up makes the cluster (at
	// Options.APIServerVersion, APISERVER or the plan's newest, so the plan
	// is checked against it before anything is built); false for a provider that
	// attaches to a cluster someone else runs, whose plan is checked
	// against its API server after Up.
	CreatesCluster bool
	// MaxTestNodes is how many test nodes (Options.InitialKubelets) it can
	// make; 0 when it attaches to a cluster, which has the nodes it has.
	MaxTestNodes int
	// CSIModes are the modes of skewtest's CSI driver (Options.CSIMode)
	// it runs; the first is the default.
	CSIModes []string
	// CleansHost says its runs change this host (processes, mounts, a run
	// directory another run must not take), so they hold the host lock
	// while they run, and `skewtest clean` takes it before it cleans one
	// of its run directories. False for a provider whose runs reach only
	// their nodes, over SSH, and take no lock (existing).
	CleansHost bool
	// ClusterOnHost says its cluster is made on this host (processes,
	// mounts, containers, links): what a footprint of the host sees
	// appear and must see go at Down.
	ClusterOnHost bool
	// KubeletsOnHost says its control plane and kubelets are processes of
	// this host, not in containers or machines: their logs are the run's
	// files (logs/kubelet-<hop>-<version>.log), their volumes mounts in
	// this host's mount table, and its nodes share this host (local).
	KubeletsOnHost bool
	// NodeCapabilities are what its test nodes have or can do beyond
	// nodes.Node: a catalogue entry runs on the providers whose nodes
	// have every capability it needs. CheckNodes holds them to the
	// provider's node type and its other properties.
	NodeCapabilities []nodes.Capability
	// NodeType is a value of the type its TestNodes returns (a nil
	// pointer will do): CheckNodes reads what it implements.
	NodeType nodes.Node
	// GatesRefused says why its kubelets cannot run with a plan entry's
	// feature gates, for the error that refuses such a plan; empty when
	// its nodes have nodes.KubeletFeatureGates.
	GatesRefused string
	// QuickClusters says its cluster comes up in seconds on this host,
	// costs nothing and disturbs no one else's: suites run their longer
	// default matrices, and the clusters they need only for an API
	// server, on it.
	QuickClusters bool
	// TeardownTimeout is the longest its Down may take (deleting cloud
	// resources and waiting until they are gone); 0 for the default of a
	// cluster on this host (timeouts.Teardown).
	TeardownTimeout time.Duration

	// Settings are the environment variables its FromEnv reads.
	Settings []Setting
	// FromEnv reads its own settings from the environment (getenv is
	// never nil); an error names the variable and what it wants.
	FromEnv func(getenv func(string) string) (any, error)
	// Check checks o and settings without a cluster and without making
	// anything, so that a bad setting fails before any binary is built;
	// nil when there is nothing to check beyond what package clusters
	// checks for every provider (MaxTestNodes, CSIModes). o.RunID may be
	// empty: the run has none yet.
	Check func(ctx context.Context, o Options, settings any) error
	// New makes the provider; nothing is created until Up.
	New func(o Options, settings any) (Provider, error)

	// Inspect tells whether dir, named <RunDirPrefix><run-id>, holds a
	// recognisable state of one of its runs, and whether that run is
	// still live, for `skewtest clean`.
	Inspect func(dir string) RunDir
	// Clean undoes what a killed run, whose directory is dir, left.
	Clean func(ctx context.Context, dir string) error
	// RemoveOrphans removes what its runs left on this host outside their
	// run directories once those are gone (local: CNI cache entries), for
	// `skewtest clean`; nil when there is nothing of the kind.
	RemoveOrphans func(logger *slog.Logger) error
}

// DefaultRunRoot holds one directory per run of the providers that make
// their clusters on this host, as root.
const DefaultRunRoot = "/var/lib/skewtest"

// HostRunRoot is the run root of a provider that needs root on this host:
// given, or DefaultRunRoot.
func HostRunRoot(given string) string {
	if given != "" {
		return given
	}
	return DefaultRunRoot
}

// UserRunRoot is the run root of a provider that needs no root on this
// host (it reaches its nodes over SSH or a cloud API): given, or
// DefaultRunRoot for root and ~/.local/state/skewtest for anyone else.
func UserRunRoot(given string) string {
	if given != "" {
		return given
	}
	if os.Geteuid() != 0 {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, ".local", "state", "skewtest")
		}
	}
	return DefaultRunRoot
}

// SettingsAs is a provider's own settings as given to its Check or New: s
// itself when it is a T, T's zero value (the defaults) when s is nil.
func SettingsAs[T any](provider string, s any) (T, error) {
	var zero T
	if s == nil {
		return zero, nil
	}
	if t, ok := s.(T); ok {
		return t, nil
	}
	if t, ok := s.(*T); ok && t != nil {
		return *t, nil
	}
	return zero, fmt.Errorf("provider %s: settings of type %T, want %T (its descriptor's FromEnv makes them)", provider, s, zero)
}

// List is a comma-separated setting's entries, trimmed, without empty
// ones; nil when there are none.
func List(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// CheckNodes checks the descriptor's NodeCapabilities against its
// NodeType and its other properties: what its node type implements is
// declared, a cluster it makes has disposable nodes, only kubelets on this
// host make a host node, block volumes come with the CSI driver's ebs
// mode, and a provider without the gates capability says why. The
// clusters package's tests call it for every registered provider.
func (d Descriptor) CheckNodes() error {
	if d.NodeType == nil {
		return fmt.Errorf("provider %s: its descriptor names no NodeType", d.Name)
	}
	if err := nodes.CheckCapabilities(d.NodeCapabilities, d.NodeType); err != nil {
		return fmt.Errorf("provider %s: %w", d.Name, err)
	}
	has := func(c nodes.Capability) bool { return slices.Contains(d.NodeCapabilities, c) }
	var problems []string
	agree := func(c nodes.Capability, want bool, why string) {
		if has(c) != want {
			problems = append(problems, fmt.Sprintf("%s is declared %t, but %s is %t", c, has(c), why, want))
		}
	}
	agree(nodes.Disposable, d.CreatesCluster, "CreatesCluster")
	agree(nodes.HostNode, d.KubeletsOnHost, "KubeletsOnHost")
	agree(nodes.BlockVolumes, slices.Contains(d.CSIModes, string(csidriver.ModeEBS)), "CSIModes holding "+string(csidriver.ModeEBS))
	if has(nodes.KubeletFeatureGates) == (d.GatesRefused != "") {
		problems = append(problems, fmt.Sprintf("GatesRefused %q disagrees with %s declared %t: say why exactly when the capability is missing", d.GatesRefused, nodes.KubeletFeatureGates, has(nodes.KubeletFeatureGates)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("provider %s: node capabilities: %s", d.Name, strings.Join(problems, "; "))
	}
	return nil
}
