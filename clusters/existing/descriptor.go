package existing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
	"sigs.k8s.io/skewtest/clusters/registry"
	"sigs.k8s.io/skewtest/clusters/storage"
)

// RunDirPrefix names an existing-provider run's state directory,
// existing-<run-id>, beside the other providers' run directories.
const RunDirPrefix = "existing-"

// Descriptor is the existing provider as package clusters lists it. Its
// settings are a Config (FromEnv), which New completes from the shared
// options: the run ID, the logger and the state directory.
var Descriptor = registry.Descriptor{
	Name:         providerName,
	Help:         "KUBECONFIG plus SSH",
	RunDirPrefix: RunDirPrefix,
	// It needs no root here: it reaches the nodes over SSH.
	RunRoot: registry.UserRunRoot,
	// Its CSI volumes come from STORAGE_CLASS; CSI_MODE's default is all
	// it accepts, as before.
	CSIModes: []string{string(csidriver.ModeTmpfs)},
	NodeType: (*Node)(nil),
	// Its nodes are someone else's: no capability a fault would use.
	NodeCapabilities: nil,
	GatesRefused:     "an existing cluster's kubelets keep their own configuration, and a hop swaps only the binary",
	Settings: []registry.Setting{
		{Name: "KUBECONFIG", Help: "the cluster's kubeconfig"},
		{Name: "NODES", Help: "comma-separated test nodes (default: every worker)"},
		{Name: "SSH_USER / SSH_KEY / SSH_KNOWN_HOSTS", Default: "$USER / agent / ~/.ssh/known_hosts", Help: "how to reach nodes (host keys are always checked)"},
		{Name: "SSH_ADDRESSES", Help: "NODE=HOST:PORT,... for nodes reached other than at their InternalIP on port 22 (a port forward, a VM's)"},
		{Name: "KUBELET_BINARY / KUBELET_UNIT", Default: defaultKubeletBinary + " / " + defaultKubeletUnit, Help: "the kubelet's path and systemd unit"},
		{Name: "KUBELET_ROOT_DIR", Default: defaultKubeletRootDir, Help: "the kubelet's --root-dir"},
		{Name: "STORAGE_CLASS", Help: "required: a StorageClass of the cluster's that provisions volumes on the test nodes (kubectl get storageclass)"},
		{Name: "IMAGE", Default: storage.StockImage, Help: "the workload image, pulled by the nodes (needs sh, sleep, date, mv)"},
		{Name: "KUBELET_HEALTHZ_URL", Default: systemdkubelet.DefaultHealthzURL, Help: "the kubelet's health endpoint as the node reaches it (its healthzBindAddress and healthzPort)"},
	},
	FromEnv: func(getenv func(string) string) (any, error) { return configFromEnv(getenv) },
	// What needs no cluster is refused before anything is built: the
	// workload's StorageClass is the owner's, and skewtest cannot guess it.
	Check: func(_ context.Context, _ registry.Options, s any) error {
		cfg, err := registry.SettingsAs[Config](providerName, s)
		if err != nil {
			return err
		}
		if cfg.StorageClass == "" {
			return errors.New("existing: STORAGE_CLASS is not set: the workload's volumes come from a StorageClass of the cluster's that provisions them on the test nodes; set STORAGE_CLASS to one of kubectl get storageclass")
		}
		return nil
	},
	New: func(o registry.Options, s any) (registry.Provider, error) {
		cfg, err := registry.SettingsAs[Config](providerName, s)
		if err != nil {
			return nil, err
		}
		if cfg.Logger == nil {
			cfg.Logger = o.Logger
		}
		if cfg.RunID == "" {
			cfg.RunID = o.RunID
		}
		if cfg.TimeoutFactor == 0 {
			cfg.TimeoutFactor = o.TimeoutFactor
		}
		if cfg.StateDir == "" && o.RunID != "" {
			cfg.StateDir = filepath.Join(registry.UserRunRoot(o.RunRoot), RunDirPrefix+o.RunID)
		}
		return newProvider(cfg)
	},
	// Its runs take no host lock: whether one is still live is told by
	// the process its state names.
	Inspect: func(dir string) registry.RunDir {
		r := registry.RunDir{Path: dir}
		if o, err := checkRunDir(dir, strings.TrimPrefix(filepath.Base(dir), RunDirPrefix)); err != nil {
			r.NotARun = err
		} else {
			r.OwnedBy(o)
		}
		return r
	},
	Clean: cleanRunDir,
}

// configFromEnv reads the provider's settings (Descriptor.Settings) from
// the environment; the run ID, logger and state directory are left to
// New's options.
func configFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Kubeconfig:        getenv("KUBECONFIG"),
		Nodes:             registry.List(getenv("NODES")),
		KubeletBinary:     getenv("KUBELET_BINARY"),
		KubeletUnit:       getenv("KUBELET_UNIT"),
		KubeletRootDir:    getenv("KUBELET_ROOT_DIR"),
		KubeletHealthzURL: getenv("KUBELET_HEALTHZ_URL"),
		StorageClass:      getenv("STORAGE_CLASS"),
		Image:             getenv("IMAGE"),
		SSH: SSHConfig{
			User:           getenv("SSH_USER"),
			KeyFile:        getenv("SSH_KEY"),
			KnownHostsFile: getenv("SSH_KNOWN_HOSTS"),
		},
	}
	if v := getenv("SSH_ADDRESSES"); v != "" {
		addrs, err := parseAddresses(v)
		if err != nil {
			return c, fmt.Errorf("SSH_ADDRESSES=%q: %w", v, err)
		}
		c.SSH.Address = func(node string) string { return addrs[node] }
	}
	return c, nil
}

// parseAddresses reads SSH_ADDRESSES: NODE=HOST:PORT pairs, comma-separated.
func parseAddresses(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range registry.List(v) {
		node, addr, ok := strings.Cut(pair, "=")
		if _, _, err := net.SplitHostPort(addr); !ok || node == "" || err != nil {
			return nil, fmt.Errorf("%q: want NODE=HOST:PORT, e.g. worker-1=127.0.0.1:2222", pair)
		}
		out[node] = addr
	}
	return out, nil
}
