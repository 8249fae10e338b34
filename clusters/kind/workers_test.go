package kind

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	kindnodes "sigs.k8s.io/kind/pkg/cluster/nodes"
	kindexec "sigs.k8s.io/kind/pkg/exec"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/registry"
)

// fakeKindNode is a kind node that has a name and a role, and runs
// nothing.
type fakeKindNode struct{ name, role string }

func (f fakeKindNode) String() string                         { return f.name }
func (f fakeKindNode) Role() (string, error)                  { return f.role, nil }
func (f fakeKindNode) IP() (string, string, error)            { return "", "", nil }
func (f fakeKindNode) SerialLogs(io.Writer) error             { return nil }
func (f fakeKindNode) Command(string, ...string) kindexec.Cmd { return &errCmd{errors.New("fake")} }
func (f fakeKindNode) CommandContext(context.Context, string, ...string) kindexec.Cmd {
	return &errCmd{errors.New("fake")}
}

func TestWorkersOf(t *testing.T) {
	const c = "skewtest-ab12"
	all := []fakeKindNode{
		{c + "-worker10", "worker"}, {c + "-worker2", "worker"}, {c + "-control-plane", "control-plane"},
		{c + "-worker", "worker"}, {c + "-worker9", "worker"},
	}
	var nodes []kindnodes.Node
	for _, n := range all {
		nodes = append(nodes, n)
	}
	got, err := workersOf(c, nodes)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range got {
		names = append(names, n.String())
	}
	want := []string{c + "-worker", c + "-worker2", c + "-worker9", c + "-worker10"}
	if !slices.Equal(names, want) {
		t.Errorf("workersOf = %v, want %v (kind's numbering, the initial kubelets' order; no control plane)", names, want)
	}

	if _, err := workersOf(c, []kindnodes.Node{fakeKindNode{"other-worker", "worker"}}); err == nil || !strings.Contains(err.Error(), "other-worker") {
		t.Errorf("a worker named otherwise: %v, want an error naming it", err)
	}
}

func TestWorkerNumber(t *testing.T) {
	const c = "skewtest-ab12"
	for _, tc := range []struct {
		node string
		n    int
		ok   bool
	}{
		{c + "-worker", 1, true},
		{c + "-worker2", 2, true},
		{c + "-worker12", 12, true},
		{c + "-worker1", 0, false}, // kind names its first worker without a number
		{c + "-worker02", 0, false},
		{c + "-workerx", 0, false},
		{c + "-control-plane", 0, false},
		{"skewtest-cd34-worker2", 0, false},
	} {
		if n, ok := workerNumber(c, tc.node); n != tc.n || ok != tc.ok {
			t.Errorf("workerNumber(%q) = %d, %v; want %d, %v", tc.node, n, ok, tc.n, tc.ok)
		}
	}
}

// Every worker's PVs are named apart, the first worker's as before there
// were several, and nothing but a worker of the cluster gets any.
func TestPVPrefix(t *testing.T) {
	const c = "skewtest-ab12"
	seen := map[string]string{}
	for i := 1; i <= MaxWorkers; i++ {
		node := c + "-worker"
		if i > 1 {
			node += strconv.Itoa(i)
		}
		for _, kind := range []string{"csi", "local"} {
			got, err := pvPrefix(c, kind, node)
			if err != nil {
				t.Fatal(err)
			}
			if other, dup := seen[got]; dup {
				t.Errorf("%s and %s/%s share the PV prefix %s", other, node, kind, got)
			}
			seen[got] = node + "/" + kind
			// PV names are <prefix>-<i> or <prefix>-<group>-<i>: a prefix
			// must not be another's followed by a dash.
			for p := range seen {
				if p != got && (strings.HasPrefix(got, p+"-") || strings.HasPrefix(p, got+"-")) {
					t.Errorf("PV prefixes %s and %s: one's names may be the other's", p, got)
				}
			}
		}
	}
	if got, _ := pvPrefix(c, "csi", c+"-worker"); got != c+"-csi" {
		t.Errorf("the first worker's CSI PVs are %s-*, want %s-csi-* as with one worker", got, c)
	}
	if got, _ := pvPrefix(c, "csi", c+"-worker3"); got != c+"-csi3" {
		t.Errorf("worker3's CSI PVs are %s-*, want %s-csi3-*", got, c)
	}
	for _, bad := range []string{c + "-control-plane", "skewtest-cd34-worker"} {
		if _, err := pvPrefix(c, "csi", bad); err == nil {
			t.Errorf("pvPrefix(%q): no error; only the cluster's workers have PVs", bad)
		}
	}
}

// The hostpath driver serves one worker: asking it for several is refused
// before anything is made, by the descriptor's Check and by New, and the
// error says what to do instead.
func TestHostpathRefusedOnSeveralWorkers(t *testing.T) {
	v := version.MustParseSemantic("v1.37.2")
	kubelets := func(n int) []binaries.Binary {
		out := make([]binaries.Binary, n)
		for i := range out {
			out[i] = binaries.Binary{Component: "kubelet", Version: "v1.37.2", Path: "/k"}
		}
		return out
	}
	for _, tc := range []struct {
		csi     string
		workers int
		refused bool
	}{
		{CSIHostpath, 1, false},
		{CSIHostpath, 2, true},
		{CSIHostpath, MaxWorkers, true},
		{CSISkewtest, MaxWorkers, false},
		{"", MaxWorkers, false},
	} {
		o := registry.Options{RunID: "r", APIServerVersion: v, InitialKubelets: kubelets(tc.workers)}
		st := Settings{CSI: tc.csi}
		checkErr := Descriptor.Check(context.Background(), o, st)
		_, newErr := Descriptor.New(o, st)
		for what, err := range map[string]error{"Check": checkErr, "New": newErr} {
			if !tc.refused {
				if err != nil {
					t.Errorf("KIND_CSI=%q on %d workers: %s: %v", tc.csi, tc.workers, what, err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), "KIND_CSI=hostpath") || !strings.Contains(err.Error(), "KIND_CSI=skewtest") || !strings.Contains(err.Error(), "BATCH_NODES=1") {
				t.Errorf("KIND_CSI=%q on %d workers: %s: %v; want a refusal naming the setting and what to use instead", tc.csi, tc.workers, what, err)
			}
		}
	}
	if _, err := New(Config{RunID: "r", APIServerVersion: v, Kubelets: kubelets(MaxWorkers + 1)}); err == nil {
		t.Errorf("New with %d workers: no error, want at most %d", MaxWorkers+1, MaxWorkers)
	}
	if Descriptor.MaxTestNodes != MaxWorkers {
		t.Errorf("the descriptor says %d test nodes, the provider makes %d", Descriptor.MaxTestNodes, MaxWorkers)
	}
}
