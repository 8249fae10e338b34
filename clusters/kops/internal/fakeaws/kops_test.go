package fakeaws

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeAPI is the Node cluster's API server as far as delete cluster reads
// it: namespaces, PVs and StorageClasses, each old (the Node's own) or
// made by the run after update cluster, and the deletes it was asked for.
type nodeAPI struct {
	mu      sync.Mutex
	old     time.Time
	made    time.Time
	gone    map[string]bool
	deletes []string
}

func (a *nodeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.Method == http.MethodDelete {
		a.deletes = append(a.deletes, r.URL.Path)
		a.gone[r.URL.Path] = true
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
		return
	}
	// Each list, by path: its objects' names, and whether the run made each.
	lists := map[string]map[string]bool{
		"/api/v1/namespaces":                     {"default": false, "kube-system": false, "skewtest": true},
		"/api/v1/persistentvolumes":              {"owners-pv": false, "skewtest-pv-0": true},
		"/apis/storage.k8s.io/v1/storageclasses": {"standard": false, "skewtest-csi": true},
	}
	names, ok := lists[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	// The typed clients decode a list's items from their metadata alone.
	var items []map[string]metav1.ObjectMeta
	for name, byRun := range names {
		if a.gone[r.URL.Path+"/"+name] {
			continue
		}
		t := a.old
		if byRun {
			t = a.made
		}
		items = append(items, map[string]metav1.ObjectMeta{"metadata": {Name: name, CreationTimestamp: metav1.NewTime(t)}})
	}
	body := map[string]any{"items": items}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}

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
	api := &nodeAPI{old: time.Now().Add(-time.Hour), gone: map[string]bool{}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	kc := write("node.kubeconfig", fmt.Sprintf("apiVersion: v1\nkind: Config\n# the node's\nclusters:\n- name: node\n  cluster:\n    server: %s\ncontexts:\n- name: node\n  context:\n    cluster: node\n    user: admin\ncurrent-context: node\nusers:\n- name: admin\n  user:\n    token: t\n", srv.URL))
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
	var stderr strings.Builder
	kops := func(args ...string) int { return Kops(store, args, env, io.Discard, &stderr) }
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
	api.mu.Lock()
	api.made = time.Now().Add(time.Second)
	api.mu.Unlock()
	if c := kops("delete", "cluster", "--name", name, "--yes"); c != 0 {
		t.Fatalf("delete: exit %d: %s", c, stderr.String())
	}
	slices.Sort(api.deletes)
	want := []string{"/api/v1/namespaces/skewtest", "/api/v1/persistentvolumes/skewtest-pv-0", "/apis/storage.k8s.io/v1/storageclasses/skewtest-csi"}
	if !slices.Equal(api.deletes, want) {
		t.Errorf("delete cluster deleted %q in the machine's cluster, want %q (what the run made, not the machine's own)", api.deletes, want)
	}
	if b, _ := os.ReadFile(auth); string(b) != own {
		t.Errorf("authorized_keys after delete: %q, want %q", b, own)
	}
}
