package dockerd

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/clusters/internal/iptables"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// freshHostEnv makes the test binary, re-run in a network namespace of its
// own, play the freshly booted host.
const freshHostEnv = "SKEWTEST_DOCKERD_FRESH_HOST"

// TestForwardPolicyOnAFreshHost reproduces what was measured on a fresh
// machine after the cold make test: the host's FORWARD policy left at
// DROP. A freshly booted host has IP forwarding off and no filter table
// (iptables-save prints nothing); dockerd turns forwarding on, makes the
// table and sets FORWARD to DROP. Stop must leave FORWARD at ACCEPT, the
// policy of a table the kernel makes. The test runs in a new network
// namespace, which starts exactly so, and leaves the host's own alone.
func TestForwardPolicyOnAFreshHost(t *testing.T) {
	if os.Getenv(freshHostEnv) == "" {
		if testing.Short() {
			t.Skip("starts a real dockerd")
		}
		testgate.RequireRoot(t, "starts a dockerd in a network namespace of its own")
		if !Installed() {
			testgate.SkipOrFail(t, "Debian's docker.io is not installed",
				"install it: apt-get install -y --no-install-recommends docker.io (scripts/install-deps.sh does; TestDaemon installs it too)")
		}
		// kernel.* and vm.* settings, which Stop restores, are the host's
		// even in a network namespace: no run may overlap.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		lock, err := hostlock.Acquire(ctx, hostlock.Path(), hostlock.Holder{RunID: "dockerd-fresh-host-test"})
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Release()
		cmd := exec.Command("unshare", "--net", os.Args[0], "-test.run=^TestForwardPolicyOnAFreshHost$", "-test.v")
		cmd.Env = append(os.Environ(), freshHostEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in a new network namespace:\n%s", out)
		if err != nil {
			t.Fatalf("unshare --net: %v", err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := iptables.Save(ctx, "iptables")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rs.Tables["filter"]; ok {
		t.Fatalf("a new network namespace has a filter table: the test would test nothing")
	}
	dir, err := os.MkdirTemp("/tmp", "skd-")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Start(ctx, Config{Dir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	rs, err = iptables.Save(ctx, "iptables")
	if err != nil {
		t.Fatal(err)
	}
	if f := rs.Tables["filter"]; f == nil || f.Policies["FORWARD"] != "DROP" {
		t.Errorf("dockerd on a fresh host did not set FORWARD to DROP: the test would test nothing")
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	rs, err = iptables.Save(ctx, "iptables")
	if err != nil {
		t.Fatal(err)
	}
	if f := rs.Tables["filter"]; f != nil && f.Policies["FORWARD"] != iptables.BuiltinPolicy {
		t.Errorf("after Stop FORWARD's policy is %s, want %s as before dockerd", f.Policies["FORWARD"], iptables.BuiltinPolicy)
	}
	if b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); strings.TrimSpace(string(b)) != "0" {
		t.Errorf("after Stop ip_forward is %s, want 0 as before dockerd", b)
	}
}
