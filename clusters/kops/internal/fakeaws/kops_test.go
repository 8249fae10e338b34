package fakeaws

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With a Node, the worker kops update cluster makes is that machine: its
// addresses and host keys, the cluster's SSH key installed beside the
// machine's own keys, its kubeconfig; kops delete cluster takes out that
// key and nothing else.
func TestKopsWithANodeUsesTheMachine(t *testing.T) {
	dir := t.TempDir()
	store := &Store{Path: filepath.Join(dir, "world.json")}
	auth := filepath.Join(dir, "authorized_keys")
	own := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOwn own@host\n"
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("authorized_keys", own)
	kc := write("node.kubeconfig", "apiVersion: v1\nkind: Config\n# the node's\n")
	pub := write("id.pub", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIRun skewtest-run\n")
	if err := store.Update(func(w *World) error {
		w.Node = &Node{PublicIP: "10.0.2.15", PrivateIP: "10.0.2.15", HostKeys: []string{"ssh-ed25519 AAAAhost root@guest"}, SSHUser: "root", AuthorizedKeys: auth, Kubeconfig: kc}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	runKubeconfig := filepath.Join(dir, "run.kubeconfig")
	env := func(k string) string {
		if k == "KUBECONFIG" {
			return runKubeconfig
		}
		return ""
	}
	kops := func(args ...string) int { return Kops(store, args, env, io.Discard, io.Discard) }
	name := "skewtest-x.k8s.local"
	if c := kops("create", "cluster", "--name", name, "--ssh-public-key", pub); c != 0 {
		t.Fatalf("create: exit %d", c)
	}
	if c := kops("update", "cluster", "--name", name, "--yes", "--admin"); c != 0 {
		t.Fatalf("update: exit %d", c)
	}
	b, _ := os.ReadFile(auth)
	if !strings.HasPrefix(string(b), own) || !strings.Contains(string(b), "AAAAIRun fake-kops:"+name) {
		t.Errorf("authorized_keys after update: %q", b)
	}
	if got, _ := os.ReadFile(runKubeconfig); !strings.Contains(string(got), "the node's") {
		t.Errorf("the run's kubeconfig is %q, not the node's", got)
	}
	w, _ := store.Read()
	var worker *Instance
	for _, i := range w.Instances {
		if _, ok := i.Tags[tagRoleNode]; ok {
			worker = i
		}
	}
	if worker == nil || worker.PublicIP != "10.0.2.15" || !strings.Contains(worker.Console, hostKeysBegin+"\nssh-ed25519 AAAAhost root@guest\n"+hostKeysEnd) {
		t.Fatalf("worker: %+v", worker)
	}
	if c := kops("delete", "cluster", "--name", name, "--yes"); c != 0 {
		t.Fatalf("delete: exit %d", c)
	}
	if b, _ := os.ReadFile(auth); string(b) != own {
		t.Errorf("authorized_keys after delete: %q, want %q", b, own)
	}
}
