package footprint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/internal/testgate"
)

func TestDiff(t *testing.T) {
	before := Footprint{
		Processes: []string{"containerd(10)"},
		Iptables:  []string{"iptables|filter|:FORWARD ACCEPT", "iptables|filter|:KUBE-FIREWALL -"},
		Sysctls:   []string{"kernel.panic=1", "net.ipv4.ip_forward=0"},
		Links:     []string{"eth0", "lo"},
	}
	for _, tc := range []struct {
		name   string
		change func(*Footprint)
		want   []string
	}{
		{"same", func(*Footprint) {}, nil},
		{"leaked kubelet and mount", func(f *Footprint) {
			f.Processes = append(f.Processes, "kubelet(12)")
			f.Mounts = []string{"/var/lib/skewtest/x/kubelet (none)"}
		}, []string{"added process kubelet(12)", "added mount /var/lib/skewtest/x/kubelet (none)"}},
		{"containerd restarted", func(f *Footprint) { f.Processes = []string{"containerd(99)"} }, nil},
		{"second containerd", func(f *Footprint) { f.Processes = []string{"containerd(10)", "containerd(11)"} }, []string{"added process containerd(11)"}},
		{"killed the host's containerd", func(f *Footprint) { f.Processes = nil }, []string{"removed process containerd(10)"}},
		{"loop device and cgroup", func(f *Footprint) {
			f.LoopDevices = []string{"loop3 /var/lib/skewtest/x/disk.img"}
			f.Cgroups = []string{"/sys/fs/cgroup/memory/skewtest-ab12"}
		}, []string{"added loop device loop3 /var/lib/skewtest/x/disk.img", "added cgroup /sys/fs/cgroup/memory/skewtest-ab12"}},
		{"FORWARD left at DROP", func(f *Footprint) {
			f.Iptables = []string{"iptables|filter|:FORWARD DROP", "iptables|filter|:KUBE-FIREWALL -"}
		}, []string{"added iptables iptables|filter|:FORWARD DROP", "removed iptables iptables|filter|:FORWARD ACCEPT"}},
		{"a table the kernel made on first use, with default policies", func(f *Footprint) {
			f.Iptables = append(f.Iptables, "iptables|nat|:PREROUTING ACCEPT", "ip6tables|filter|:FORWARD ACCEPT")
		}, nil},
		{"a new table with a chain or a DROP policy", func(f *Footprint) {
			f.Iptables = append(f.Iptables, "iptables|nat|:PREROUTING ACCEPT", "iptables|nat|:KUBE-X -", "ip6tables|filter|:FORWARD DROP")
		}, []string{"added iptables iptables|nat|:PREROUTING ACCEPT", "added iptables iptables|nat|:KUBE-X -", "added iptables ip6tables|filter|:FORWARD DROP"}},
		{"a rule left in a kept chain", func(f *Footprint) {
			f.Iptables = append(f.Iptables, "iptables|filter|-A FORWARD -j DOCKER-USER")
		}, []string{"added iptables iptables|filter|-A FORWARD -j DOCKER-USER"}},
		{"bridge left", func(f *Footprint) { f.Links = append(f.Links, "skwab12") }, []string{"added link skwab12"}},
		{"kernel settings", func(f *Footprint) {
			f.Sysctls = []string{"kernel.panic=10", "net.bridge.bridge-nf-call-iptables=1", "net.ipv4.ip_forward=0"}
		}, []string{"changed sysctl kernel.panic: 1 -> 10"}},
		{"a kernel setting gone", func(f *Footprint) {
			f.Sysctls = []string{"kernel.panic=1"}
		}, []string{"removed sysctl net.ipv4.ip_forward (was 0; a kernel module was unloaded)"}},
		{"kubelet serving cert on the host", func(f *Footprint) {
			f.Files = []string{"/var/lib/kubelet", "/var/lib/kubelet/pki", "/var/lib/kubelet/pki/kubelet.crt"}
		}, []string{"added file /var/lib/kubelet", "added file /var/lib/kubelet/pki", "added file /var/lib/kubelet/pki/kubelet.crt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := before
			for _, l := range []*[]string{&after.Processes, &after.Iptables, &after.Sysctls, &after.Links} {
				*l = append([]string(nil), (*l)...)
			}
			tc.change(&after)
			if got := Diff(before, after); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Diff = %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestSaveLoad(t *testing.T) {
	f := Footprint{Processes: []string{"kubelet(7)"}, Sysctls: []string{"kernel.panic=1"}}
	file := filepath.Join(t.TempDir(), "fp.json")
	if err := Save(file, f); err != nil {
		t.Fatal(err)
	}
	got, err := Load(file)
	if err != nil || !reflect.DeepEqual(got, f) {
		t.Errorf("Load = %+v, %v; want %+v", got, err, f)
	}
	if err := os.WriteFile(file, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("Load of a broken file: %v; want an error naming it", err)
	}
}

// TestTakeSeesLeaks plants one leak of every kind on this host and checks
// that Diff names each, then that each is gone from the Diff once removed.
// Other activity on the host may add lines of its own; only the planted
// ones are asserted.
func TestTakeSeesLeaks(t *testing.T) {
	testgate.RequireRoot(t, "plants mounts, loop devices, cgroups, iptables chains and links")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	// Planted leaks must not land in a run's footprint, nor a run's in
	// this test's: wait for any run on this host to finish.
	lock, err := hostlock.Acquire(ctx, hostlock.Path(), hostlock.Holder{RunID: "footprint-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	id := fmt.Sprintf("%d", os.Getpid()%100000)
	before := Take(ctx)
	if len(before.Links) == 0 || len(before.Mounts) == 0 || len(before.Sysctls) == 0 {
		t.Fatalf("Take saw no links, mounts or sysctls: %+v", before)
	}
	var undo []func()
	t.Cleanup(func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	})
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
	}
	var want []string

	// A daemon: a copy of sleep named like the test pods' binary.
	bin := filepath.Join(t.TempDir(), "podbin")
	run("cp", "/bin/sleep", bin)
	sleeper := exec.Command(bin, "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	undo = append(undo, func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	want = append(want, fmt.Sprintf("added process podbin(%d)", sleeper.Process.Pid))

	// A mount outside any test directory, and a loop device backed by a
	// file in it.
	mnt := "/run/skewtest-fptest-" + id
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	undo = append(undo, func() { os.Remove(mnt) })
	run("mount", "-t", "tmpfs", "-o", "size=8m", "skewtest-fptest", mnt)
	undo = append(undo, func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	want = append(want, "added mount "+mnt+" (tmpfs)")
	img := filepath.Join(mnt, "disk.img")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	loop, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		t.Fatalf("losetup: %v", err)
	}
	dev := strings.TrimSpace(string(loop))
	undo = append(undo, func() { _ = exec.Command("losetup", "-d", dev).Run() })
	want = append(want, "added loop device "+filepath.Base(dev)+" "+img)

	// A cgroup in the first hierarchy, an iptables chain with a jump to
	// it, FORWARD's policy, a link, a kernel setting, a CNI cache entry.
	cg := ""
	for _, m := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(m, "cgroup.procs")); err == nil {
			cg = filepath.Join(m, CgroupPrefix+"fptest-"+id)
			break
		}
	}
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatalf("make cgroup: %v", err)
	}
	undo = append(undo, func() { os.Remove(cg) })
	want = append(want, "added cgroup "+cg)
	chain := "SKEWTEST-FPTEST-" + id
	run("iptables", "-w", "-N", chain)
	undo = append(undo, func() { _ = exec.Command("iptables", "-w", "-X", chain).Run() })
	run("iptables", "-w", "-A", "OUTPUT", "-j", chain)
	undo = append(undo, func() { _ = exec.Command("iptables", "-w", "-D", "OUTPUT", "-j", chain).Run() })
	want = append(want, "added iptables iptables|filter|:"+chain+" -", "added iptables iptables|filter|-A OUTPUT -j "+chain)
	link := "skwfp" + id
	run("ip", "link", "add", link, "type", "bridge")
	undo = append(undo, func() { _ = exec.Command("ip", "link", "delete", link).Run() })
	want = append(want, "added link "+link)
	const key = "/proc/sys/kernel/panic"
	was, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	oldPanic := strings.TrimSpace(string(was))
	newPanic := "1"
	if oldPanic == "1" {
		newPanic = "2"
	}
	if err := os.WriteFile(key, []byte(newPanic), 0o644); err != nil {
		t.Fatal(err)
	}
	undo = append(undo, func() { _ = os.WriteFile(key, was, 0o644) })
	want = append(want, "changed sysctl kernel.panic: "+oldPanic+" -> "+newPanic)
	entry := "/var/lib/cni/results/cni-loopback-fptest" + id + "-lo"
	// On a fresh host the cache's directories do not exist yet: the test
	// makes them, so it removes them too (CI's footprint compare caught
	// them left behind on a fresh machine).
	for _, d := range []string{"/var/lib/cni", filepath.Dir(entry)} {
		if _, err := os.Lstat(d); errors.Is(err, os.ErrNotExist) {
			undo = append(undo, func() { os.Remove(d) })
			want = append(want, "added file "+d)
		}
	}
	if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entry, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	undo = append(undo, func() { os.Remove(entry) })
	want = append(want, "added file "+entry)

	time.Sleep(100 * time.Millisecond) // the sleeper's comm is set at exec
	got := map[string]bool{}
	for _, d := range Diff(before, Take(ctx)) {
		got[d] = true
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("Diff does not name %q; it named:\n%s", w, strings.Join(keys(got), "\n"))
		}
	}

	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
	undo = nil
	for _, d := range Diff(before, Take(ctx)) {
		for _, w := range want {
			if d == w {
				t.Errorf("still named after removing it: %q", d)
			}
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestLoopDevices(t *testing.T) {
	sys := t.TempDir()
	for _, d := range []string{"loop0/loop", "loop1", "vda"} {
		if err := os.MkdirAll(filepath.Join(sys, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(sys, "loop0/loop/backing_file"), []byte("/srv/disk.img\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A Go test's own loop device, over a file in its temporary directory.
	if err := os.MkdirAll(filepath.Join(sys, "loop2/loop"), 0o755); err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(os.TempDir(), "TestSomething123", "001", "vol.img")
	if err := os.WriteFile(filepath.Join(sys, "loop2/loop/backing_file"), []byte(testFile+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := loopDevices(sys), []string{"loop0 /srv/disk.img"}; !reflect.DeepEqual(got, want) {
		t.Errorf("loopDevices = %q, want %q (a detached loop1 has no backing file; loop2 is over a Go test's file)", got, want)
	}
}

// TestOtherGoTestsDaemonsAreNotCounted: a daemon-named process under
// another running Go test binary (a stand-in: a shell named other.test) is
// that test's, not in the footprint; the same daemon started by this test
// is.
func TestOtherGoTestsDaemonsAreNotCounted(t *testing.T) {
	dir := t.TempDir()
	for src, dst := range map[string]string{"/bin/sh": "other.test", "/bin/sleep": "podbin"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	podbin := filepath.Join(dir, "podbin")
	start := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	other := start(filepath.Join(dir, "other.test"), "-c", podbin+" 60 & echo $! > "+filepath.Join(dir, "pid")+"; wait")
	mine := start(podbin, "60")
	var theirs int
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(dir, "pid"))
		if _, err := fmt.Sscan(string(b), &theirs); err == nil && theirs > 0 {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", theirs)); strings.TrimSpace(string(comm)) == "podbin" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other test's podbin never started (pid file %q)", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !ofAnotherGoTest(theirs) {
		t.Errorf("podbin(%d) under %s (pid %d) is not counted as another Go test's", theirs, "other.test", other.Process.Pid)
	}
	if ofAnotherGoTest(mine.Process.Pid) {
		t.Errorf("podbin(%d), started by this test, is counted as another Go test's", mine.Process.Pid)
	}
	for time.Now().Before(deadline) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", mine.Process.Pid)); strings.TrimSpace(string(comm)) == "podbin" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := Take(context.Background()).Processes
	if want := fmt.Sprintf("podbin(%d)", mine.Process.Pid); !slices.Contains(got, want) {
		t.Errorf("Take's processes %q lack this test's %s", got, want)
	}
	if unwanted := fmt.Sprintf("podbin(%d)", theirs); slices.Contains(got, unwanted) {
		t.Errorf("Take's processes %q hold another Go test's %s", got, unwanted)
	}
}
