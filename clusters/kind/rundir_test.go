package kind

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
)

// clusterName, which CheckRunDir looks for in a kubeconfig, is the name
// New gives the cluster.
func TestClusterNameIsNews(t *testing.T) {
	for _, id := range []string{"20000101-000000-ab12", "abc"} {
		p, err := New(Config{RunID: id, RunRoot: t.TempDir(), APIServerVersion: version.MustParseGeneric("1.36.0"),
			Kubelets: []binaries.Binary{{Component: "kubelet", Version: "v1.36.0", Path: "/nonexistent/kubelet"}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := clusterName(id); got != p.name {
			t.Errorf("clusterName(%q) = %q, New named it %q", id, got, p.name)
		}
	}
}

func TestCheckRunDir(t *testing.T) {
	root := t.TempDir()
	write := func(p, c string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := func(ctx string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Config\ncontexts:\n- name: %s\n  context: {cluster: %s}\n", ctx, ctx)
	}
	ok := map[string]func(dir string){
		"kind-20000101-000000-aaa1": func(d string) { write(filepath.Join(d, "kubeconfig"), kubeconfig("kind-skewtest-aaa1")) },
		"kind-20000101-000000-aaa2": func(d string) {
			write(filepath.Join(d, "docker", "state.json"), fmt.Sprintf(`{"dir":%q}`, filepath.Join(d, "docker")))
		},
		"kind-20000101-000000-aaa3": func(d string) { write(filepath.Join(d, "docker", "state.json"), `{"dir":`) }, // damaged: Clean keeps it
	}
	bad := map[string]func(dir string){
		"kind-20000101-000000-bbb1": func(d string) { write(filepath.Join(d, "notes"), "") },
		"kind-20000101-000000-bbb2": func(d string) { write(filepath.Join(d, "kubeconfig"), kubeconfig("kind-skewtest-zzzz")) },
		"kind-20000101-000000-bbb3": func(d string) {
			write(filepath.Join(d, "docker", "state.json"), `{"dir":"/var/lib/skewtest/kind-other/docker"}`)
		},
		"not-kind": func(d string) { write(filepath.Join(d, "kubeconfig"), kubeconfig("kind-skewtest-kind")) },
	}
	for name, mk := range ok {
		d := filepath.Join(root, name)
		mk(d)
		if err := CheckRunDir(d); err != nil {
			t.Errorf("CheckRunDir(%s) = %v, want it taken for a kind run", name, err)
		}
	}
	for name, mk := range bad {
		d := filepath.Join(root, name)
		mk(d)
		if err := CheckRunDir(d); err == nil {
			t.Errorf("CheckRunDir(%s) = nil, want it refused", name)
		}
	}
}

// A run on the host's Docker records its cluster's name before creating
// it; clean after a kill deletes that cluster by name (only that one) and
// then the directory. A private dockerd's run records it too, and clean
// leaves the host's Docker alone for it.
func TestCleanDeletesTheRecordedHostCluster(t *testing.T) {
	var deleted []string
	old := deleteHostCluster
	deleteHostCluster = func(_ context.Context, name, kubeconfig string) error {
		deleted = append(deleted, name+" "+filepath.Base(kubeconfig))
		return nil
	}
	t.Cleanup(func() { deleteHostCluster = old })
	for _, host := range []bool{true, false} {
		deleted = nil
		id := "20261202-150000-cd34"
		dir := filepath.Join(t.TempDir(), RunDirPrefix+id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeState(dir, State{RunID: id, Cluster: clusterName(id), HostDocker: host}); err != nil {
			t.Fatal(err)
		}
		if err := CheckRunDir(dir); err != nil {
			t.Fatalf("hostDocker %v: CheckRunDir: %v", host, err)
		}
		if err := Clean(context.Background(), dir); err != nil {
			t.Fatalf("hostDocker %v: Clean: %v", host, err)
		}
		want := []string(nil)
		if host {
			want = []string{clusterName(id) + " kubeconfig"}
		}
		if fmt.Sprint(deleted) != fmt.Sprint(want) {
			t.Errorf("hostDocker %v: deleted %v, want %v", host, deleted, want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("hostDocker %v: the run directory after Clean: %v", host, err)
		}
	}
}
