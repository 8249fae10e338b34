package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/skewtest/internal/testgate"
)

// A hybrid host's mountinfo: two v1 controllers (cpu mounted twice, the
// second time as a container's view of a subtree), v2 at unified, and a
// tmpfs that is no hierarchy.
func TestHierarchiesAndOwned(t *testing.T) {
	root := t.TempDir()
	cpu, cpu2, mem, uni := filepath.Join(root, "cpu"), filepath.Join(root, "cpu-again"), filepath.Join(root, "memory"), filepath.Join(root, "unified")
	lines := fmt.Sprintf(`30 25 0:26 / %s rw,nosuid - tmpfs tmpfs rw
31 30 0:27 / %s rw - cgroup cgroup rw,cpu,cpuacct
32 30 0:27 / %s rw - cgroup cgroup rw,cpu,cpuacct
33 30 0:28 / %s rw - cgroup cgroup rw,memory
34 30 0:29 / %s rw - cgroup2 cgroup2 rw,nsdelegate
35 30 0:28 /docker/abc %s rw - cgroup cgroup rw,memory
`, root, cpu, cpu2, mem, uni, filepath.Join(root, "view"))
	mi := filepath.Join(root, "mountinfo")
	if err := os.WriteFile(mi, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	hs, err := Mounted(mi)
	if err != nil {
		t.Fatal(err)
	}
	want := []Hierarchy{{cpu, 1}, {mem, 1}, {uni, 2}}
	if !reflect.DeepEqual(hs, want) {
		t.Fatalf("Mounted = %+v, want %+v", hs, want)
	}
	for _, d := range []string{
		"cpu/skewtest-ab12/kubepods/burstable", "cpu/other/skewtest-dockerd-1", "cpu/other/not-skewtest",
		"memory/user.slice", "unified/system.slice/skewtest-run.scope", "unified/skewtest-ab12",
	} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A file named like a cgroup is no cgroup.
	if err := os.WriteFile(filepath.Join(mem, "skewtest-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := Owned(hs, "skewtest-")
	wantOwned := []string{
		filepath.Join(cpu, "other/skewtest-dockerd-1"), filepath.Join(cpu, "skewtest-ab12"),
		filepath.Join(uni, "skewtest-ab12"), filepath.Join(uni, "system.slice/skewtest-run.scope"),
	}
	if !reflect.DeepEqual(got, wantOwned) {
		t.Errorf("Owned = %q, want %q", got, wantOwned)
	}
}

// On this host: a cgroup made in every hierarchy is found in every one.
func TestOwnedOnThisHost(t *testing.T) {
	testgate.RequireRoot(t, "makes a cgroup in every hierarchy")
	hs, err := Mounted("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) == 0 {
		t.Fatal("no cgroup hierarchy mounted on this host")
	}
	// Not named skewtest-*: the host footprint another package's test may
	// compare meanwhile counts those cgroups as a run's.
	name := fmt.Sprintf("gotest-walk-%d", os.Getpid())
	var made []string
	for _, h := range hs {
		d := filepath.Join(h.MountPoint, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("make cgroup: %v", err)
		}
		made = append(made, d)
	}
	t.Cleanup(func() {
		for _, d := range made {
			os.Remove(d)
		}
	})
	got := map[string]bool{}
	for _, d := range Owned(hs, name) {
		got[d] = true
	}
	for _, d := range made {
		if !got[d] {
			t.Errorf("Owned missed %s; found %v", d, got)
		}
	}
}
