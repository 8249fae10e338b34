package dockerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/clusters/internal/images"
	"sigs.k8s.io/skewtest/clusters/kind/internal/capshim"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// TestDaemon runs real private dockerds: without the shim a privileged
// container fails on a host without CAP_SYS_RESOURCE, with it it runs (and
// docker exec into it works), and Stop, or Clean alone, leaves the host as
// it was.
func TestDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real dockerds")
	}
	testgate.RequireRoot(t, "starts private dockerds and installs docker.io with apt-get")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := Install(ctx); err != nil {
		testgate.SkipOrFail(t, fmt.Sprintf("Debian's docker.io is not installed and cannot be installed: %v", err),
			"install it: apt-get install -y --no-install-recommends docker.io (scripts/install-deps.sh does)")
	}
	needsShim, err := capshim.NeedsShim()
	if err != nil {
		t.Fatal(err)
	}
	shim, err := capshim.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tarball, err := images.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// No run, and no other test that changes the host, overlaps this one:
	// the footprint compared after each daemon is the host's.
	lock, err := hostlock.Acquire(ctx, hostlock.Path(), hostlock.Holder{RunID: "dockerd-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	before := footprint.Take(ctx)

	t.Run("WithoutShim", func(t *testing.T) {
		if !needsShim {
			t.Skip("this host has CAP_SYS_RESOURCE: privileged containers run without the shim")
		}
		dir := newDir(t)
		d := start(ctx, t, Config{Dir: dir, Logger: testLogger(t)})
		load(ctx, t, d, tarball)
		// The daemon itself works...
		id := mustDocker(ctx, t, d, "run", "-d", "--network", "none", images.Pause)
		assertRunning(ctx, t, d, id)
		// ...but not for privileged containers.
		out, err := docker(ctx, d, "run", "-d", "--network", "none", "--privileged", images.Pause)
		if err == nil || !strings.Contains(out, "apply caps") {
			t.Errorf("docker run --privileged without the shim: %v: %s\nwant the failure to apply caps", err, out)
		}
		stop(ctx, t, d)
		assertClean(ctx, t, before, dir, true)
	})

	t.Run("WithShim", func(t *testing.T) {
		dir := newDir(t)
		d := start(ctx, t, Config{Dir: dir, Shim: shim, Logger: testLogger(t)})
		if got, want := d.Host(), "unix://"+filepath.Join(dir, "docker.sock"); got != want {
			t.Errorf("Host() = %s, want %s", got, want)
		}
		if env := d.Env(); len(env) != 1 || env[0] != "DOCKER_HOST="+d.Host() {
			t.Errorf("Env() = %q", env)
		}
		load(ctx, t, d, tarball)
		// A user network (a br-* bridge, as kind's) and a published port
		// (docker-proxy, DNAT and hairpin rules), as kind's nodes have.
		mustDocker(ctx, t, d, "network", "create", "skewtest-test")
		id := mustDocker(ctx, t, d, "run", "-d", "--privileged", "--network", "skewtest-test", "-p", "127.0.0.1::80", images.Pause)
		assertRunning(ctx, t, d, id)
		id0 := mustDocker(ctx, t, d, "run", "-d", "--privileged", "-p", "127.0.0.1::81", images.Pause)
		assertRunning(ctx, t, d, id0)
		// docker exec runs `runc exec --process`: privileged, it asks for
		// every capability too.
		out, _ := docker(ctx, d, "exec", id, "/podbin")
		if !strings.Contains(out, "usage: podbin") {
			t.Errorf("docker exec into the privileged container: %s", out)
		}
		// kind runs the `docker` on PATH, which may be a newer client than
		// the daemon (docker 28 in /usr/local/bin): it must negotiate down.
		if onPath, err := exec.LookPath("docker"); err == nil && onPath != DockerCLI {
			cmd := exec.CommandContext(ctx, onPath, "version", "--format", "{{.Client.Version}} {{.Server.Version}} {{.Server.APIVersion}}")
			cmd.Env = append(os.Environ(), d.Env()...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s version against dockerd: %v\n%s", onPath, err, out)
			} else {
				t.Logf("%s (client, server, API): %s", onPath, strings.TrimSpace(string(out)))
			}
		}
		// The host did change, so that the checks after Stop mean something.
		now := footprint.Take(ctx)
		if !slices.Contains(now.Iptables, "iptables|filter|:DOCKER-USER -") {
			t.Errorf("no DOCKER-USER chain while dockerd runs: is this dockerd managing iptables?")
		}
		if !slices.Contains(now.Links, "docker0") {
			t.Errorf("no docker0 while dockerd runs")
		}
		stop(ctx, t, d)
		if err := d.Stop(ctx); err != nil {
			t.Errorf("second Stop: %v", err)
		}
		assertClean(ctx, t, before, dir, true)
	})

	t.Run("Seed", func(t *testing.T) {
		// A daemon asked to keep its images leaves a seed when it stops;
		// the next daemon, planted from it, has the images without a load
		// and runs a container from them; both leave the host as it was.
		seed := filepath.Join(t.TempDir(), "seed")
		dir := newDir(t)
		d := start(ctx, t, Config{Dir: dir, Shim: shim, Seed: seed, Logger: testLogger(t)})
		load(ctx, t, d, tarball)
		d.KeepSeed(seed)
		stop(ctx, t, d)
		assertClean(ctx, t, before, dir, true)
		if _, err := os.Stat(filepath.Join(seed, "image", storageDriver, "repositories.json")); err != nil {
			t.Fatalf("no seed kept at Stop: %v", err)
		}
		dir = newDir(t)
		d = start(ctx, t, Config{Dir: dir, Shim: shim, Seed: seed, Logger: testLogger(t)})
		mustDocker(ctx, t, d, "image", "inspect", images.Pause)
		id := mustDocker(ctx, t, d, "run", "-d", "--privileged", "--network", "none", images.Pause)
		assertRunning(ctx, t, d, id)
		stop(ctx, t, d)
		assertClean(ctx, t, before, dir, true)
		if _, err := os.Stat(filepath.Join(seed, "image", storageDriver, "repositories.json")); err != nil {
			t.Errorf("the seed is gone after a daemon planted from it stopped: %v", err)
		}
	})

	t.Run("CleanAfterKilledHarness", func(t *testing.T) {
		dir := newDir(t)
		d := start(ctx, t, Config{Dir: dir, Shim: shim, Logger: testLogger(t)})
		load(ctx, t, d, tarball)
		mustDocker(ctx, t, d, "network", "create", "skewtest-test")
		id := mustDocker(ctx, t, d, "run", "-d", "--privileged", "--network", "skewtest-test", "-p", "127.0.0.1::80", images.Pause)
		assertRunning(ctx, t, d, id)
		// As a later `skewtest clean` would: from the directory alone.
		if err := Clean(ctx, dir); err != nil {
			t.Fatalf("Clean: %v", err)
		}
		// d holds the host lock: check without it, then let Stop release it.
		assertClean(ctx, t, before, dir, false)
		if err := d.Stop(ctx); err != nil {
			t.Errorf("Stop after Clean: %v", err)
		}
		if err := Clean(ctx, dir); err != nil {
			t.Errorf("second Clean: %v", err)
		}
	})

	t.Run("CleanAfterDockerdKilled", func(t *testing.T) {
		// dockerd SIGKILLed (OOM, a reboot of the harness host's service
		// manager...): containers, shims, mounts, rules and bridges are all
		// left, and nothing answers on the socket. Clean must do it all.
		dir := newDir(t)
		d := start(ctx, t, Config{Dir: dir, Shim: shim, Logger: testLogger(t)})
		load(ctx, t, d, tarball)
		mustDocker(ctx, t, d, "network", "create", "skewtest-test")
		id := mustDocker(ctx, t, d, "run", "-d", "--privileged", "--network", "skewtest-test", "-p", "127.0.0.1::80", images.Pause)
		assertRunning(ctx, t, d, id)
		id0 := mustDocker(ctx, t, d, "run", "-d", "-p", "127.0.0.1::81", images.Pause)
		assertRunning(ctx, t, d, id0)
		dockerd := d.cmd.Process.Pid
		if err := d.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-d.done
		// The containers outlive dockerd.
		shims := 0
		for _, p := range allProcs() {
			if ownedBy(p, dir) && filepath.Base(p.argv[0]) == "containerd-shim-runc-v2" {
				shims++
			}
		}
		if shims == 0 {
			t.Fatalf("no containerd shim outlived dockerd %d: the test would test nothing", dockerd)
		}
		if ms, _ := mountinfo.ParseFile("/proc/self/mountinfo"); len(mountinfo.Under(ms, dir)) == 0 {
			t.Fatalf("nothing mounted under %s after killing dockerd: the test would test nothing", dir)
		}
		if err := Clean(ctx, dir); err != nil {
			t.Fatalf("Clean: %v", err)
		}
		assertClean(ctx, t, before, dir, false)
		if err := d.Stop(ctx); err != nil {
			t.Errorf("Stop after Clean: %v", err)
		}
	})
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// newDir returns a new short directory for a daemon, cleaned up after the
// test whatever happens.
func newDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "skd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := Clean(ctx, dir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if ms, _ := mountinfo.ParseFile("/proc/self/mountinfo"); len(mountinfo.Under(ms, dir)) == 0 {
			os.RemoveAll(dir)
		}
	})
	return dir
}

