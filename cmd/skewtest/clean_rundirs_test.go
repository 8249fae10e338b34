package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/existing"
)

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func assertExists(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("clean removed %s: %v", path, err)
	}
}

func assertGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there after clean: %v", path, err)
	}
}

// existingRun writes an existing-cluster run's state, with no node to put
// back (so its clean reaches no node), acted on by owner.
func existingRun(t *testing.T, root, runID string, owner existing.Owner) string {
	t.Helper()
	dir := filepath.Join(root, existing.RunDirPrefix+runID)
	b, err := json.Marshal(existing.State{RunID: runID, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, existing.StateFile), string(b))
	return dir
}

// ownerOf is pid as the existing provider records the process acting on a
// run.
func ownerOf(t *testing.T, pid int) existing.Owner {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return existing.Owner{PID: pid, Start: start, BootID: strings.TrimSpace(string(boot)), PIDNamespace: ns}
}

// Looking through the run roots, clean takes a directory for a run only
// when it holds a state of its provider that parses and names the run:
// anything else there, with or without a provider's prefix, is named and
// left alone. Measured before: /var/lib/skewtest/my-notes/keep was removed.
func TestCleanLeavesWhatIsNotARun(t *testing.T) {
	root := t.TempDir()
	keep := map[string]string{
		"my-notes/keep":                          "notes",
		"looks-local/state.json":                 `{"version":3}`,
		"broken-local/state.json":                `{"nodes":[`,
		"kind-20000101-000000-tzqx/notes":        "no dockerd state, no kubeconfig",
		"kind-20000101-000000-tzqy/kubeconfig":   "apiVersion: v1\nkind: Config\ncontexts:\n- name: kind-other\n  context: {cluster: other}\n",
		"kops-20000101-000000-tzqx/notes":        "no kops state",
		"existing-run-a/state.json":              `{"runID":"run-b"}`,
		"existing-run-c/notes":                   "no existing state",
		"20000101-000000-tzqx/state.json":        `{"nodes":[{"name":"skewtest-worker","cniNetwork":"skewtest-tzqw"}]}`,
		"kind-20000101-000000-tzqz/docker/x.log": "",
	}
	for p, c := range keep {
		writeTestFile(t, filepath.Join(root, p), c)
	}
	// A run that is recognised and stale is still cleaned.
	stale := ownerOf(t, os.Getpid())
	stale.Start++ // the pid is another process's now
	gone := existingRun(t, root, "run-gone", stale)

	var out bytes.Buffer
	n, err := cleanRunRoots(t.Context(), slog.New(slog.DiscardHandler), &out, []string{root})
	if err != nil {
		t.Errorf("clean: %v", err)
	}
	if n != 1 {
		t.Errorf("clean cleaned %d run directories, want 1; it said:\n%s", n, out.String())
	}
	for p, c := range keep {
		assertExists(t, filepath.Join(root, p))
		if b, _ := os.ReadFile(filepath.Join(root, p)); string(b) != c {
			t.Errorf("%s changed to %q", p, b)
		}
		top := filepath.Join(root, strings.SplitN(p, "/", 2)[0])
		if !strings.Contains(out.String(), "not a skewtest run, left alone: "+top) {
			t.Errorf("clean did not name %s as left alone; it said:\n%s", top, out.String())
		}
	}
	assertGone(t, gone)
}

