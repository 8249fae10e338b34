// Package nodes holds the Node interface every provider implements: a
// Cmder plus the kubelet lifecycle a skew scenario drives.
package nodes

import (
	"context"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
)

// Node is one Kubernetes node a scenario may disrupt.
type Node interface {
	// Command runs a command on the node, in the mount namespace the
	// kubelet sees (the host for local and existing, the node container for
	// kind).
	exec.Cmder
	// String is the node's name as the API server knows it.
	String() string
	// KubeletRootDir is the kubelet's --root-dir on the node.
	KubeletRootDir() string
	// StopKubelet stops the kubelet and returns once it has exited; the
	// node's pods, mounts and other processes are left as they are.
	StopKubelet(ctx context.Context) error
	// SwapKubelet installs bin as the kubelet the next StartKubelet runs,
	// with a configuration that version accepts. The kubelet must be stopped.
	SwapKubelet(ctx context.Context, bin binaries.Binary) error
	// StartKubelet starts the installed kubelet and returns once its process
	// runs; callers wait for the node's readiness through the API server.
	StartKubelet(ctx context.Context) error
}

// WithNotes is a node that keeps facts worth reporting about its kubelet's
// last start (say, a checkpoint it had to remove); the scenario adds them
// to the step's notes.
type WithNotes interface {
	Notes() []string
}

// WithKubeletLog is a node that can show its kubelet's own log since that
// kubelet last started (one process's lines, not its predecessors'), for
// checks that cross-check a kubelet metric against what the kubelet logged
// (a counter that lost increments to the metrics registration race).
type WithKubeletLog interface {
	KubeletLog(ctx context.Context) (string, error)
}

// WithCSIDriver is a node whose CSI driver's node service the harness runs
// as a process of its own and can control: for scenarios where the driver
// registers after the kubelet starts, stalls in a call, or fails one.
type WithCSIDriver interface {
	// StopCSIDriver stops the node's CSI driver process; its sockets go,
	// so the kubelet deregisters it. Mounts stay.
	StopCSIDriver(ctx context.Context) error
	// StartCSIDriver starts it again and returns once it listens; the
	// kubelet registers it through the plugin registration socket.
	StartCSIDriver(ctx context.Context) error
	// CSIStallDir is the driver's knob directory on the node: while a
	// file named after a CSI method (e.g. NodePublishVolume) exists there,
	// calls of that method wait (the stall knob); while a CSIFail's file
	// (CSIFail.Path) exists there, calls of its method for its volume fail
	// (the fail knob).
	CSIStallDir() string
}

// CSIFail is the fail knob of a node's CSI driver (WithCSIDriver): write
// Content to Path(CSIStallDir()) on the node and calls of Method for
// VolumeID fail with Code, Times times (0: until the file is removed);
// the driver's call record marks each such call Injected.
type CSIFail = csidriver.Fail

// WithKubeletKill is a node whose kubelet the harness can SIGKILL, as a
// crash or the OOM killer would: no shutdown path runs, and calls it has
// in flight (a CSI NodePublishVolume) are cut off.
type WithKubeletKill interface {
	// KillKubelet SIGKILLs the kubelet and returns once it has exited.
	KillKubelet(ctx context.Context) error
}

// WithAPIServerOutage is a node whose kubelet alone the harness can cut
// off from the API server: the control plane, the other nodes and the
// harness still reach it.
type WithAPIServerOutage interface {
	// CutAPIServer makes the API server unreachable for the node's
	// kubelet from its next start, until RestoreAPIServer. The kubelet
	// must be stopped. What it changed is undone when the kubelet next
	// stops, and by the provider's teardown.
	CutAPIServer(ctx context.Context) error
	// RestoreAPIServer lets the kubelet reach the API server again. It
	// returns how many of the kubelet's connections the cut refused: the
	// proof that the kubelet met it.
	RestoreAPIServer(ctx context.Context) (refused int, err error)
}

// WithKubeletFeatureGates is a node whose kubelet configuration the
// harness writes, so that it can name feature gates in it.
type WithKubeletFeatureGates interface {
	// SetKubeletFeatureGates puts gates into the installed kubelet's
	// configuration for its next start (nil: none). The kubelet must be
	// stopped.
	SetKubeletFeatureGates(ctx context.Context, gates map[string]bool) error
}

// List is ns as Node values, in their order: each provider keeps its own
// node type and hands them out so from TestNodes.
func List[T Node](ns []T) []Node {
	out := make([]Node, len(ns))
	for i, n := range ns {
		out[i] = n
	}
	return out
}
