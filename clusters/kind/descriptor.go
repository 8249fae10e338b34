package kind

import (
	"context"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/registry"
)

// Settings are the kind provider's own settings (KIND_NODE_IMAGE,
// KIND_CSI), as Descriptor.FromEnv reads them.
type Settings struct {
	// NodeImage chooses the node image: see Config.NodeImage.
	NodeImage string
	// CSI chooses the CSI driver: see Config.CSI.
	CSI string
}

// Descriptor is the kind provider as package clusters lists it.
var Descriptor = registry.Descriptor{
	Name:           "kind",
	Help:           "kind with an offline node image",
	RunDirPrefix:   RunDirPrefix,
	RunRoot:        registry.HostRunRoot,
	CreatesCluster: true,
	// One worker so far.
	MaxTestNodes: 1,
	// Its DaemonSet runs skewtest's node plugin in tmpfs mode only so far.
	CSIModes:      []string{string(csidriver.ModeTmpfs)},
	CleansHost:    true,
	ClusterOnHost: true,
	Settings: []registry.Setting{
		{Name: "KIND_NODE_IMAGE", Help: "offline (build locally; the default where a private dockerd is needed), upstream (kindest/node at the API server's version; the default on a normal Docker host) or an image reference"},
		{Name: "KIND_CSI", Help: "skewtest (skewtest's own CSI node plugin, built here; the default with the offline node image) or hostpath (the upstream CSI hostpath driver from registry.k8s.io; the default with a pulled node image)"},
	},
	FromEnv: func(getenv func(string) string) (any, error) {
		return Settings{NodeImage: getenv("KIND_NODE_IMAGE"), CSI: getenv("KIND_CSI")}, nil
	},
	Check: func(_ context.Context, _ registry.Options, s any) error {
		st, err := registry.SettingsAs[Settings]("kind", s)
		if err != nil {
			return err
		}
		return CheckCSI(st.CSI)
	},
	New: func(o registry.Options, s any) (registry.Provider, error) {
		st, err := registry.SettingsAs[Settings]("kind", s)
		if err != nil {
			return nil, err
		}
		var kubelet binaries.Binary
		if len(o.InitialKubelets) == 1 {
			kubelet = o.InitialKubelets[0]
		}
		return New(Config{RunID: o.RunID, RunRoot: o.RunRoot, CacheDir: o.CacheDir,
			APIServerVersion: o.APIServerVersion, Kubelet: kubelet, NodeImage: st.NodeImage, CSI: st.CSI, Logger: o.Logger})
	},
	Inspect: func(dir string) registry.RunDir { return registry.RunDir{Path: dir, NotARun: CheckRunDir(dir)} },
	Clean:   Clean,
}
