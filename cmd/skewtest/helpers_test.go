package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters"
)

// wantHelpers are the helper programs bin/skewtest must carry, by name,
// with the package each must be built from.
var wantHelpers = map[string]string{
	"podbin":              "sigs.k8s.io/skewtest/clusters/internal/podbin",
	"skewtest-csi-driver": "sigs.k8s.io/skewtest/clusters/internal/csidriver/cmd/skewtest-csi-driver",
	"kindcni":             "sigs.k8s.io/skewtest/clusters/kind/internal/nodeimage/cmd/kindcni",
	"skewtest-runc-shim":  "sigs.k8s.io/skewtest/clusters/kind/internal/capshim/cmd/skewtest-runc-shim",
}

// outside is a command run with cwd in a fresh temporary directory, outside
// the source tree, with an environment of only PATH and HOME: PATH holds a
// `go` that records being run and fails, so that a skewtest reaching for
// the Go toolchain (a source tree) shows.
type outside struct {
	dir, goRan string
	env        []string
}

func newOutside(t *testing.T) outside {
	t.Helper()
	o := outside{dir: t.TempDir()}
	fakeBin := filepath.Join(o.dir, "fakebin")
	o.goRan = filepath.Join(o.dir, "go-ran")
	if err := os.Mkdir(fakeBin, 0o755); err != nil {
		t.Fatal(err)
	}
	fakeGo := "#!/bin/sh\necho \"$@\" >> " + o.goRan + "\necho 'fake go: the toolchain must not be needed' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(fakeBin, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	o.env = []string{"PATH=" + fakeBin + ":/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + o.dir}
	return o
}

// run runs bin with args and env on top of o's environment and returns
// its exit code, stdout and stderr.
func (o outside) run(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = o.dir, append(append([]string{}, o.env...), env...)
	stdout, stderr, code := runCaptured(t, cmd)
	t.Logf("%s %s: exit %d\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), strings.Join(args, " "), code, stdout, stderr)
	return code, stdout, stderr
}

// copyTo copies the executable src into dir and returns the copy's path.
func copyTo(t *testing.T, src, dir string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// bin/skewtest, built as make skewtest builds it and copied out of the
// tree, writes every helper program from a directory with no source tree
// and no Go toolchain: each a static binary of its package, with the
// flags of a build from source, doing its job, and byte for byte what a
// build from this source gives (so a kind node image cached by either is
// fresh for the other: nodeimage's digest is of these bytes).
func TestBinSkewtestCarriesItsHelpers(t *testing.T) {
	t.Parallel()
	o := newOutside(t)
	bin := copyTo(t, skewtestBinary(t), t.TempDir())
	out := filepath.Join(o.dir, "helpers")
	code, stdout, stderr := o.run(t, bin, nil, "helpers", out)
	if code != 0 {
		t.Fatalf("skewtest helpers: exit %d, want 0; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "carried by this skewtest binary") {
		t.Errorf("skewtest helpers does not say its programs are carried:\n%s", stderr)
	}
	if b, err := os.ReadFile(o.goRan); err == nil {
		t.Errorf("bin/skewtest ran go (%s); it must need no toolchain", strings.TrimSpace(string(b)))
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the directory it wrote: %v, %v; want mode 0700", fi, err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("line %q: want name, sha256, path, package", line)
		}
		if want, ok := wantHelpers[f[0]]; !ok || f[3] != want {
			t.Errorf("line %q: want one of %v with its package", line, wantHelpers)
		}
		if f[2] != filepath.Join(out, f[0]) {
			t.Errorf("%s written to %s, want %s", f[0], f[2], filepath.Join(out, f[0]))
		}
		got[f[0]] = f[2]
	}
	if len(got) != len(wantHelpers) {
		t.Fatalf("skewtest helpers wrote %d programs, want %d (%v)", len(got), len(wantHelpers), wantHelpers)
	}
	for name, path := range got {
		checkStatic(t, path, wantHelpers[name])
	}
	checkPodbin(t, o, got["podbin"])
	checkCSIDriver(t, o, got["skewtest-csi-driver"])
	checkKindCNI(t, o, got["kindcni"])
	checkShim(t, o, got["skewtest-runc-shim"])

	// This test binary carries none: it builds them from the source tree.
	ctx, cancel := context.WithTimeout(t.Context(), cliBuildTimeout)
	defer cancel()
	origin, built, err := clusters.WriteHelpers(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(origin, "source tree") {
		t.Fatalf("the test binary's helpers are %s; want them built from the source tree", origin)
	}
	for _, h := range built {
		a, errA := os.ReadFile(got[h.Name])
		b, errB := os.ReadFile(h.Path)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: carried (%d bytes, %v) differs from the build from source (%d bytes, %v)", h.Name, len(a), errA, len(b), errB)
		}
	}
}

// checkStatic fails t unless path is a static ELF executable built from
// pkg without cgo, with paths trimmed, no VCS stamp and stripped.
func checkStatic(t *testing.T, path, pkg string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Errorf("%s: not an ELF file: %v", path, err)
		return
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: not static", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", path, libs)
	}
	// -ldflags "-s -w" (which build info does not record under -trimpath).
	if f.Section(".symtab") != nil || f.Section(".debug_info") != nil {
		t.Errorf("%s has a symbol table or DWARF: not stripped (-ldflags \"-s -w\")", path)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Errorf("%s: no Go build info: %v", path, err)
		return
	}
	if info.Path != pkg {
		t.Errorf("%s was built from %s, want %s", path, info.Path, pkg)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux"} {
		if settings[k] != want {
			t.Errorf("%s built with %s=%q, want %q", path, k, settings[k], want)
		}
	}
	if rev, ok := settings["vcs.revision"]; ok {
		t.Errorf("%s has commit %s stamped in: every commit would make cached images stale", path, rev)
	}
}

