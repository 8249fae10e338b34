package existing

import (
	"log/slog"

	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
)

// SSHNode returns a Node for a machine reached over SSH at address (host or
// host:port), without a cluster: the same connection, host key checks and
// command handling as a cluster's nodes, for callers that only run
// commands there (a VM guest, clusters/vm). Its kubelet methods use the
// defaults (DefaultKubeletUnit, DefaultKubeletBinary, systemd).
func SSHNode(name, address string, cfg SSHConfig, log *slog.Logger) (*Node, error) {
	return SSHNodeWithLayout(name, address, cfg, systemdkubelet.Layout{Unit: DefaultKubeletUnit,
		Binary: DefaultKubeletBinary, RootDir: DefaultKubeletRootDir}, log)
}

// SSHNodeWithLayout is SSHNode for a node that keeps its kubelet where
// layout says (a kops node: /usr/local/bin/kubelet, its flags in
// /etc/sysconfig/kubelet), for providers that find their nodes
// themselves (clusters/kops). Its kubelet's own binary is recorded in
// memory before the first change; KubeletDriver restores it.
func SSHNodeWithLayout(name, address string, cfg SSHConfig, layout systemdkubelet.Layout, log *slog.Logger) (*Node, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	d, err := newDialer(&cfg, log)
	if err != nil {
		return nil, err
	}
	p := &Provider{
		cfg: Config{SSH: cfg, KubeletRootDir: layout.RootDir, KubeletUnit: layout.Unit,
			KubeletBinary: layout.Binary, Logger: log},
		log: log, dialer: d, byName: map[string]*Node{}, state: &State{},
	}
	n := p.Node(name, address)
	n.driver.Layout = layout
	return n, nil
}
