package existing

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/registry"
	"sigs.k8s.io/skewtest/clusters/storage"
)

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// The provider's settings, as skewtest run reads them.
func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	c, err := configFromEnv(mapEnv(map[string]string{
		"KUBECONFIG": "/k/config", "KUBELET_BINARY": "/opt/kubelet", "KUBELET_UNIT": "kubelet2", "KUBELET_ROOT_DIR": "/k/root",
		"SSH_USER": "ops", "SSH_KEY": "/k/id", "SSH_KNOWN_HOSTS": "/k/known_hosts", "NODES": "node-a, node-b,,",
		"SSH_ADDRESSES": "node-a=127.0.0.1:2222, node-b=[::1]:22", "KUBELET_HEALTHZ_URL": "http://127.0.0.1:10348/healthz",
		"STORAGE_CLASS": "fast", "IMAGE": "mirror.example/busybox:1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Kubeconfig != "/k/config" || c.KubeletBinary != "/opt/kubelet" || c.KubeletUnit != "kubelet2" || c.KubeletRootDir != "/k/root" ||
		c.SSH.User != "ops" || c.SSH.KeyFile != "/k/id" || c.SSH.KnownHostsFile != "/k/known_hosts" ||
		c.StorageClass != "fast" || c.Image != "mirror.example/busybox:1" {
		t.Errorf("Config = %+v", c)
	}
	if got := c.layout().HealthzURL; got != "http://127.0.0.1:10348/healthz" {
		t.Errorf("KUBELET_HEALTHZ_URL: the nodes' layout polls %q", got)
	}
	if got := strings.Join(c.Nodes, "|"); got != "node-a|node-b" {
		t.Errorf("Nodes = %q, want [node-a node-b]", c.Nodes)
	}
	if c.SSH.Address == nil {
		t.Fatal("SSH_ADDRESSES did not set SSH.Address")
	}
	for node, want := range map[string]string{"node-a": "127.0.0.1:2222", "node-b": "[::1]:22", "node-c": ""} {
		if got := c.SSH.Address(node); got != want {
			t.Errorf("SSH.Address(%q) = %q, want %q", node, got, want)
		}
	}
	if c, err := configFromEnv(mapEnv(nil)); err != nil || c.Nodes != nil || c.SSH.Address != nil {
		t.Errorf("empty environment: %+v, %v; want zero settings", c, err)
	}
	for _, bad := range []string{"node-a", "node-a=10.0.0.1", "=10.0.0.1:22"} {
		_, err := configFromEnv(mapEnv(map[string]string{"SSH_ADDRESSES": bad}))
		if err == nil || !strings.Contains(err.Error(), "SSH_ADDRESSES=") || !strings.Contains(err.Error(), "want NODE=HOST:PORT") {
			t.Errorf("SSH_ADDRESSES=%s: %v, want an error naming it and the form", bad, err)
		}
	}
}

// STORAGE_CLASS is the provider's own setting, refused by its check (run
// before anything is built) when unset; the workload's class and image
// are the provider's answers to the capabilities that ask for them.
func TestStorageClassAndImage(t *testing.T) {
	t.Parallel()
	err := Descriptor.Check(context.Background(), registry.Options{}, Config{Kubeconfig: "/k/config"})
	if err == nil || !strings.Contains(err.Error(), "STORAGE_CLASS is not set") {
		t.Errorf("no STORAGE_CLASS: check says %v, want it refused by name", err)
	}
	if err := Descriptor.Check(context.Background(), registry.Options{}, Config{StorageClass: "fast"}); err != nil {
		t.Errorf("STORAGE_CLASS=fast: %v", err)
	}
	p := &provider{cfg: Config{StorageClass: "fast"}}
	if p.StorageClass() != "fast" || p.WorkloadImage() != storage.StockImage {
		t.Errorf("class %q, image %q; want fast and the stock image", p.StorageClass(), p.WorkloadImage())
	}
	p.cfg.Image = "mirror.example/busybox:1"
	if p.WorkloadImage() != "mirror.example/busybox:1" {
		t.Errorf("IMAGE set: image %q", p.WorkloadImage())
	}
}