// checkPodbin: podbin states its modes, and its workload mode writes the
// marker into a volume and ends cleanly on SIGTERM.
func checkPodbin(t *testing.T, o outside, podbin string) {
	t.Helper()
	code, _, stderr := o.run(t, podbin, nil)
	if code != 2 || !strings.Contains(stderr, "usage: podbin pause | podbin workload") {
		t.Errorf("podbin without a mode: exit %d, %q; want 2 and its usage", code, stderr)
	}
	vol := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, podbin, "workload", vol)
	cmd.Env = append(append([]string{}, o.env...), "POD_NAME=helpers-test", "POD_UID=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var marker []byte
	for range 100 {
		if b, err := os.ReadFile(filepath.Join(vol, "marker")); err == nil && len(b) > 0 {
			marker = b
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Error(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("podbin workload after SIGTERM: %v, want exit 0", err)
	}
	if !strings.Contains(string(marker), "written by pod helpers-test") {
		t.Errorf("podbin workload wrote marker %q, want one naming the pod", marker)
	}
}

// checkCSIDriver: the CSI driver lists its flags.
func checkCSIDriver(t *testing.T, o outside, driver string) {
	t.Helper()
	code, _, stderr := o.run(t, driver, nil, "-h")
	for _, flag := range []string{"-controller-endpoint", "-kubelet-root", "-mode"} {
		if !strings.Contains(stderr, flag) {
			t.Errorf("skewtest-csi-driver -h: exit %d, does not list %s:\n%s", code, flag, stderr)
		}
	}
}

// checkKindCNI: kindcni asks for the node it runs on.
func checkKindCNI(t *testing.T, o outside, cni string) {
	t.Helper()
	code, _, stderr := o.run(t, cni, nil)
	if code != 1 || !strings.Contains(stderr, "kindcni: NODE_NAME is not set") {
		t.Errorf("kindcni without NODE_NAME: exit %d, %q; want 1 and NODE_NAME named", code, stderr)
	}
}

// checkShim: the runc shim removes CAP_SYS_RESOURCE from a bundle's
// config.json, keeps the other capabilities, and execs the real runc.
func checkShim(t *testing.T, o outside, shim string) {
	t.Helper()
	bundle := t.TempDir()
	config := filepath.Join(bundle, "config.json")
	spec := `{"process":{"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE"],"effective":["CAP_SYS_RESOURCE"]}}}`
	if err := os.WriteFile(config, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, _ := o.run(t, shim, []string{"SKEWTEST_RUNC=/bin/true"}, "create", "--bundle", bundle, "helpers-test")
	if code != 0 {
		t.Errorf("skewtest-runc-shim create with runc /bin/true: exit %d, want 0", code)
	}
	b, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Process struct {
			Capabilities map[string][]string `json:"capabilities"`
		} `json:"process"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("config.json after the shim: %v\n%s", err, b)
	}
	caps := got.Process.Capabilities
	if strings.Join(caps["bounding"], ",") != "CAP_CHOWN" || len(caps["effective"]) != 0 {
		t.Errorf("capabilities after the shim: %v; want CAP_SYS_RESOURCE removed, CAP_CHOWN kept", caps)
	}
}

// A skewtest that neither carries its helper programs nor runs inside the
// source tree (a go build or go run binary used elsewhere) refuses to
// start a run, before it makes anything, naming the programs and the fix.
// It is built with -trimpath, as the Makefile builds, so that it records
// no source path to find the tree by, and without DWARF, which only
// shortens its link.
func TestSkewtestWithoutHelpersNamesTheFix(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), cliBuildTimeout)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "skewtest")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-w", "-o", bin, ".")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	bin = copyTo(t, bin, t.TempDir())
	o := newOutside(t)
	artifacts := filepath.Join(o.dir, "artifacts")
	for _, tc := range []struct {
		args []string
		env  []string
		says []string
	}{
		{[]string{"helpers", filepath.Join(o.dir, "helpers")}, nil, nil},
		{[]string{"run"}, []string{"ARTIFACTS=" + artifacts, "PROVIDER=local"}, []string{"PROVIDER=local"}},
		{[]string{"run"}, []string{"ARTIFACTS=" + artifacts, "PROVIDER=kind"}, []string{"PROVIDER=kind"}},
	} {
		code, stdout, stderr := o.run(t, bin, tc.env, tc.args...)
		if code != 2 {
			t.Errorf("skewtest %s: exit %d, want 2 (bad input)", strings.Join(tc.args, " "), code)
		}
		says := append([]string{"invalid input", "make skewtest", "bin/skewtest", o.dir + " is not inside a Go module"}, tc.says...)
		for name := range wantHelpers {
			says = append(says, name)
		}
		for _, w := range says {
			if !strings.Contains(stderr, w) {
				t.Errorf("skewtest %s: stderr does not say %q:\n%s", strings.Join(tc.args, " "), w, stderr)
			}
		}
		if stdout != "" {
			t.Errorf("skewtest %s printed to stdout: %q", strings.Join(tc.args, " "), stdout)
		}
	}
	for _, made := range []string{"helpers", "artifacts"} {
		if _, err := os.Stat(filepath.Join(o.dir, made)); err == nil {
			t.Errorf("the refused commands made %s", filepath.Join(o.dir, made))
		}
	}
}
