package existing

import "log/slog"

// SSHNode returns a Node for a machine reached over SSH at address (host or
// host:port), without a cluster: the same connection, host key checks and
// command handling as a cluster's nodes, for callers that only run
// commands there (a VM guest, clusters/vm). Its kubelet methods use the
// defaults (DefaultKubeletUnit, DefaultKubeletBinary, systemd).
func SSHNode(name, address string, cfg SSHConfig, log *slog.Logger) (*Node, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d, err := newDialer(&cfg, log)
	if err != nil {
		return nil, err
	}
	p := &Provider{
		cfg: Config{SSH: cfg, KubeletRootDir: DefaultKubeletRootDir, KubeletUnit: DefaultKubeletUnit,
			KubeletBinary: DefaultKubeletBinary, Logger: log},
		log: log, dialer: d, byName: map[string]*Node{},
	}
	return p.Node(name, address), nil
}
