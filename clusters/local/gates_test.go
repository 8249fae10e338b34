package local

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// A plan's entries give the local kubelet their feature gates through
// nodes.WithKubeletFeatureGates, as the reconstruction scenario does at
// each swap: the configuration file the next start reads carries exactly
// the entry's gates, as a KubeletConfiguration decodes them, and an entry
// without gates after one with them takes them out.
func TestPlanGatesReachTheKubeletConfig(t *testing.T) {
	dir := t.TempDir()
	p := &Provider{dir: dir, nodeIP: net.IPv4(192, 0, 2, 10)}
	if !slices.Contains(Descriptor.NodeCapabilities, nodes.KubeletFeatureGates) || Descriptor.GatesRefused != "" {
		t.Fatalf("the local descriptor does not say its nodes take a plan's gates (%v, %q), so runs with gates would be refused", Descriptor.NodeCapabilities, Descriptor.GatesRefused)
	}
	n, err := p.newNode(0, layoutOf(dir, 0).state(testRunID), nodePorts{kubelet: 1, kubeletHealthz: 2}, binaries.Binary{})
	if err != nil {
		t.Fatal(err)
	}
	kubelet := filepath.Join(t.TempDir(), "kubelet-v1.28.15")
	if err := os.WriteFile(kubelet, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := binaries.Binary{Component: "kubelet", Version: "v1.28.15", Path: kubelet}
	ctx := context.Background()

	readGates := func() map[string]bool {
		t.Helper()
		b, err := os.ReadFile(n.configFile(version.MustParseSemantic(bin.Version)))
		if err != nil {
			t.Fatal(err)
		}
		// The fields of k8s.io/kubelet/config/v1beta1.KubeletConfiguration
		// this test reads (that package needs modules go.mod does not
		// list): featureGates is a map[string]bool there too.
		var kc struct {
			APIVersion   string          `json:"apiVersion"`
			Kind         string          `json:"kind"`
			FeatureGates map[string]bool `json:"featureGates"`
		}
		if err := yaml.Unmarshal(b, &kc); err != nil {
			t.Fatalf("the kubelet config is not YAML: %v\n%s", err, b)
		}
		if kc.APIVersion != "kubelet.config.k8s.io/v1beta1" || kc.Kind != "KubeletConfiguration" {
			t.Fatalf("not a KubeletConfiguration: %s %s", kc.APIVersion, kc.Kind)
		}
		return kc.FeatureGates
	}
	pl := mustPlan(t)
	for i := range pl.Versions {
		if err := n.SwapKubelet(ctx, bin); err != nil {
			t.Fatal(err)
		}
		if err := n.SetKubeletFeatureGates(ctx, pl.GatesOf(i)); err != nil {
			t.Fatal(err)
		}
		if got, want := readGates(), pl.GatesOf(i); !reflect.DeepEqual(got, want) {
			t.Errorf("entry %s: the config sets featureGates %v, want %v", pl.Entry(i), got, want)
		}
	}
	// Two gates, in the config's own order (sorted).
	if err := n.SetKubeletFeatureGates(ctx, map[string]bool{"SELinuxMountReadWriteOncePod": true, "NewVolumeManagerReconstruction": false}); err != nil {
		t.Fatal(err)
	}
	if got := readGates(); len(got) != 2 || got["NewVolumeManagerReconstruction"] || !got["SELinuxMountReadWriteOncePod"] {
		t.Errorf("two gates: %v", got)
	}
}

func mustPlan(t *testing.T) plan.Plan {
	t.Helper()
	p, err := plan.Parse("v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.15")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
