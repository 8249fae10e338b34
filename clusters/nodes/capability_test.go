package nodes_test

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/nodes/nodestest"
)

// gatedNode implements the feature gates interface; nodestest.Idle none.
type gatedNode struct{ nodestest.Idle }

func (gatedNode) SetKubeletFeatureGates(context.Context, map[string]bool) error { return nil }

func TestCheckCapabilities(t *testing.T) {
	for _, c := range []struct {
		name     string
		declared []nodes.Capability
		node     nodes.Node
		wantErr  string
	}{
		{"a node with no interface and plain capabilities", []nodes.Capability{nodes.Disposable, nodes.HostNode}, nodestest.Idle{}, ""},
		{"an interface implemented and declared", []nodes.Capability{nodes.KubeletFeatureGates}, gatedNode{}, ""},
		{"declared without the interface", []nodes.Capability{nodes.KubeletFeatureGates}, nodestest.Idle{}, "kubelet-feature-gates is declared, but nodestest.Idle does not implement its interface"},
		{"the interface without the declaration", nil, gatedNode{}, "nodes_test.gatedNode implements kubelet-feature-gates's interface, but the capability is not declared"},
		{"an unknown capability", []nodes.Capability{"teleport"}, nodestest.Idle{}, `"teleport" is not a capability`},
		{"declared twice", []nodes.Capability{nodes.Disposable, nodes.Disposable}, nodestest.Idle{}, `"disposable" is declared twice`},
	} {
		err := nodes.CheckCapabilities(c.declared, c.node)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.wantErr)
		}
	}
}

func TestHasAll(t *testing.T) {
	have := []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes}
	if !nodes.HasAll(have, nil) || !nodes.HasAll(have, []nodes.Capability{nodes.SkewtestVolumes}) {
		t.Errorf("nodes.HasAll(%v) refuses needs it has", have)
	}
	if nodes.HasAll(have, []nodes.Capability{nodes.SkewtestVolumes, nodes.HostNode}) {
		t.Errorf("nodes.HasAll(%v) accepts host-node, which it lacks", have)
	}
}

// List keeps the nodes and their order.
func TestList(t *testing.T) {
	ns := []nodestest.Idle{{Name: "a"}, {Name: "b"}}
	got := nodes.List(ns)
	if len(got) != 2 || got[0].String() != "a" || got[1].String() != "b" {
		t.Errorf("List(a, b) = %v", got)
	}
	if got := nodes.List([]nodestest.Idle(nil)); len(got) != 0 {
		t.Errorf("List(nil) = %v", got)
	}
}
