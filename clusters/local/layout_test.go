package local

import (
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
)

const testRunID = "20261201-005310-1a2b"

func TestNodeNames(t *testing.T) {
	for n, want := range map[int]string{
		1: "skewtest-worker",
		3: "skewtest-worker skewtest-worker2 skewtest-worker3",
		4: "skewtest-worker skewtest-worker2 skewtest-worker3 skewtest-worker4",
	} {
		if got := strings.Join(NodeNames(n), " "); got != want {
			t.Errorf("NodeNames(%d) = %s, want %s", n, got, want)
		}
	}
}

// The first node is laid out exactly as the one node was before clusters
// had several: reports, tests and `skewtest clean` name these paths.
func TestFirstNodeKeepsSingleNodeLayout(t *testing.T) {
	dir := "/var/lib/skewtest/" + testRunID
	l := layoutOf(dir, 0)
	for got, want := range map[string]string{
		l.name:                                    "skewtest-worker",
		l.kubeletRoot():                           dir + "/kubelet",
		l.kubeletConfigDir():                      dir + "/kubelet-config",
		l.podLogs():                               dir + "/pod-logs",
		l.flexvolume():                            dir + "/flexvolume",
		l.containerdSocket():                      dir + "/containerd/containerd.sock",
		l.cniDir():                                dir + "/cni",
		l.kubeconfig():                            dir + "/kubeconfig/kubelet.kubeconfig",
		l.kubeletPIDFile():                        dir + "/pids/kubelet.pid",
		l.kubeletLog(2, "v1.36.3"):                dir + "/logs/kubelet-2-v1.36.3.log",
		l.containerdName():                        "containerd",
		l.podSubnet():                             "10.244.0.0/24",
		l.state(testRunID).CgroupRoot:             "/skewtest-1a2b",
		l.state(testRunID).Bridge:                 "skw1a2b",
		l.state(testRunID).CNINetwork:             "skewtest-1a2b",
		l.state(testRunID).Name:                   NodeName,
		layoutOf(dir, 2).kubeletRoot():            dir + "/kubelet3",
		layoutOf(dir, 2).kubeletLog(1, "v1.34.4"): dir + "/logs/kubelet3-1-v1.34.4.log",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

// No two nodes share a path, a host object or a port's owner: two kubelets
// on one containerd, cgroup root or bridge would fight over the pods.
func TestNodesShareNothing(t *testing.T) {
	dir := filepath.Join(DefaultRunRoot, testRunID)
	seen := map[string]string{}
	claim := func(node, what, v string) {
		t.Helper()
		if other, ok := seen[v]; ok {
			t.Errorf("%s of %s is %q, already taken by %s", what, node, v, other)
		}
		seen[v] = node + " " + what
	}
	var dirs []string
	for i := range MaxNodes {
		l := layoutOf(dir, i)
		st := l.state(testRunID)
		for what, v := range map[string]string{
			"name": l.name, "kubelet root": l.kubeletRoot(), "kubelet config": l.kubeletConfigDir(),
			"pod logs": l.podLogs(), "flexvolume": l.flexvolume(), "containerd dir": l.containerdDir(),
			"cni dir": l.cniDir(), "kubeconfig": l.kubeconfig(), "pid file": l.kubeletPIDFile(),
			"log": l.kubeletLog(1, "v1.37.2"), "containerd": l.containerdName(), "subnet": l.podSubnet(),
			"cgroup root": st.CgroupRoot, "bridge": st.Bridge, "cni network": st.CNINetwork,
		} {
			claim(l.name, what, v)
		}
		if len(st.Bridge) > 15 {
			t.Errorf("bridge name %q of %s is longer than the 15 bytes Linux allows", st.Bridge, l.name)
		}
		dirs = append(dirs, l.kubeletRoot(), l.containerdDir(), l.cniDir())
		// The CSI plugin's sockets live under the kubelet root.
		if _, err := csidriver.New(csidriver.Config{DriverName: csidriver.Name, NodeID: l.name, KubeletRoot: l.kubeletRoot()}); err != nil {
			t.Errorf("%s: %v", l.name, err)
		}
	}
	// Teardown globs CNI entries by network name and kills shims by socket
	// path: neither may match another node's.
	for _, a := range dirs {
		for _, b := range dirs {
			if a != b && strings.HasPrefix(b, a+"/") {
				t.Errorf("%s is inside another node's %s", b, a)
			}
		}
	}
	for i := range MaxNodes {
		for j := range MaxNodes {
			a, b := layoutOf(dir, i), layoutOf(dir, j)
			if i != j && strings.Contains(b.containerdSocket(), a.containerdSocket()) {
				t.Errorf("killing %s's shims (by %s) would kill %s's", a.name, a.containerdSocket(), b.name)
			}
			if na, nb := a.state(testRunID).CNINetwork, b.state(testRunID).CNINetwork; i != j && strings.HasPrefix(nb+"-x", na+"-") {
				t.Errorf("CNI network %s's cache glob %s-* matches %s's entries", na, na, nb)
			}
		}
	}
}

func TestNodeConfigsAreTheNodesOwn(t *testing.T) {
	dir := t.TempDir()
	p := &Provider{dir: dir, nodeIP: net.IPv4(192, 0, 2, 10)}
	ports, err := p.allocatePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	all := []int{p.ports.etcdClient, p.ports.etcdPeer, p.ports.apiserver, p.ports.controllerManager, p.ports.scheduler}
	var nodes []*Node
	for i, np := range ports {
		all = append(all, np.kubelet, np.kubeletHealthz)
		n, err := p.newNode(i, layoutOf(dir, i).state(testRunID), np, binaries.Binary{})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	slices.Sort(all)
	if len(slices.Compact(all)) != 5+2*3 {
		t.Errorf("allocatePorts(3) gave a port twice: %v %v", p.ports, ports)
	}
	v := version.MustParseSemantic("v1.36.3")
	for i, n := range nodes {
		kc := n.kubeletConfig(v)
		cc := n.containerdConfig("/shim")
		for _, want := range []string{
			"unix://" + n.l.containerdSocket(), "cgroupRoot: " + n.st.CgroupRoot, "podLogsDir: " + n.l.podLogs(),
			"volumePluginDir: " + n.l.flexvolume(), "address: 192.0.2.10",
		} {
			if !strings.Contains(kc, want) {
				t.Errorf("%s's kubelet config lacks %q:\n%s", n, want, kc)
			}
		}
		if !strings.Contains(kc, "\nport: "+strconv.Itoa(n.ports.kubelet)+"\n") || !strings.Contains(kc, "\nhealthzPort: "+strconv.Itoa(n.ports.kubeletHealthz)+"\n") {
			t.Errorf("%s's kubelet config does not use its ports %+v:\n%s", n, n.ports, kc)
		}
		for _, want := range []string{
			`root = "` + n.l.containerdDir() + `/root"`, `state = "` + n.l.containerdDir() + `/state"`,
			`address = "` + n.l.containerdSocket() + `"`, `conf_dir = "` + n.l.cniDir() + `/net.d"`,
			`Root = "` + n.l.containerdDir() + `/runc"`,
		} {
			if !strings.Contains(cc, want) {
				t.Errorf("%s's containerd config lacks %s:\n%s", n, want, cc)
			}
		}
		for j, other := range nodes {
			if i == j {
				continue
			}
			for _, theirs := range []string{other.l.containerdSocket(), other.st.CgroupRoot + "\n", other.l.podLogs() + "\n"} {
				if strings.Contains(kc, theirs) {
					t.Errorf("%s's kubelet config names %s's %s", n, other, theirs)
				}
			}
			if strings.Contains(cc, other.l.containerdDir()+"/") {
				t.Errorf("%s's containerd config names %s's directory", n, other)
			}
		}
	}
}

// The footprint lists run directories under its own copy of the run root.
func TestRunRootIsTheFootprints(t *testing.T) {
	if DefaultRunRoot != footprint.RunRoot {
		t.Errorf("DefaultRunRoot %s, footprint.RunRoot %s: a leaked run directory would go unseen", DefaultRunRoot, footprint.RunRoot)
	}
}

// The kubelet's node status interval, which also bounds its status and
// lease requests, stretches with the timeout factor.
func TestKubeletConfigScalesNodeStatusUpdates(t *testing.T) {
	v := version.MustParseSemantic("v1.37.2")
	for factor, want := range map[time.Duration]string{1: "nodeStatusUpdateFrequency: 2s\n", 10: "nodeStatusUpdateFrequency: 20s\n"} {
		n := &Node{p: &Provider{slow: factor, nodeIP: net.IPv4(10, 0, 2, 15)}}
		if got := n.kubeletConfig(v); !strings.Contains(got, want) {
			t.Errorf("factor %d: config lacks %q:\n%s", factor, want, got)
		}
	}
}
