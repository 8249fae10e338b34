package nodes

import (
	"context"
	"fmt"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
)

// HostFacts are what a report says of the host a node runs on.
type HostFacts struct {
	// CgroupMode is "v2 (unified)", "v1 (hybrid: ...)" or "v1 (legacy)".
	CgroupMode string
	// Init is "systemd" or "not systemd (PID 1: <name>)".
	Init string
}

// ProbeHost tells the cgroup mode and init system of the host node runs on
// (of the node's container, for kind), through the node's own command.
func ProbeHost(ctx context.Context, node exec.Cmder) (HostFacts, error) {
	r, err := exec.Output(ctx, node, "sh", "-c", cgroups.ProbeCommand)
	if err != nil {
		return HostFacts{}, fmt.Errorf("probe the node's cgroups: %w", err)
	}
	h, err := cgroups.ParseProbe(r.Stdout)
	if err != nil {
		return HostFacts{}, err
	}
	return HostFacts{CgroupMode: h.Mode.String(), Init: h.Init.String()}, nil
}
