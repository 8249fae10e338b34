// Package nodestest has a nodes.Node for tests that need one and none of
// what it does: its kubelet lifecycle does nothing and succeeds, and its
// commands go to the Cmder it is given (nil when a test runs none).
package nodestest

import (
	"context"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
)

// Idle is a node whose kubelet lifecycle does nothing, and which
// implements none of the optional node interfaces: a test embeds it to
// add the one it needs.
type Idle struct {
	exec.Cmder
	// Name is its String; "idle" when empty.
	Name string
}

func (n Idle) String() string {
	if n.Name == "" {
		return "idle"
	}
	return n.Name
}

// KubeletRootDir is the kubelet's default root.
func (Idle) KubeletRootDir() string { return "/var/lib/kubelet" }

func (Idle) StopKubelet(context.Context) error                  { return nil }
func (Idle) SwapKubelet(context.Context, binaries.Binary) error { return nil }
func (Idle) StartKubelet(context.Context) error                 { return nil }
