package local

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
)

func TestNewChecksKubelets(t *testing.T) {
	kubelet := binaries.Binary{Component: "kubelet", Version: "v1.37.2", Path: "/nonexistent/kubelet"}
	for _, tc := range []struct {
		name     string
		kubelets []binaries.Binary
		want     string
	}{
		{"none", nil, "initial kubelet binary is required (one per node)"},
		{"second has no path", []binaries.Binary{kubelet, {Version: "v1.36.3"}}, "initial kubelet binary is required for node 2 (skewtest-worker2)"},
		{"too many", make([]binaries.Binary, MaxNodes+1), "17 nodes asked for, at most 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(Config{RunID: "r", RunRoot: t.TempDir(), APIServerVersion: version.MustParseSemantic("v1.37.2"), Kubelets: tc.kubelets})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v; want an error saying %q", p, err, tc.want)
			}
		})
	}
}

func TestNodeNamed(t *testing.T) {
	p := &Provider{dir: t.TempDir()}
	for i := range 3 {
		n, err := p.newNode(i, layoutOf(p.dir, i).state(testRunID), nodePorts{}, binaries.Binary{})
		if err != nil {
			t.Fatal(err)
		}
		p.nodes = append(p.nodes, n)
	}
	n, err := p.nodeNamed("skewtest-worker2")
	if err != nil || n != p.nodes[1] {
		t.Errorf("nodeNamed(skewtest-worker2) = %v, %v; want the second node", n, err)
	}
	_, err = p.nodeNamed("skewtest-worker4")
	if err == nil || !strings.Contains(err.Error(), `no node "skewtest-worker4" in this cluster (nodes: skewtest-worker, skewtest-worker2, skewtest-worker3)`) {
		t.Errorf("nodeNamed(skewtest-worker4) = %v; want an error listing the nodes", err)
	}
}
