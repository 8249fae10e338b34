package kind

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

// patchesOf are the kubeadm config patches of kind kind among patches,
// each parsed.
func patchesOf(t *testing.T, patches []string, kind string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, p := range patches {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(p), &m); err != nil {
			t.Fatalf("patch %q: %v", p, err)
		}
		if m["kind"] == kind {
			out = append(out, m)
		}
	}
	return out
}

func TestClusterConfig(t *testing.T) {
	for workers := 1; workers <= MaxWorkers; workers++ {
		cfg := clusterConfig(clusterSpec{cgroupV1: true, workers: workers})
		roles := map[v1alpha4.NodeRole]int{}
		for _, n := range cfg.Nodes {
			roles[n.Role]++
		}
		if len(cfg.Nodes) != workers+1 || roles[v1alpha4.ControlPlaneRole] != 1 || roles[v1alpha4.WorkerRole] != workers {
			t.Errorf("%d workers: nodes %v, want one control plane and %d workers", workers, roles, workers)
		}
		if cfg.Nodes[0].Role != v1alpha4.ControlPlaneRole {
			t.Errorf("the control plane is not the first node: %v", cfg.Nodes[0].Role)
		}
	}
	for _, cgroupV1 := range []bool{true, false} {
		cfg := clusterConfig(clusterSpec{cgroupV1: cgroupV1, workers: 1})
		kc := patchesOf(t, cfg.KubeadmConfigPatches, "KubeletConfiguration")
		if len(kc) != 1 {
			t.Fatalf("want one KubeletConfiguration patch, got %v", cfg.KubeadmConfigPatches)
		}
		if v, _ := kc[0]["logging"].(map[string]any)["verbosity"].(float64); v != 2 {
			t.Errorf("the kubelets must log at level 2, where they name each volume they reconstruct: %v", kc[0])
		}
		if got, set := kc[0]["failCgroupV1"]; set != cgroupV1 || (set && got != false) {
			t.Errorf("cgroup v1 host %v: failCgroupV1 %v (set %v); cgroup v1 hosts need it false, others nothing", cgroupV1, got, set)
		}
	}
}

// From the version kind configures with kubeadm's v1beta4 API, the
// cluster's keys are ECDSA (encryptionAlgorithm); before it, where the
// field does not exist, nothing is patched.
func TestClusterConfigKeys(t *testing.T) {
	for _, tc := range []struct {
		v     string
		ecdsa bool
	}{{"v1.35.4", false}, {"v1.36.0", true}, {"v1.37.2", true}} {
		cfg := clusterConfig(clusterSpec{workers: 1, version: version.MustParseSemantic(tc.v)})
		var algorithms []any
		for _, cc := range patchesOf(t, cfg.KubeadmConfigPatches, "ClusterConfiguration") {
			algorithms = append(algorithms, cc["encryptionAlgorithm"])
		}
		want := []any(nil)
		if tc.ecdsa {
			want = []any{"ECDSA-P256"}
		}
		if !slices.Equal(algorithms, want) {
			t.Errorf("%s: ClusterConfiguration patches set encryptionAlgorithm %v, want %v", tc.v, algorithms, want)
		}
	}
}

// kubeadm init skips kind's preflight, as kind has it, and the CoreDNS
// addon, in one InitConfiguration patch (a merge patch replaces the list
// whole); the kube-proxy addon too, unless a pod needs Services (the
// hostpath driver's sidecars).
func TestClusterConfigSkipPhases(t *testing.T) {
	for _, tc := range []struct {
		spec clusterSpec
		want []any
	}{
		{clusterSpec{workers: 1}, []any{"preflight", "addon/coredns", "addon/kube-proxy"}},
		{clusterSpec{workers: 3, version: version.MustParseSemantic("v1.37.2")}, []any{"preflight", "addon/coredns", "addon/kube-proxy"}},
		{clusterSpec{workers: 1, kubeProxy: true}, []any{"preflight", "addon/coredns"}},
	} {
		cfg := clusterConfig(tc.spec)
		inits := patchesOf(t, cfg.KubeadmConfigPatches, "InitConfiguration")
		if len(inits) != 1 {
			t.Fatalf("%d InitConfiguration patches, want one: %v", len(inits), inits)
		}
		phases, _ := inits[0]["skipPhases"].([]any)
		if !slices.Equal(phases, tc.want) {
			t.Errorf("kube-proxy %v: skipPhases %v, want %v", tc.spec.kubeProxy, phases, tc.want)
		}
	}
	if initSkipPhases[len(initSkipPhases)-1] == kubeProxyPhase {
		t.Errorf("a config without kube-proxy changed the shared list: %v", initSkipPhases)
	}
}
