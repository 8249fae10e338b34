package existing

import (
	"strings"
	"testing"
)

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// The provider's settings, as skewtest run reads them.
func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	c, err := ConfigFromEnv(mapEnv(map[string]string{
		"KUBECONFIG": "/k/config", "KUBELET_BINARY": "/opt/kubelet", "KUBELET_UNIT": "kubelet2", "KUBELET_ROOT_DIR": "/k/root",
		"SSH_USER": "ops", "SSH_KEY": "/k/id", "SSH_KNOWN_HOSTS": "/k/known_hosts", "NODES": "node-a, node-b,,",
		"SSH_ADDRESSES": "node-a=127.0.0.1:2222, node-b=[::1]:22", "KUBELET_HEALTHZ_URL": "http://127.0.0.1:10348/healthz",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Kubeconfig != "/k/config" || c.KubeletBinary != "/opt/kubelet" || c.KubeletUnit != "kubelet2" || c.KubeletRootDir != "/k/root" ||
		c.SSH.User != "ops" || c.SSH.KeyFile != "/k/id" || c.SSH.KnownHostsFile != "/k/known_hosts" {
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
	if c, err := ConfigFromEnv(mapEnv(nil)); err != nil || c.Nodes != nil || c.SSH.Address != nil {
		t.Errorf("empty environment: %+v, %v; want zero settings", c, err)
	}
	for _, bad := range []string{"node-a", "node-a=10.0.0.1", "=10.0.0.1:22"} {
		_, err := ConfigFromEnv(mapEnv(map[string]string{"SSH_ADDRESSES": bad}))
		if err == nil || !strings.Contains(err.Error(), "SSH_ADDRESSES=") || !strings.Contains(err.Error(), "want NODE=HOST:PORT") {
			t.Errorf("SSH_ADDRESSES=%s: %v, want an error naming it and the form", bad, err)
		}
	}
}
