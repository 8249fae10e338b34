package local

import (
	"os"
	"path/filepath"
	"testing"
)

// What `skewtest clean` takes for a local run: a local state naming the
// nodes of the run the directory's name gives.
func TestCheckRunDir(t *testing.T) {
	root := t.TempDir()
	mk := func(name, st string) string {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if st != "" {
			if err := os.WriteFile(filepath.Join(d, stateFile), []byte(st), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	good := mk(fakeRunID, "")
	if err := writeState(good, state{Nodes: []nodeState{layoutOf(good, 0).state(fakeRunID), layoutOf(good, 1).state(fakeRunID)}}); err != nil {
		t.Fatal(err)
	}
	if err := CheckRunDir(good); err != nil {
		t.Errorf("CheckRunDir of a run's directory: %v", err)
	}
	legacy := mk("20000101-000000-wxyz", `{"cgroupRoot":"/skewtest-wxyz","bridge":"skwwxyz","cniNetwork":"skewtest-wxyz"}`)
	if err := CheckRunDir(legacy); err != nil {
		t.Errorf("CheckRunDir of a one-node run's older state: %v", err)
	}
	for name, st := range map[string]string{
		"my-notes":             "",
		"broken":               "{",
		"not-json-object":      `["nodes"]`,
		"empty":                `{}`,
		"other-tool":           `{"version":3,"items":[]}`,
		"20000101-000000-aaaa": `{"nodes":[{"name":"skewtest-worker","cniNetwork":"skewtest-tzqx"}]}`, // another run's state
	} {
		if err := CheckRunDir(mk(name, st)); err == nil {
			t.Errorf("CheckRunDir(%s with state %q) = nil, want it refused", name, st)
		}
	}
}
