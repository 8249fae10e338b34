package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/mountinfo"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// A kubelet's mount namespace, as ownMountNamespace makes it, on a host
// whose mount holding both the device plugin directory and the run
// directory is shared (as / is under systemd): what the process writes
// there lands in the node's own directory, the bind never shows on the
// host, mounts cross between the host and the namespace under the shared
// run directory both ways, and each shows once on the host (not again
// beneath the run directory's bind, in the shared mount holding it).
func TestOwnMountNamespace(t *testing.T) {
	testgate.RequireRoot(t, "mount namespaces and bind mounts")
	testgate.RequireTools(t, unshareProgram, "mount", "mountpoint")
	tmp := t.TempDir()
	// host stands for /, run for /var/lib/skewtest/<run> below it.
	host := filepath.Join(tmp, "host")
	run := filepath.Join(host, "var", "lib", "skewtest", "run")
	target, own := filepath.Join(host, "var", "lib", "kubelet", "device-plugins"), filepath.Join(run, "device-plugins2")
	for _, d := range []string{target, own, filepath.Join(run, "from-host"), filepath.Join(run, "from-ns")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := mountinfo.UnmountUnder(tmp); err != nil {
			t.Error(err)
		}
	})
	// The host side of a shared / (systemd) and the shared run directory.
	for _, d := range []string{host, run} {
		if err := shareRunDir(d); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := mountHolding(target)
	if err != nil {
		t.Fatal(err)
	}
	if holder != host {
		t.Fatalf("mountHolding(%s) = %s, want %s", target, holder, host)
	}
	// Inside: write a socket stand-in, wait for the host's mount, mount
	// one of its own, say so, and stay until the host has looked.
	script := `set -e
: > "$1/kubelet.sock"
i=0; until mountpoint -q "$2/from-host"; do i=$((i+1)); [ $i -lt 200 ] || exit 3; sleep 0.05; done
mount -t tmpfs skewtest-test "$2/from-ns"
: > "$2/ready"
i=0; until [ -e "$2/done" ]; do i=$((i+1)); [ $i -lt 200 ] || exit 4; sleep 0.05; done`
	argv := ownMountNamespace(holder, own, target, []string{"/bin/sh", "-c", script, "sh", target, run})
	cmd := exec.Command(argv[0], argv[1:]...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := unix.Mount("skewtest-test", filepath.Join(run, "from-host"), "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(run, "ready")); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the namespace's process ended before it was ready: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the namespace's process never got ready\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	if _, err := os.Stat(filepath.Join(own, "kubelet.sock")); err != nil {
		t.Errorf("the socket written in the namespace's %s is not in the node's own %s: %v", target, own, err)
	}
	if _, err := os.Stat(filepath.Join(target, "kubelet.sock")); err == nil {
		t.Errorf("the socket written in the namespace landed in the host's %s", target)
	}
	mounts, err := mountinfo.ParseFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if got := mountinfo.Under(mounts, target); len(got) > 0 {
		t.Errorf("the namespace's bind over %s propagated to the host: %v", target, got[0].MountPoint)
	}
	for _, d := range []string{"from-ns", "from-host"} {
		if n := mountinfo.CountAt(mounts, filepath.Join(run, d)); n != 1 {
			t.Errorf("the host sees the mount at %s %d times, want once (a second one propagated to the shared mount beneath the run directory?)", filepath.Join(run, d), n)
		}
	}
	if err := os.WriteFile(filepath.Join(run, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the namespace's process: %v\n%s", err, out.String())
	}
}

func TestOwnMountNamespaceArgv(t *testing.T) {
	l := layoutOf("/var/lib/skewtest/run", 1)
	argv := l.inOwnMountNamespace("/", []string{"/cache/kubelet", "--root-dir=/x"})
	want := []string{unshareProgram, "--mount", "--propagation", "unchanged", "--", shellProgram, "-c", kubeletNamespaceScript, "sh",
		"/", "/var/lib/skewtest/run/device-plugins2", hostDevicePluginDir, "/cache/kubelet", "--root-dir=/x"}
	if strings.Join(argv, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("argv = %q\nwant %q", argv, want)
	}
}
