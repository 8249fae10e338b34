package local

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

func TestRemoveCNIEntries(t *testing.T) {
	cni := t.TempDir()
	root := t.TempDir()
	run, gone, other := filepath.Join(root, "run-a"), filepath.Join(root, "run-gone"), filepath.Join(root, "run-kept")
	for _, d := range []string{run, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	netns := func(runDir string) string {
		return `{"kind":"cniCacheV1","netns":"` + runDir + `/containerd/state/io.containerd.grpc.v1.cri/netns/cni-1"}`
	}
	files := map[string]string{
		"cni-loopback-aaa-lo":    netns(run),                         // this run's pod, loopback
		"skewtest-ab12-aaa-eth0": netns(run),                         // this run's pod, its bridge
		"skewtest-ab12-bbb-eth0": `{}`,                               // this run's network, unreadable netns
		"cni-loopback-ccc-lo":    netns(gone),                        // a run whose directory is gone
		"cni-loopback-ddd-lo":    netns(other),                       // a run still there (kept)
		"cni-loopback-eee-lo":    netns("/var/lib/containerd/netns"), // the host's
		"mynet-fff-eth0":         `not json`,
	}
	results := filepath.Join(cni, "results")
	if err := os.MkdirAll(results, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(results, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	left := func() []string {
		es, _ := os.ReadDir(results)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		sort.Strings(out)
		return out
	}
	n, err := removeCNIEntries(cni, run, []string{"skewtest-ab12"})
	if err != nil || n != 3 {
		t.Errorf("removeCNIEntries = %d, %v; want 3 removed", n, err)
	}
	if want := []string{"cni-loopback-ccc-lo", "cni-loopback-ddd-lo", "cni-loopback-eee-lo", "mynet-fff-eth0"}; !reflect.DeepEqual(left(), want) {
		t.Errorf("left %q, want %q", left(), want)
	}
	n, err = removeOrphanedCNIEntries(cni, root)
	if err != nil || n != 1 {
		t.Errorf("removeOrphanedCNIEntries = %d, %v; want 1 removed", n, err)
	}
	if want := []string{"cni-loopback-ddd-lo", "cni-loopback-eee-lo", "mynet-fff-eth0"}; !reflect.DeepEqual(left(), want) {
		t.Errorf("left %q, want %q", left(), want)
	}
	// A cache directory the run made goes once empty; one with files stays.
	removeEmptyDirs(cni)
	if _, err := os.Stat(results); err != nil {
		t.Errorf("removeEmptyDirs removed a directory with files: %v", err)
	}
	for _, name := range left() {
		os.Remove(filepath.Join(results, name))
	}
	removeEmptyDirs(cni)
	if _, err := os.Stat(cni); !os.IsNotExist(err) {
		t.Errorf("empty cache directory still there: %v", err)
	}
}
