package local

import (
	"context"
	"log/slog"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/helpers"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/registry"
)

// Settings are the local provider's own settings: none so far. Its run
// root, CSI driver mode (CSI_MODE) and timeout factor are every
// provider's (registry.Options, SKEWTEST_TIMEOUT_FACTOR).
type Settings struct{}

// Descriptor is the local provider as package clusters lists it.
var Descriptor = registry.Descriptor{
	Name: "local",
	Help: "a real cluster on this Linux host",
	// Run directories are named by the run ID alone: <run root>/<run-id>.
	RunDirPrefix:   "",
	RunRoot:        registry.HostRunRoot,
	CreatesCluster: true,
	MaxTestNodes:   MaxNodes,
	CSIModes:       []string{string(csidriver.ModeTmpfs), string(csidriver.ModeEBS)},
	CleansHost:     true,
	ClusterOnHost:  true,
	KubeletsOnHost: true,
	NodeType:       (*Node)(nil),
	// Its nodes are this host, with skewtest's CSI driver as processes the
	// harness controls and kubelets whose configuration it writes.
	NodeCapabilities: []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.BlockVolumes, nodes.HostNode,
		nodes.CSIDriverControl, nodes.KubeletKill, nodes.APIServerOutage, nodes.KubeletFeatureGates},
	QuickClusters: true,
	FromEnv:       func(func(string) string) (any, error) { return Settings{}, nil },
	// Its pods' program and its CSI driver are helper programs: a skewtest
	// that can get neither says so before anything is built.
	Check: func(context.Context, registry.Options, any) error {
		return helpers.Check(helpers.Podbin, helpers.CSIDriver)
	},
	New: func(o registry.Options, s any) (registry.Provider, error) {
		if _, err := registry.SettingsAs[Settings]("local", s); err != nil {
			return nil, err
		}
		return New(Config{RunID: o.RunID, RunRoot: o.RunRoot, CacheDir: o.CacheDir,
			APIServerVersion: o.APIServerVersion, Kubelets: o.InitialKubelets, CSIMode: o.CSIMode, TimeoutFactor: o.TimeoutFactor, Logger: o.Logger})
	},
	Inspect: func(dir string) registry.RunDir { return registry.RunDir{Path: dir, NotARun: CheckRunDir(dir)} },
	Clean:   Clean,
	RemoveOrphans: func(logger *slog.Logger) error {
		entries, err := RemoveOrphanedCNIEntries(DefaultRunRoot)
		if entries > 0 {
			logger.Info("removed CNI cache entries of runs that are gone", "entries", entries)
		}
		return err
	},
}
