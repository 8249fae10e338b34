package nodes

import (
	"context"
	"time"
)

// WithKubeletUsage is a node that can tell what its running kubelet has
// used since it started: the cost of what that kubelet did, such as
// reconstructing and cleaning up a busy node's volumes after a swap.
type WithKubeletUsage interface {
	// KubeletUsage reads the running kubelet's usage; an error when no
	// kubelet runs.
	KubeletUsage(ctx context.Context) (KubeletUsage, error)
}

// KubeletUsage is what one kubelet process has used since it started.
type KubeletUsage struct {
	// PID is the kubelet's process.
	PID int
	// CPU is its CPU time in user and kernel mode (not its children's).
	CPU time.Duration
	// PeakRSS is the most memory it has held resident, in bytes.
	PeakRSS int64
}
