package registry

import (
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/nodes/nodestest"
)

// CheckNodes holds the declared capabilities to the descriptor's other
// properties, each disagreement named.
func TestCheckNodes(t *testing.T) {
	const refused = "its kubelets keep their own configuration"
	good := Descriptor{Name: "p", CreatesCluster: true, KubeletsOnHost: true, CSIModes: []string{"tmpfs", "ebs"},
		NodeCapabilities: []nodes.Capability{nodes.Disposable, nodes.HostNode, nodes.BlockVolumes}, GatesRefused: refused, NodeType: nodestest.Idle{}}
	if err := good.CheckNodes(); err != nil {
		t.Fatalf("a descriptor whose capabilities agree: %v", err)
	}
	for _, c := range []struct {
		name    string
		change  func(*Descriptor)
		wantErr string
	}{
		{"a cluster it makes, not disposable", func(d *Descriptor) { d.NodeCapabilities = []nodes.Capability{nodes.HostNode, nodes.BlockVolumes} }, "disposable is declared false, but CreatesCluster is true"},
		{"an attached cluster's disposable nodes", func(d *Descriptor) { d.CreatesCluster = false }, "disposable is declared true, but CreatesCluster is false"},
		{"a host node without kubelets on the host", func(d *Descriptor) { d.KubeletsOnHost = false }, "host-node is declared true, but KubeletsOnHost is false"},
		{"block volumes without the ebs mode", func(d *Descriptor) { d.CSIModes = []string{"tmpfs"} }, "block-volumes is declared true, but CSIModes holding ebs is false"},
		{"no gates and no reason", func(d *Descriptor) { d.GatesRefused = "" }, "say why exactly when the capability is missing"},
		{"no node type", func(d *Descriptor) { d.NodeType = nil }, "its descriptor names no NodeType"},
		{"an interface capability the node lacks", func(d *Descriptor) {
			d.NodeCapabilities = append(d.NodeCapabilities, nodes.KubeletFeatureGates)
			d.GatesRefused = ""
		}, "kubelet-feature-gates is declared, but nodestest.Idle does not implement its interface"},
	} {
		d := good
		d.NodeCapabilities = append([]nodes.Capability(nil), good.NodeCapabilities...)
		c.change(&d)
		if err := d.CheckNodes(); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.wantErr)
		}
	}
}
