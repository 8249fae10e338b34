package kind

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"regexp"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/tools/clientcmd"
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

// The workers join by a discovery file naming the control plane and
// holding the CA that the control plane is given, with the run's own
// token, which kubeadm init creates; kind's discovery by token is removed
// from the workers' JoinConfiguration.
func TestJoin(t *testing.T) {
	const cluster = "skewtest-ab12"
	j, err := writeJoin(t.TempDir(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(j.token) {
		t.Errorf("bootstrap token %q is not [a-z0-9]{6}.[a-z0-9]{16}", j.token)
	}
	if other, _ := writeJoin(t.TempDir(), cluster); other.token == j.token {
		t.Errorf("two runs got the same bootstrap token %q", j.token)
	}
	caPEM, err := os.ReadFile(j.caCert)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !ca.IsCA {
		t.Fatalf("%s is not a CA certificate: %v", j.caCert, err)
	}
	if fi, err := os.Stat(j.caKey); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("CA key %s: %v, mode %v; want 0600", j.caKey, err, fi.Mode().Perm())
	}
	disc, err := clientcmd.LoadFromFile(j.discovery)
	if err != nil {
		t.Fatal(err)
	}
	if len(disc.Clusters) != 1 || len(disc.AuthInfos) != 0 {
		t.Fatalf("discovery file: clusters %v, users %v; want one cluster and no credentials", disc.Clusters, disc.AuthInfos)
	}
	for _, c := range disc.Clusters {
		if c.Server != "https://"+cluster+"-control-plane:6443" || string(c.CertificateAuthorityData) != string(caPEM) {
			t.Errorf("discovery file names %s with CA %q; want the control plane and the cluster's CA", c.Server, c.CertificateAuthorityData)
		}
	}

	cfg := clusterConfig(clusterSpec{workers: 2, join: &j})
	cp := cfg.Nodes[0]
	if !slices.Equal(cp.ExtraMounts, []v1alpha4.Mount{
		{HostPath: j.caCert, ContainerPath: "/etc/kubernetes/pki/ca.crt", Readonly: true},
		{HostPath: j.caKey, ContainerPath: "/etc/kubernetes/pki/ca.key", Readonly: true},
	}) {
		t.Errorf("the control plane's mounts: %+v; want the CA, read-only, where kubeadm init looks for one", cp.ExtraMounts)
	}
	if len(cp.KubeadmConfigPatches) != 0 {
		t.Errorf("the control plane has patches of its own: %v", cp.KubeadmConfigPatches)
	}
	initPatches := patchesOf(t, cfg.KubeadmConfigPatches, "InitConfiguration")
	if len(initPatches) != 1 || len(initPatches[0]["bootstrapTokens"].([]any)) != 1 || initPatches[0]["bootstrapTokens"].([]any)[0].(map[string]any)["token"] != j.token {
		t.Errorf("InitConfiguration patches %v; want kubeadm init to create the run's token %s", initPatches, j.token)
	}
	for _, w := range cfg.Nodes[1:] {
		if !slices.Equal(w.ExtraMounts, []v1alpha4.Mount{{HostPath: j.discovery, ContainerPath: discoveryInNode, Readonly: true}}) {
			t.Errorf("a worker's mounts: %+v; want the discovery file, read-only", w.ExtraMounts)
		}
		jc := patchesOf(t, w.KubeadmConfigPatches, "JoinConfiguration")
		if len(jc) != 1 {
			t.Fatalf("a worker's patches: %v; want one JoinConfiguration", w.KubeadmConfigPatches)
		}
		d := jc[0]["discovery"].(map[string]any)
		if bt, set := d["bootstrapToken"]; !set || bt != nil {
			t.Errorf("discovery.bootstrapToken %v (set %v); want null, which removes kind's", bt, set)
		}
		if d["file"].(map[string]any)["kubeConfigPath"] != discoveryInNode || d["tlsBootstrapToken"] != j.token {
			t.Errorf("discovery %v; want the file at %s and the run's token", d, discoveryInNode)
		}
	}
	if len(cfg.Nodes[1].ExtraMounts) > 0 && &cfg.Nodes[1].ExtraMounts[0] == &cfg.Nodes[2].ExtraMounts[0] {
		t.Errorf("the workers share one mount list")
	}

	plain := clusterConfig(clusterSpec{workers: 1})
	if len(plain.Nodes[0].ExtraMounts)+len(plain.Nodes[1].ExtraMounts)+len(plain.Nodes[1].KubeadmConfigPatches) != 0 {
		t.Errorf("without a join, kind's own discovery is left as it is: %+v", plain)
	}
	for _, p := range patchesOf(t, plain.KubeadmConfigPatches, "InitConfiguration") {
		if _, set := p["bootstrapTokens"]; set {
			t.Errorf("without a join, kind's own bootstrap token is left as it is: %v", p)
		}
	}
}

// kubeadm init skips kind's preflight, as kind has it, and the CoreDNS
// addon; one InitConfiguration patch says so, whether the workers join by
// file or not (a merge patch replaces the list whole).
func TestClusterConfigSkipPhases(t *testing.T) {
	j, err := writeJoin(t.TempDir(), "skewtest-ab12")
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []clusterSpec{{workers: 1}, {workers: 3, join: &j}} {
		inits := patchesOf(t, clusterConfig(spec).KubeadmConfigPatches, "InitConfiguration")
		if len(inits) != 1 {
			t.Fatalf("%d InitConfiguration patches, want one: %v", len(inits), inits)
		}
		var phases []any
		phases, _ = inits[0]["skipPhases"].([]any)
		if !slices.Equal(phases, []any{"preflight", "addon/coredns"}) {
			t.Errorf("skipPhases %v, want kind's preflight and the CoreDNS addon", phases)
		}
	}
}
