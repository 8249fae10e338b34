package kind

import (
	"context"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/helpers"
	"sigs.k8s.io/skewtest/clusters/nodes"
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
	// One worker per initial kubelet.
	MaxTestNodes: MaxWorkers,
	// Its DaemonSet runs skewtest's node plugin in tmpfs mode only so far.
	CSIModes:      []string{string(csidriver.ModeTmpfs)},
	CleansHost:    true,
	ClusterOnHost: true,
	NodeType:      (*Node)(nil),
	// Its nodes are the run's own containers, with the CSI driver it
	// deploys; their kubelets read the configuration kubeadm wrote.
	NodeCapabilities: []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes},
	GatesRefused:     "kind's kubelets read kubeadm's /var/lib/kubelet/config.yaml, written once for the whole cluster from kind's configuration patch, and a hop swaps only the binary",
	Settings: []registry.Setting{
		{Name: "KIND_NODE_IMAGE", Help: "offline (build locally; the default where a private dockerd is needed), upstream (kindest/node at the API server's version; the default on a normal Docker host) or an image reference"},
		{Name: "KIND_CSI", Help: "skewtest (skewtest's own CSI node plugin, built here; the default with the offline node image or several workers) or hostpath (the upstream CSI hostpath driver from registry.k8s.io, one worker only; the default with a pulled node image and one worker)"},
	},
	FromEnv: func(getenv func(string) string) (any, error) {
		return Settings{NodeImage: getenv("KIND_NODE_IMAGE"), CSI: getenv("KIND_CSI")}, nil
	},
	Check: func(_ context.Context, o registry.Options, s any) error {
		st, err := registry.SettingsAs[Settings]("kind", s)
		if err != nil {
			return err
		}
		if err := CheckCSI(st.CSI); err != nil {
			return err
		}
		if err := checkCSIWorkers(st.CSI, len(o.InitialKubelets)); err != nil {
			return err
		}
		// The workload image, the CSI driver's, the offline node image and
		// the runtime shim hold helper programs: a skewtest that cannot
		// get them says so before anything is built.
		return helpers.Check(helpers.All()...)
	},
	New: func(o registry.Options, s any) (registry.Provider, error) {
		st, err := registry.SettingsAs[Settings]("kind", s)
		if err != nil {
			return nil, err
		}
		return New(Config{RunID: o.RunID, RunRoot: o.RunRoot, CacheDir: o.CacheDir,
			APIServerVersion: o.APIServerVersion, Kubelets: o.InitialKubelets, NodeImage: st.NodeImage, CSI: st.CSI, TimeoutFactor: o.TimeoutFactor, Logger: o.Logger})
	},
	Inspect: func(dir string) registry.RunDir { return registry.RunDir{Path: dir, NotARun: CheckRunDir(dir)} },
	Clean:   Clean,
}
