package nodes

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
)

// plainNode implements Node and nothing else; gatedNode adds the feature
// gates interface.
type plainNode struct{ exec.Cmder }

func (plainNode) String() string                                     { return "plain" }
func (plainNode) KubeletRootDir() string                             { return "/var/lib/kubelet" }
func (plainNode) StopKubelet(context.Context) error                  { return nil }
func (plainNode) SwapKubelet(context.Context, binaries.Binary) error { return nil }
func (plainNode) StartKubelet(context.Context) error                 { return nil }

type gatedNode struct{ plainNode }

func (gatedNode) SetKubeletFeatureGates(context.Context, map[string]bool) error { return nil }

func TestCheckCapabilities(t *testing.T) {
	for _, c := range []struct {
		name     string
		declared []Capability
		node     Node
		wantErr  string
	}{
		{"a node with no interface and plain capabilities", []Capability{Disposable, HostNode}, plainNode{}, ""},
		{"an interface implemented and declared", []Capability{KubeletFeatureGates}, gatedNode{}, ""},
		{"declared without the interface", []Capability{KubeletFeatureGates}, plainNode{}, "kubelet-feature-gates is declared, but nodes.plainNode does not implement its interface"},
		{"the interface without the declaration", nil, gatedNode{}, "nodes.gatedNode implements kubelet-feature-gates's interface, but the capability is not declared"},
		{"an unknown capability", []Capability{"teleport"}, plainNode{}, `"teleport" is not a capability`},
		{"declared twice", []Capability{Disposable, Disposable}, plainNode{}, `"disposable" is declared twice`},
	} {
		err := CheckCapabilities(c.declared, c.node)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.wantErr)
		}
	}
}

func TestHasAll(t *testing.T) {
	have := []Capability{Disposable, SkewtestVolumes}
	if !HasAll(have, nil) || !HasAll(have, []Capability{SkewtestVolumes}) {
		t.Errorf("HasAll(%v) refuses needs it has", have)
	}
	if HasAll(have, []Capability{SkewtestVolumes, HostNode}) {
		t.Errorf("HasAll(%v) accepts host-node, which it lacks", have)
	}
}
