package systemdkubelet

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/filetest"
)

// harness is a Driver on a fakeSystemd node whose commands go through an
// exec.Recorder, the seam every provider's nodes use.
type harness struct {
	t    *testing.T
	dir  string
	fake *fakeSystemd
	d    *Driver
	mu   sync.Mutex
	cmds []string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir}
	bin := filepath.Join(dir, "usr/local/bin/kubelet")
	for _, f := range []struct{ path, content string }{
		{bin, "kops kubelet v1.37.2"},
		{filepath.Join(dir, "etc/sysconfig/kubelet"), "DAEMON_ARGS=\"--config=/var/lib/kubelet/kubelet.conf\"\n"},
		{filepath.Join(dir, "var/lib/kubelet/kubelet.conf"), "kind: KubeletConfiguration\n"},
	} {
		filetest.Write(t, f.path, f.content, 0o755)
	}
	h.fake = newFakeSystemd(bin)
	rec := exec.NewRecorder(h.fake, func(r exec.Result) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.cmds = append(h.cmds, h.render(r.Argv))
	})
	h.d = &Driver{Node: rec, PollInterval: time.Millisecond, Timeout: 5 * time.Second, Layout: Layout{
		Unit:            "kubelet",
		Binary:          bin,
		EnvironmentFile: filepath.Join(dir, "etc/sysconfig/kubelet"),
		Config:          filepath.Join(dir, "var/lib/kubelet/kubelet.conf"),
		RootDir:         filepath.Join(dir, "var/lib/kubelet"),
	}}
	return h
}

// render names the driver's scripts instead of printing them, and the test
// directory as $D, so the expected commands read like the node's log.
func (h *harness) render(argv []string) string {
	argv = slices.Clone(argv)
	if len(argv) > 3 && argv[0] == "sh" && argv[1] == "-c" {
		name := "SCRIPT?"
		switch s := argv[2]; {
		case strings.Contains(s, "command -v curl"):
			name = "PROBE"
		case s == swapIn:
			name = "SWAPIN"
		case s == putBack:
			name = "PUTBACK"
		case s == keptScript:
			name = "KEPT"
		case s == keepState:
			// Its arguments past the state directory are the
			// layout's Checkpoints, the same every time.
			name = "KEEPSTATE"
			argv = argv[:5]
		case s == putBackState:
			name = "PUTBACKSTATE"
		case s == `cat > "$1"`:
			name = "UPLOAD"
		case strings.Contains(s, "echo kept"):
			name = "ORIGINAL"
		}
		argv = append([]string{"sh", "-c", name}, argv[4:]...)
	}
	return strings.ReplaceAll(strings.Join(argv, " "), h.dir, "$D")
}

// take returns the commands run since the last take, collapsing repeated
// polls into one line ending in "(polled)".
func (h *harness) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, c := range h.cmds {
		if n := len(out); n > 0 && (out[n-1] == c || out[n-1] == c+" (polled)") {
			out[n-1] = c + " (polled)"
			continue
		}
		out = append(out, c)
	}
	h.cmds = nil
	return out
}

