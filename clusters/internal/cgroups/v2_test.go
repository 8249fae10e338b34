package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeCgroup writes a fake cgroup v2 directory: a plain directory with the
// files MakeRoot reads (the kernel's own files do not exist in a temporary
// directory, and a write there only replaces the file's content, so the
// tests read back what was written).
func fakeCgroup(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const allControllers = "cpuset cpu io memory hugetlb pids rdma misc\n"

func TestMakeRootEnablesControllersAllTheWayDown(t *testing.T) {
	top := t.TempDir()
	fakeCgroup(t, top, map[string]string{"cgroup.controllers": allControllers, "cgroup.subtree_control": "\n"})
	// The kernel lists in a child's cgroup.controllers what its parent
	// enabled; the fake lists them from the start.
	child := map[string]string{"cgroup.controllers": "cpuset cpu io memory hugetlb pids\n", "cgroup.subtree_control": "\n",
		"cpuset.cpus.effective": "0-1\n", "cpuset.mems.effective": "0\n"}
	fakeCgroup(t, filepath.Join(top, "skewtest-1a2b"), child)
	fakeCgroup(t, filepath.Join(top, "skewtest-1a2b", "skewtest-worker"), child)

	if err := (Tree{Dir: top}).MakeRoot("/skewtest-1a2b/skewtest-worker"); err != nil {
		t.Fatal(err)
	}
	want := "+cpu +cpuset +memory +pids +hugetlb +io"
	for _, d := range []string{top, filepath.Join(top, "skewtest-1a2b"), filepath.Join(top, "skewtest-1a2b", "skewtest-worker")} {
		if got := read(t, filepath.Join(d, "cgroup.subtree_control")); got != want {
			t.Errorf("%s/cgroup.subtree_control = %q, want %q", d, got, want)
		}
	}
	// A cgroup with CPUs of its own keeps them.
	if _, err := os.Stat(filepath.Join(top, "skewtest-1a2b", "cpuset.cpus")); err == nil {
		t.Errorf("MakeRoot wrote cpuset.cpus of a cgroup that had CPUs")
	}
}

func TestMakeRootLeavesEnabledControllersAlone(t *testing.T) {
	top := t.TempDir()
	// systemd enabled them already; rdma stays as it is.
	on := "cpuset cpu io memory hugetlb pids rdma\n"
	fakeCgroup(t, top, map[string]string{"cgroup.controllers": allControllers, "cgroup.subtree_control": on})
	fakeCgroup(t, filepath.Join(top, "run"), map[string]string{"cgroup.controllers": on, "cgroup.subtree_control": "memory\n"})
	if err := (Tree{Dir: top}).MakeRoot("run"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(top, "cgroup.subtree_control")); got != on {
		t.Errorf("the top's subtree_control was rewritten to %q", got)
	}
	// Only what is missing is asked for.
	if got, want := read(t, filepath.Join(top, "run", "cgroup.subtree_control")), "+cpu +cpuset +pids +hugetlb +io"; got != want {
		t.Errorf("run/cgroup.subtree_control = %q, want %q", got, want)
	}
}

func TestMakeRootWithoutHugetlbOrIO(t *testing.T) {
	top := t.TempDir()
	ctrls := "cpuset cpu memory pids\n"
	fakeCgroup(t, top, map[string]string{"cgroup.controllers": ctrls, "cgroup.subtree_control": ""})
	fakeCgroup(t, filepath.Join(top, "run"), map[string]string{"cgroup.controllers": ctrls, "cgroup.subtree_control": ""})
	if err := (Tree{Dir: top}).MakeRoot("/run"); err != nil {
		t.Fatalf("a kernel without hugetlb and io: %v", err)
	}
	if got, want := read(t, filepath.Join(top, "run", "cgroup.subtree_control")), "+cpu +cpuset +memory +pids"; got != want {
		t.Errorf("run/cgroup.subtree_control = %q, want %q", got, want)
	}
}

func TestMakeRootRefuses(t *testing.T) {
	t.Run("a kernel without cpuset", func(t *testing.T) {
		top := t.TempDir()
		fakeCgroup(t, top, map[string]string{"cgroup.controllers": "cpu io memory pids\n", "cgroup.subtree_control": ""})
		err := (Tree{Dir: top}).MakeRoot("/run")
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "no cpuset controller") {
			t.Fatalf("MakeRoot = %v, want an *Error naming cpuset", err)
		}
		if _, err := os.Stat(filepath.Join(top, "run")); err == nil {
			t.Errorf("MakeRoot made the cgroup although it refused")
		}
	})
	t.Run("hugetlb not passed down", func(t *testing.T) {
		// The kernel has hugetlb, so the kubelet wants it in its cgroup
		// root; a parent that does not pass it down (as a systemd slice
		// may not) leaves the root without it.
		top := t.TempDir()
		fakeCgroup(t, top, map[string]string{"cgroup.controllers": allControllers, "cgroup.subtree_control": ""})
		fakeCgroup(t, filepath.Join(top, "run"), map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n", "cgroup.subtree_control": ""})
		err := (Tree{Dir: top}).MakeRoot("/run")
		if err == nil || !strings.Contains(err.Error(), "hugetlb") {
			t.Fatalf("MakeRoot = %v, want an error naming hugetlb", err)
		}
	})
	t.Run("a subtree_control the kernel refuses", func(t *testing.T) {
		top := t.TempDir()
		fakeCgroup(t, top, map[string]string{"cgroup.controllers": allControllers, "cgroup.subtree_control": ""})
		fakeCgroup(t, filepath.Join(top, "run"), map[string]string{"cgroup.controllers": allControllers, "cgroup.subtree_control": ""})
		// A read-only file stands for the kernel's refusal (EBUSY when the
		// cgroup holds processes); as root, a directory does.
		sc := filepath.Join(top, "run", "cgroup.subtree_control")
		if err := os.Remove(sc); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(sc, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sc, "x"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		err := (Tree{Dir: top}).MakeRoot("/run")
		var ce *Error
		if !errors.As(err, &ce) || ce.Path != filepath.Join(top, "run") {
			t.Fatalf("MakeRoot = %v, want an *Error on %s/run", err, top)
		}
	})
}

func TestMakeRootGivesCPUsToAnEmptyCpuset(t *testing.T) {
	top := t.TempDir()
	fakeCgroup(t, top, map[string]string{"cgroup.controllers": allControllers, "cgroup.subtree_control": "",
		"cpuset.cpus.effective": "0-3\n", "cpuset.mems.effective": "0\n"})
	fakeCgroup(t, filepath.Join(top, "run"), map[string]string{"cgroup.controllers": allControllers, "cgroup.subtree_control": "",
		"cpuset.cpus.effective": "\n", "cpuset.mems.effective": "\n"})
	if err := (Tree{Dir: top}).MakeRoot("/run"); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"cpuset.cpus": "0-3\n", "cpuset.mems": "0\n"} {
		if got := read(t, filepath.Join(top, "run", f)); got != want {
			t.Errorf("run/%s = %q, want the parent's %q", f, got, want)
		}
	}
}

func TestMakeV1Root(t *testing.T) {
	base := t.TempDir()
	cpuset, memory := filepath.Join(base, "cpuset"), filepath.Join(base, "memory")
	fakeCgroup(t, cpuset, map[string]string{"cpuset.cpus": "0-1\n", "cpuset.mems": "0\n"})
	fakeCgroup(t, memory, nil)
	if err := MakeV1Root([]string{cpuset, memory}, "/skewtest-1a2b"); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"cpuset.cpus": "0-1\n", "cpuset.mems": "0\n"} {
		if got := read(t, filepath.Join(cpuset, "skewtest-1a2b", f)); got != want {
			t.Errorf("cpuset/skewtest-1a2b/%s = %q, want %q", f, got, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(memory, "skewtest-1a2b")); err != nil || !fi.IsDir() {
		t.Errorf("memory/skewtest-1a2b not made: %v", err)
	}
	if got := Dirs([]string{cpuset, memory, filepath.Join(base, "pids")}, "/skewtest-1a2b"); len(got) != 2 {
		t.Errorf("Dirs = %v, want the two hierarchies that have it", got)
	}
	if got := Dirs([]string{cpuset}, "/"); got != nil {
		t.Errorf("Dirs of the top = %v, want none: it is the whole host", got)
	}
}

func TestSubtreeControlsAndRestore(t *testing.T) {
	top := t.TempDir()
	fakeCgroup(t, top, map[string]string{"cgroup.controllers": allControllers, "cgroup.subtree_control": "cpu memory pids\n"})
	fakeCgroup(t, filepath.Join(top, "system.slice"), map[string]string{"cgroup.controllers": "cpu memory pids\n", "cgroup.subtree_control": "memory\n"})
	fakeCgroup(t, filepath.Join(top, "other"), map[string]string{"cgroup.subtree_control": "cpu\n"})
	tree := Tree{Dir: top}
	before, err := tree.SubtreeControls("/system.slice/skewtest-1a2b.scope")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"/": {"cpu", "memory", "pids"}, "/system.slice": {"memory"}}
	if !reflect.DeepEqual(before, want) {
		t.Fatalf("SubtreeControls = %v, want %v (the scope, not made yet, is not the host's)", before, want)
	}
	// A run turned on hugetlb at the top and cpu, hugetlb in the slice.
	fakeCgroup(t, top, map[string]string{"cgroup.subtree_control": "cpu memory pids hugetlb\n"})
	fakeCgroup(t, filepath.Join(top, "system.slice"), map[string]string{"cgroup.subtree_control": "cpu memory hugetlb\n"})
	if err := tree.Restore(before); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{"": "-hugetlb", "system.slice": "-cpu -hugetlb", "other": "cpu\n"} {
		if got := read(t, filepath.Join(top, dir, "cgroup.subtree_control")); got != want {
			t.Errorf("%s/cgroup.subtree_control = %q, want %q", dir, got, want)
		}
	}
	// Nothing changed since: nothing written.
	fakeCgroup(t, top, map[string]string{"cgroup.subtree_control": "cpu memory pids\n"})
	if err := tree.Restore(map[string][]string{"/": {"cpu", "memory", "pids"}, "/gone": {"cpu"}}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(top, "cgroup.subtree_control")); got != "cpu memory pids\n" {
		t.Errorf("Restore wrote %q with nothing to undo", got)
	}
}