// An existing-cluster run takes no host lock: clean leaves it alone, and
// names it, while the process acting on it runs; one whose state does not
// say (written before the process was recorded) is cleaned only when it is
// named on the command line.
func TestCleanLeavesLiveExistingRuns(t *testing.T) {
	root := t.TempDir()
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	live := existingRun(t, root, "run-live", ownerOf(t, sleeper.Process.Pid))
	old := existingRun(t, root, "run-old", existing.Owner{})
	ctx, logger := t.Context(), slog.New(slog.DiscardHandler)

	var out bytes.Buffer
	n, err := cleanRunRoots(ctx, logger, &out, []string{root})
	if err != nil || n != 0 {
		t.Errorf("clean of the run roots = %d, %v; want nothing cleaned and no error", n, err)
	}
	assertExists(t, filepath.Join(live, existing.StateFile))
	assertExists(t, filepath.Join(old, existing.StateFile))
	if s := out.String(); !strings.Contains(s, "live run, left alone: "+live) || !strings.Contains(s, strconv.Itoa(sleeper.Process.Pid)) ||
		!strings.Contains(s, "cannot tell whether the run is live, left alone: "+old) || !strings.Contains(s, "skewtest clean "+old) {
		t.Errorf("clean said:\n%s\nwant %s named live (pid %d) and %s undecided, with the command that cleans it", s, live, sleeper.Process.Pid, old)
	}

	// Named, the undecided one is cleaned; the live one still is not.
	out.Reset()
	n, err = cleanRunDirs(ctx, logger, &out, []string{old}, true)
	if err != nil || n != 1 {
		t.Errorf("clean %s = %d, %v; want it cleaned", old, n, err)
	}
	assertGone(t, old)
	n, err = cleanRunDirs(ctx, logger, &out, []string{live}, true)
	if err == nil || n != 0 || !strings.Contains(err.Error(), "live run") {
		t.Errorf("clean %s = %d, %v; want a refusal naming the live run", live, n, err)
	}
	assertExists(t, filepath.Join(live, existing.StateFile))

	// Once its process is gone, the run is stale and cleaned.
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()
	if n, err := cleanRunRoots(ctx, logger, &out, []string{root}); err != nil || n != 1 {
		t.Errorf("clean after the run's process exited = %d, %v; want it cleaned", n, err)
	}
	assertGone(t, live)
}

// A directory given on the command line that is not a run is refused,
// and left as it is.
func TestCleanRefusesAGivenDirectoryThatIsNotARun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my-notes")
	writeTestFile(t, filepath.Join(dir, "keep"), "notes")
	var out bytes.Buffer
	n, err := cleanRunDirs(t.Context(), slog.New(slog.DiscardHandler), &out, []string{dir}, true)
	if err == nil || n != 0 || !strings.Contains(err.Error(), "not a skewtest run, left alone: "+dir) {
		t.Errorf("clean %s = %d, %v; want a refusal", dir, n, err)
	}
	assertExists(t, filepath.Join(dir, "keep"))
}

// What is recognised is still cleaned: a kind run on the host's Docker (a
// kubeconfig naming its cluster), a kind run with a private dockerd's
// state, and, as root, a local run. Their run IDs end in letters that are
// not hex, so the host objects their cleans look for can never be a real
// run's.
func TestCleanCleansRecognisedRuns(t *testing.T) {
	root := t.TempDir()
	hostDocker := filepath.Join(root, "kind-20000101-000000-tzqa")
	writeTestFile(t, filepath.Join(hostDocker, "kubeconfig"),
		"apiVersion: v1\nkind: Config\ncontexts:\n- name: kind-skewtest-tzqa\n  context: {cluster: kind-skewtest-tzqa}\n")
	private := filepath.Join(root, "kind-20000101-000000-tzqb")
	writeTestFile(t, filepath.Join(private, "docker", "state.json"), fmt.Sprintf(`{"dir":%q}`, filepath.Join(private, "docker")))
	want := 2
	var localRun string
	if os.Geteuid() == 0 {
		localRun = filepath.Join(root, "20000101-000000-tzqc")
		// containerdRunDirExisted: this test leaves the host's
		// /run/containerd out of it.
		writeTestFile(t, filepath.Join(localRun, "state.json"),
			`{"nodes":[{"name":"skewtest-worker","cgroupRoot":"/skewtest-tzqc","bridge":"skwtzqc","cniNetwork":"skewtest-tzqc"}],"containerdRunDirExisted":true}`)
		want++
	}
	var out bytes.Buffer
	n, err := cleanRunRoots(t.Context(), slog.New(slog.DiscardHandler), &out, []string{root})
	if err != nil || n != want {
		t.Errorf("clean = %d, %v; want %d cleaned; it said:\n%s", n, err, want, out.String())
	}
	assertGone(t, hostDocker)
	assertGone(t, private)
	if localRun != "" {
		assertGone(t, localRun)
	}
}