func start(ctx context.Context, t *testing.T, cfg Config) *Daemon {
	t.Helper()
	d, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := d.Stop(ctx); err != nil {
			t.Errorf("Stop in cleanup: %v", err)
		}
	})
	return d
}

func stop(ctx context.Context, t *testing.T, d *Daemon) {
	t.Helper()
	t0 := time.Now()
	if err := d.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %s", time.Since(t0).Round(time.Millisecond))
}

// docker runs Debian's docker CLI, the daemon's version, against d.
func docker(ctx context.Context, d *Daemon, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, DockerCLI, args...)
	cmd.Env = append(os.Environ(), d.Env()...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func mustDocker(ctx context.Context, t *testing.T, d *Daemon, args ...string) string {
	t.Helper()
	out, err := docker(ctx, d, args...)
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func load(ctx context.Context, t *testing.T, d *Daemon, tarball string) {
	t.Helper()
	mustDocker(ctx, t, d, "load", "-i", tarball)
}

func assertRunning(ctx context.Context, t *testing.T, d *Daemon, id string) {
	t.Helper()
	out := mustDocker(ctx, t, d, "inspect", "-f", "{{json .State}}", id)
	var st struct {
		Running bool
		Error   string
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("docker inspect: %v: %s", err, out)
	}
	if !st.Running {
		t.Fatalf("container %s is not running: %s", id, out)
	}
}

// assertClean checks that nothing of the daemon in dir is left (its
// processes, mounts, cgroups, the directory) and that the host's footprint
// is as before: iptables chains, rules and the FORWARD policy, links, kernel
// settings, host directories. With lock it holds the dockerd lock while
// checking, so that no other package's daemon starts meanwhile.
func assertClean(ctx context.Context, t *testing.T, before footprint.Footprint, dir string, lock bool) {
	t.Helper()
	if lock {
		f, err := acquireLock(ctx, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	self := os.Getpid()
	for _, p := range allProcs() {
		if p.pid != self && strings.Contains(strings.Join(p.argv, " "), dir) {
			t.Errorf("process left: %v", p)
		}
	}
	if out, err := exec.Command("pgrep", "-af", dir).Output(); err == nil && len(out) > 0 {
		t.Errorf("pgrep -af %s:\n%s", dir, out)
	}
	ms, err := mountinfo.ParseFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mountinfo.Under(ms, dir) {
		t.Errorf("still mounted: %s (%s)", m.MountPoint, m.FSType)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists (%v)", dir, err)
	}
	for _, d := range cgroupDirsOf(cgroupParentFor(dir)) {
		t.Errorf("cgroup %s still exists", d)
	}
	for _, d := range footprint.Diff(before, footprint.Take(ctx)) {
		// Other packages' tests run beside this one (go test -p): a
		// process of theirs that was orphaned when "before" was taken,
		// and has ended since, is not this daemon's doing; what the
		// daemon left is an added process, and its own are found by
		// their directory above.
		if strings.HasPrefix(d, "removed process ") {
			continue
		}
		t.Errorf("host changed: %s", d)
	}
}

func TestStartRefusesBadConfig(t *testing.T) {
	ctx := context.Background()
	long := "/tmp/" + strings.Repeat("x", maxDirLen)
	for _, cfg := range []Config{
		{Dir: ""},
		{Dir: "relative"},
		{Dir: long},
		{Dir: "/tmp/skd-nope", Shim: "/nonexistent/skewtest-runc-shim"},
	} {
		if d, err := Start(ctx, cfg); err == nil {
			d.Stop(ctx)
			t.Errorf("Start(%+v) succeeded", cfg)
		}
	}
	if _, err := os.Lstat("/tmp/skd-nope"); err == nil {
		t.Errorf("a refused Start created its directory")
	}
	// Clean of a directory that does not exist is fine.
	if err := Clean(ctx, "/tmp/skd-nope/"+strconv.Itoa(os.Getpid())); err != nil {
		t.Errorf("Clean(missing) = %v", err)
	}
}
