// Package nodes holds the Node interface every provider implements: a
// Cmder plus the kubelet lifecycle a skew scenario drives.
package nodes

import (
	"context"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
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
