package existing

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/skewtest/clusters/existing/internal/sshdtest"
	"sigs.k8s.io/skewtest/clusters/internal/filetest"
)

// fakeNode is a fake systemd node, named as one: this host has no systemd.
// It puts stand-ins for systemctl, journalctl and curl first in the test
// sshd's PATH, so the provider's real SSH commands drive a unit whose
// state lives in files under dir: "state" (active or inactive), "pid",
// "restarts", and "calls" (one line per systemctl call). The unit runs
// the real file Binary: a binary holding "crash" keeps being restarted,
// any other runs and answers /healthz. A binary that is a script is run:
// with "start" when the unit starts (a stand-in kubelet writing its
// checkpoint files under Root), and with "check" on every state read,
// where a non-zero exit is a kubelet that exits at once and is restarted.
// Binaries hold "kubelet <version>", which the fake API server reports as
// the node's kubelet version.
type fakeNode struct {
	dir    string
	Binary string
	// Root is the kubelet's --root-dir (Config.KubeletRootDir).
	Root string
}

func newFakeNode(t *testing.T, srv *sshdtest.Server, own string) *fakeNode {
	t.Helper()
	f := &fakeNode{dir: t.TempDir()}
	f.Binary = filepath.Join(f.dir, "usr", "local", "bin", "kubelet")
	if err := os.MkdirAll(filepath.Dir(f.Binary), 0o755); err != nil {
		t.Fatal(err)
	}
	filetest.Write(t, f.Binary, own, 0o755)
	f.Root = filepath.Join(f.dir, "var", "lib", "kubelet")
	if err := os.MkdirAll(f.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	filetest.Write(t, filepath.Join(f.dir, "state"), "active\n", 0o644)
	filetest.Write(t, filepath.Join(f.dir, "pid"), "100\n", 0o644)
	filetest.Write(t, filepath.Join(f.dir, "restarts"), "0\n", 0o644)
	systemctl := `#!/bin/sh
d=` + f.dir + `
b=` + f.Binary + `
echo "$*" >> "$d/calls"
script() { [ "$(head -c 2 "$b")" = "#!" ]; }
crash() { grep -q crash "$b" || { script && ! "$b" check >>"$d/kubelet.log" 2>&1; }; }
case "$1" in
stop) echo inactive > "$d/state"; echo 0 > "$d/pid" ;;
start) echo active > "$d/state"; echo 4242 > "$d/pid"; if script; then "$b" start >>"$d/kubelet.log" 2>&1; fi ;;
reset-failed) ;;
show)
  s=$(cat "$d/state"); r=$(cat "$d/restarts")
  if [ "$s" = active ] && crash; then r=$((r+1)); echo $r > "$d/restarts"; s=activating; fi
  echo "ActiveState=$s"; echo "SubState=x"; echo "MainPID=$(cat "$d/pid")"; echo "NRestarts=$r" ;;
*) echo "fake systemctl: $*" >&2; exit 1 ;;
esac
`
	filetest.Write(t, filepath.Join(srv.BinDir, "systemctl"), systemctl, 0o755)
	filetest.Write(t, filepath.Join(srv.BinDir, "journalctl"), "#!/bin/sh\necho \"journal of $2\"\necho \"E0101 flag provided but not defined: --foo\"\n", 0o755)
	curl := `#!/bin/sh
[ "$(cat ` + f.dir + `/state)" = active ] && ! grep -q crash ` + f.Binary + `
`
	filetest.Write(t, filepath.Join(srv.BinDir, "curl"), curl, 0o755)
	return f
}

// calls returns and forgets the systemctl calls so far.
func (f *fakeNode) calls() string {
	b, _ := os.ReadFile(filepath.Join(f.dir, "calls"))
	os.Remove(filepath.Join(f.dir, "calls"))
	return string(b)
}

func (f *fakeNode) state() string {
	b, _ := os.ReadFile(filepath.Join(f.dir, "state"))
	return strings.TrimSpace(string(b))
}

// running is the version of the kubelet the unit runs, "" when stopped.
func (f *fakeNode) running() string {
	if f.state() != "active" {
		return ""
	}
	b, _ := os.ReadFile(f.Binary)
	if m := kubeletVersion.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// kubeletVersion finds a stand-in kubelet's version in its content.
var kubeletVersion = regexp.MustCompile(`kubelet (v[0-9][^\s:]*)`)

// fakeAPIServer serves /version and the nodes a test sets; a node backed
// by a fakeNode is Ready, at the version of the kubelet it runs, only
// while its unit runs a kubelet that does not crash.
type fakeAPIServer struct {
	mu    sync.Mutex
	nodes []corev1.Node
	live  map[string]*fakeNode
	// namespaces that exist, with their labels (a namespace's UID is
	// "uid-" and its name); deleted, the ones a DELETE took out.
	namespaces map[string]map[string]string
	deleted    []string
}

// addNamespace makes namespace exist, with labels.
func (f *fakeAPIServer) addNamespace(name string, labels map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.namespaces == nil {
		f.namespaces = map[string]map[string]string{}
	}
	f.namespaces[name] = labels
}

// deletedNamespaces are the namespaces DELETE took out, in order.
func (f *fakeAPIServer) deletedNamespaces() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deleted)
}

