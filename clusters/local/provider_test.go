package local

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// providerWithNodes is a provider with n nodes laid out in a temporary run
// directory, none started.
func providerWithNodes(t *testing.T, n int) *Provider {
	t.Helper()
	p := &Provider{dir: t.TempDir()}
	for i := range n {
		node, err := p.newNode(i, layoutOf(p.dir, i).state(testRunID), nodePorts{}, binaries.Binary{})
		if err != nil {
			t.Fatal(err)
		}
		p.nodes = append(p.nodes, node)
	}
	return p
}

func TestNodeNamed(t *testing.T) {
	p := providerWithNodes(t, 3)
	got, err := p.TestNodes(t.Context())
	if err != nil || len(got) != 3 || got[0] != p.nodes[0] || got[1] != p.nodes[1] || got[2] != p.nodes[2] {
		t.Errorf("TestNodes = %v, %v; want the three nodes in order", got, err)
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

// parallel runs every node's function and the shared ones at once, and the
// first failure cancels the rest instead of letting them wait out their
// timeouts.
func TestParallel(t *testing.T) {
	p := providerWithNodes(t, 3)
	var (
		mu  sync.Mutex
		ran []string
	)
	start := time.Now()
	err := p.parallel(t.Context(), func(ctx context.Context, n *Node) error {
		mu.Lock()
		ran = append(ran, n.String())
		mu.Unlock()
		if n.String() == "skewtest-worker2" {
			return errors.New("worker2 failed")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Minute):
			return errors.New(n.String() + " was not cancelled")
		}
	}, func(ctx context.Context) error {
		<-ctx.Done()
		return errors.New("shared saw the cancel")
	})
	if time.Since(start) > 30*time.Second {
		t.Errorf("parallel took %s: the failure did not cancel the others", time.Since(start))
	}
	if err == nil || !strings.Contains(err.Error(), "worker2 failed") || !strings.Contains(err.Error(), "shared saw the cancel") {
		t.Errorf("parallel = %v; want both errors joined", err)
	}
	slices.Sort(ran)
	if strings.Join(ran, " ") != "skewtest-worker skewtest-worker2 skewtest-worker3" {
		t.Errorf("ran on %v, want every node", ran)
	}
}

func TestTimeoutScalesByTheFactor(t *testing.T) {
	if p := (&Provider{slow: 10}); p.timeout(time.Minute) != 10*time.Minute {
		t.Errorf("timeout(1m) with factor 10 = %s", p.timeout(time.Minute))
	}
	if (&Provider{}).timeout(time.Second) != time.Second {
		t.Errorf("a Provider made without New does not keep timeouts as they are")
	}
}