func (h *harness) expect(step string, want ...string) {
	h.t.Helper()
	got := h.take()
	if !slices.Equal(got, want) {
		h.t.Errorf("%s ran:\n  %s\nwant:\n  %s", step, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func (h *harness) binary(name, content string) binaries.Binary {
	h.t.Helper()
	path := filepath.Join(h.dir, "cache", name)
	filetest.Write(h.t, path, content, 0o644)
	sum, err := binaries.FileSHA256(path)
	if err != nil {
		h.t.Fatal(err)
	}
	return binaries.Binary{Component: "kubelet", Version: name, Path: path, SHA256: sum}
}

const show = "systemctl show --property=ActiveState,SubState,MainPID,NRestarts kubelet"

// startCommands is what Start runs when the kubelet answers its health
// endpoint at the probes-th probe.
func startCommands(probes int) []string {
	out := []string{"systemctl reset-failed kubelet", show, "systemctl start kubelet"}
	for range probes {
		out = append(out, show, "sh -c PROBE http://127.0.0.1:10248/healthz 127.0.0.1 10248 /healthz")
	}
	return out
}

// restoreCommands are what a restore runs: it checks what was kept, stops
// the run's kubelet, puts the node's files and state back and starts it,
// with probes health probes.
func restoreCommands(probes int) []string {
	return append([]string{
		"sh -c KEPT $D/var/lib/kubelet.skewtest-state $D/usr/local/bin/kubelet $D/etc/sysconfig/kubelet $D/var/lib/kubelet/kubelet.conf",
		"systemctl stop kubelet",
		show,
		"sh -c PUTBACK $D/usr/local/bin/kubelet $D/etc/sysconfig/kubelet $D/var/lib/kubelet/kubelet.conf",
		"sh -c PUTBACKSTATE $D/var/lib/kubelet.skewtest-state",
		"sha256sum $D/usr/local/bin/kubelet",
	}, startCommands(probes)...)
}

func TestSwapRestoreCommands(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	orig, err := h.d.Original(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if orig.Kept || orig.SHA256 != sha(t, h.d.Layout.Binary) {
		t.Errorf("Original = %+v, want the live binary's sha256 %s", orig, sha(t, h.d.Layout.Binary))
	}
	h.expect("Original", "sh -c ORIGINAL $D/usr/local/bin/kubelet")

	h.fake.stopLag = 3
	if err := h.d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	h.expect("Stop", "systemctl stop kubelet", show+" (polled)")
	if h.fake.pid != 0 {
		t.Errorf("Stop returned while the kubelet process %d still ran", h.fake.pid)
	}

	v136 := h.binary("v1.36.3", "kubelet v1.36.3")
	if err := h.d.Swap(ctx, v136); err != nil {
		t.Fatal(err)
	}
	h.expect("Swap",
		"sh -c UPLOAD $D/usr/local/bin/kubelet.skewtest-new",
		"sha256sum $D/usr/local/bin/kubelet.skewtest-new",
		"chmod 0755 $D/usr/local/bin/kubelet.skewtest-new",
		"sh -c KEEPSTATE $D/var/lib/kubelet.skewtest-state",
		"sh -c SWAPIN $D/usr/local/bin/kubelet.skewtest-new $D/usr/local/bin/kubelet",
		"sha256sum $D/usr/local/bin/kubelet",
	)
	filetest.AssertContent(t, h.d.Layout.Binary, "kubelet v1.36.3", 0o755)
	filetest.AssertContent(t, h.d.Layout.Binary+OrigSuffix, "kops kubelet v1.37.2", 0o755)
	filetest.AssertMissing(t, h.d.Layout.Binary+NewSuffix)

	h.fake.healthyAfter = 2
	if err := h.d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.expect("Start", startCommands(3)...)

	// A second swap keeps the first original, and Original says so.
	if err := h.d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Swap(ctx, h.binary("v1.35.4", "kubelet v1.35.4")); err != nil {
		t.Fatal(err)
	}
	filetest.AssertContent(t, h.d.Layout.Binary+OrigSuffix, "kops kubelet v1.37.2", 0o755)
	again, err := h.d.Original(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Kept || again.SHA256 != orig.SHA256 {
		t.Errorf("Original after a swap = %+v, want the kept copy with sha256 %s", again, orig.SHA256)
	}
	if err := h.d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.take()

	if err := h.d.Restore(ctx, orig.SHA256); err != nil {
		t.Fatal(err)
	}
	h.expect("Restore", restoreCommands(3)...)
	filetest.AssertContent(t, h.d.Layout.Binary, "kops kubelet v1.37.2", 0o755)
	filetest.AssertMissing(t, h.d.Layout.Binary+OrigSuffix)
	if !h.fake.active {
		t.Error("Restore left the unit stopped")
	}

	// Restoring again: nothing kept, the unit runs, no stop.
	h.fake.healthyAfter = 0
	if err := h.d.Restore(ctx, orig.SHA256); err != nil {
		t.Fatal(err)
	}
	h.expect("Restore with nothing kept", append([]string{
		"sh -c KEPT $D/var/lib/kubelet.skewtest-state $D/usr/local/bin/kubelet $D/etc/sysconfig/kubelet $D/var/lib/kubelet/kubelet.conf",
		"sha256sum $D/usr/local/bin/kubelet",
	}, startCommands(1)...)...)
}

// A run killed between Stop and Swap leaves the unit stopped and nothing
// kept: Restore starts it.
func TestRestoreStartsAStoppedUnit(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	orig, err := h.d.Original(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Restore(ctx, orig.SHA256); err != nil {
		t.Fatal(err)
	}
	if !h.fake.active || h.fake.pid == 0 {
		t.Errorf("unit after Restore: active %v pid %d", h.fake.active, h.fake.pid)
	}
}

// Restore refuses to start a binary that is not the recorded original.
func TestRestoreWrongOriginal(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	err := h.d.Restore(ctx, strings.Repeat("ab", 32))
	if err == nil || !strings.Contains(err.Error(), "but the node's own kubelet had") || !strings.Contains(err.Error(), "node-a") {
		t.Fatalf("Restore with the wrong sha256 = %v", err)
	}
}

func TestSwapRefusesBadChecksum(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	bad := h.binary("v1.36.3", "kubelet v1.36.3")
	bad.SHA256 = strings.Repeat("0", 64)
	err := h.d.Swap(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "want "+bad.SHA256) || !strings.Contains(err.Error(), "node-a") {
		t.Errorf("swap with the wrong sha256 = %v", err)
	}
	filetest.AssertContent(t, h.d.Layout.Binary, "kops kubelet v1.37.2", 0o755)
	filetest.AssertMissing(t, h.d.Layout.Binary+NewSuffix)
	filetest.AssertMissing(t, h.d.Layout.Binary+OrigSuffix)

	missing := bad
	missing.Path = filepath.Join(h.dir, "nope")
	if err := h.d.Swap(ctx, missing); err == nil || !strings.Contains(err.Error(), missing.Path) {
		t.Errorf("swap with a missing file = %v", err)
	}
}

// A kubelet that exits at once is reported from systemd's restart count,
// with its journal, long before the timeout.
func TestStartCrashingKubelet(t *testing.T) {
	h := newHarness(t)
	h.d.Timeout = time.Minute
	ctx := t.Context()
	if err := h.d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Swap(ctx, h.binary("v1.34.4", "kubelet that will crash")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := h.d.Start(ctx)
	if err == nil {
		t.Fatal("Start of a crashing kubelet succeeded")
	}
	for _, want := range []string{"start kubelet on node-a", "systemd restarted it", "flag provided but not defined: --foo"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if !errors.Is(err, errGaveUp) {
		t.Errorf("error %v did not end the wait early", err)
	}
	t.Logf("gave up after %s: %v", time.Since(start), err)
}

func TestStartWithoutProber(t *testing.T) {
	h := newHarness(t)
	h.fake.noProber = true
	err := h.d.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "neither curl, wget nor bash") {
		t.Errorf("Start on a node without curl, wget or bash = %v", err)
	}
}

func TestStopTimesOut(t *testing.T) {
	h := newHarness(t)
	h.d.Timeout = 50 * time.Millisecond
	h.fake.stopLag = 1 << 30
	err := h.d.Stop(t.Context())
	if err == nil || !strings.Contains(err.Error(), "deactivating") || !strings.Contains(err.Error(), "not stopped") || !strings.Contains(err.Error(), "last log lines") {
		t.Errorf("Stop of a kubelet that does not exit = %v", err)
	}
}

// The environment file and config are replaced only with Swap's files,
// kept once, and put back by Restore.
func TestSwapFiles(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	env := h.d.Layout.EnvironmentFile
	if err := h.d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	v := h.binary("v1.34.4", "kubelet v1.34.4")
	if err := h.d.Swap(ctx, v, File{Path: env, Content: []byte("DAEMON_ARGS=\"--old-flags\"\n")}); err != nil {
		t.Fatal(err)
	}
	filetest.AssertContent(t, env, "DAEMON_ARGS=\"--old-flags\"\n", 0o755)
	filetest.AssertContent(t, env+OrigSuffix, "DAEMON_ARGS=\"--config=/var/lib/kubelet/kubelet.conf\"\n", 0o755)
	filetest.AssertMissing(t, h.d.Layout.Config+OrigSuffix)
	if err := h.d.Swap(ctx, v, File{Path: "/etc/passwd", Content: []byte("x")}); err == nil || !strings.Contains(err.Error(), "not the layout's") {
		t.Errorf("swap of a file outside the layout = %v", err)
	}
	if err := h.d.Restore(ctx, ""); err != nil {
		t.Fatal(err)
	}
	filetest.AssertContent(t, env, "DAEMON_ARGS=\"--config=/var/lib/kubelet/kubelet.conf\"\n", 0o755)
	filetest.AssertMissing(t, env+OrigSuffix)
}

func TestLayoutValidate(t *testing.T) {
	good := Layout{Unit: "kubelet", Binary: "/usr/local/bin/kubelet", RootDir: "/var/lib/kubelet", EnvironmentFile: "/etc/sysconfig/kubelet", Config: "/var/lib/kubelet/kubelet.conf"}
	if err := good.Validate(); err != nil {
		t.Errorf("kops layout: %v", err)
	}
	good.HealthzURL = "http://127.0.0.1:10348/healthz"
	if err := good.Validate(); err != nil {
		t.Errorf("a health endpoint of its own: %v", err)
	}
	for _, bad := range []Layout{
		{Unit: "", Binary: "/usr/bin/kubelet", RootDir: "/var/lib/kubelet"},
		{Unit: "kubelet", Binary: "kubelet", RootDir: "/var/lib/kubelet"},
		{Unit: "kubelet", Binary: "/usr/bin/kubelet", RootDir: "/var/lib/kubelet", Config: "kubelet.conf"},
		{Unit: "kubelet; rm", Binary: "/usr/bin/kubelet", RootDir: "/var/lib/kubelet"},
		{Unit: "kubelet", Binary: "/usr/bin/kubelet", RootDir: "/var/lib/kubelet", HealthzURL: "127.0.0.1:10248"},
		{Unit: "kubelet", Binary: "/usr/bin/kubelet", RootDir: "/var/lib/kubelet", HealthzURL: "file:///healthz"},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted it", bad)
		}
	}
}

func sha(t *testing.T, path string) string {
	t.Helper()
	s, err := binaries.FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