// namespace answers GET and DELETE of one namespace; a DELETE whose UID
// precondition names another is refused, as the API server does.
func (f *fakeAPIServer) namespace(w http.ResponseWriter, r *http.Request, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	labels, ok := f.namespaces[name]
	uid := types.UID("uid-" + name)
	status := func(code int, reason metav1.StatusReason) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Reason: reason, Code: int32(code)})
	}
	if !ok {
		status(http.StatusNotFound, metav1.StatusReasonNotFound)
		return
	}
	if r.Method == http.MethodDelete {
		var opts metav1.DeleteOptions
		_ = json.NewDecoder(r.Body).Decode(&opts)
		if p := opts.Preconditions; p != nil && p.UID != nil && *p.UID != uid {
			status(http.StatusConflict, metav1.StatusReasonConflict)
			return
		}
		delete(f.namespaces, name)
		f.deleted = append(f.deleted, name)
	}
	_ = json.NewEncoder(w).Encode(corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid, Labels: labels}})
}

func (f *fakeAPIServer) setNodes(ns ...corev1.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = ns
}

// backBy makes node's status follow fn.
func (f *fakeAPIServer) backBy(node string, fn *fakeNode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live == nil {
		f.live = map[string]*fakeNode{}
	}
	f.live[node] = fn
}

func (f *fakeAPIServer) current() []corev1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]corev1.Node, len(f.nodes))
	for i, n := range f.nodes {
		n = *n.DeepCopy()
		if fn, ok := f.live[n.Name]; ok {
			v := fn.running()
			status := corev1.ConditionFalse
			if v != "" {
				status = corev1.ConditionTrue
				n.Status.NodeInfo.KubeletVersion = v
			}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "FakeNode"}}
		}
		out[i] = n
	}
	return out
}

func (f *fakeAPIServer) start(t *testing.T) string {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/version":
			_ = json.NewEncoder(w).Encode(map[string]string{"major": "1", "minor": "36", "gitVersion": "v1.36.3"})
		case r.URL.Path == "/api/v1/nodes":
			list := corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}, Items: f.current()}
			_ = json.NewEncoder(w).Encode(list)
		case strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/") && !strings.Contains(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"), "/"):
			f.namespace(w, r, strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"))
		case strings.HasPrefix(r.URL.Path, "/api/v1/nodes/"):
			name := strings.TrimPrefix(r.URL.Path, "/api/v1/nodes/")
			for _, n := range f.current() {
				if n.Name == name {
					n.TypeMeta = metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}
					_ = json.NewEncoder(w).Encode(n)
					return
				}
			}
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
