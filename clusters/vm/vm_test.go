package vm

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestQemuArgs(t *testing.T) {
	p := qemuParams{
		name: "t1", accel: AccelTCG, memoryMiB: 6144, cpus: 2,
		kernel: "/c/vmlinuz", initrd: "/c/initrd.img", overlay: "/s/t1/overlay.qcow2",
		serialLog: "/a/serial.log", bootDir: "/s/t1/boot", pidFile: "/s/t1/qemu.pid", sshPort: 40022,
		shares: []Share{{HostPath: "/root/.cache/skewtest", ReadOnly: true}, {HostPath: "/out"}},
	}
	args := qemuArgs(p)
	line := strings.Join(args, " ")
	for _, want := range []string{
		"-accel tcg,thread=multi -cpu max",
		"-smp 2 -m 6144",
		"-serial file:/a/serial.log",
		"-kernel /c/vmlinuz -initrd /c/initrd.img",
		"-drive file=/s/t1/overlay.qcow2,if=virtio,format=qcow2,cache=unsafe",
		"-netdev user,id=net0,hostfwd=tcp:127.0.0.1:40022-:22",
		"-virtfs local,path=/s/t1/boot,mount_tag=skewtest-boot,security_model=none,id=boot,readonly=on",
		"-virtfs local,path=/root/.cache/skewtest,mount_tag=share0,security_model=none,id=fs0,readonly=on",
		"-virtfs local,path=/out,mount_tag=share1,security_model=none,id=fs1 ",
		"-no-reboot",
	} {
		if !strings.Contains(line+" ", want) {
			t.Errorf("qemu args lack %q:\n%s", want, line)
		}
	}
	// -append takes the whole kernel command line as one argument.
	i := slices.Index(args, "-append")
	if i < 0 || args[i+1] != KernelCmdline() {
		t.Errorf("-append is not followed by the kernel command line: %q", args)
	}
	// The cached disk never appears: only the overlay is written.
	if strings.Contains(line, "disk.raw") {
		t.Errorf("qemu is given the cached disk: %s", line)
	}
	// Forwarded guest ports follow SSH, in host port order, from
	// loopback only.
	p.forwards = map[int]int{40100: 6443, 40050: 8080}
	if got, want := strings.Join(qemuArgs(p), " "), "-netdev user,id=net0,hostfwd=tcp:127.0.0.1:40022-:22,hostfwd=tcp:127.0.0.1:40050-:8080,hostfwd=tcp:127.0.0.1:40100-:6443 "; !strings.Contains(got, want) {
		t.Errorf("forwards: qemu args lack %q:\n%s", want, got)
	}
	p.forwards = nil
	p.accel = AccelKVM
	if kvm := strings.Join(qemuArgs(p), " "); !strings.Contains(kvm, "-accel kvm -cpu host") || strings.Contains(kvm, "tcg") {
		t.Errorf("kvm args: %s", kvm)
	}
}

func TestKernelCmdline(t *testing.T) {
	f := strings.Fields(KernelCmdline())
	for _, want := range []string{"root=/dev/vda", "console=ttyS0,115200", "systemd.unified_cgroup_hierarchy=1", "panic=-1"} {
		if !slices.Contains(f, want) {
			t.Errorf("kernel command line %q lacks %s", KernelCmdline(), want)
		}
	}
	// The guest must not fall back to the hybrid hierarchy.
	if slices.Contains(f, "systemd.legacy_systemd_cgroup_controller") || slices.Contains(f, "systemd.unified_cgroup_hierarchy=0") {
		t.Errorf("kernel command line asks for cgroup v1: %s", KernelCmdline())
	}
}

func TestOverlayArgs(t *testing.T) {
	got := strings.Join(overlayArgs("/c/disk.raw", "/s/o.qcow2"), " ")
	if got != "create -q -f qcow2 -b /c/disk.raw -F raw /s/o.qcow2" {
		t.Errorf("qemu-img args: %s", got)
	}
}

func TestImageKey(t *testing.T) {
	k := ImageKey()
	if k != ImageKey() || !strings.HasPrefix(k, "bookworm-") || len(k) != len("bookworm-")+12 {
		t.Fatalf("key %q is not stable bookworm-<12 hex>", k)
	}
	// Every input changes it: a guest file, a package, a unit.
	saved := guestFiles[0].content
	guestFiles[0].content += "# changed\n"
	if ImageKey() == k {
		t.Error("a changed guest file kept the key")
	}
	guestFiles[0].content = saved
	pkgs := guestSpec.Packages
	guestSpec.Packages = append(slices.Clip(pkgs), "less")
	if ImageKey() == k {
		t.Error("an added package kept the key")
	}
	guestSpec.Packages = pkgs
	masked := maskedUnits
	maskedUnits = append(slices.Clip(masked), "x.timer")
	if ImageKey() == k {
		t.Error("a masked unit kept the key")
	}
	maskedUnits = masked
	if ImageKey() != k {
		t.Error("restoring the inputs did not restore the key")
	}
	for _, p := range []string{"systemd", "systemd-sysv", "openssh-server", "linux-image-amd64", "etcd-server", "runc", "containernetworking-plugins", "iptables", "conntrack"} {
		if !slices.Contains(guestSpec.Packages, p) {
			t.Errorf("guest packages lack %s", p)
		}
	}
}

func TestWriteKeys(t *testing.T) {
	dir := t.TempDir()
	shares := []Share{{HostPath: "/c", ReadOnly: true}, {HostPath: "/o", GuestPath: "/mnt/o"}}
	if err := writeKeys(dir, "127.0.0.1:40022", shares); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		t.Fatalf("client key: %v", err)
	}
	auth, err := os.ReadFile(filepath.Join(dir, bootDir, bootAuthorizedKeys))
	if err != nil {
		t.Fatal(err)
	}
	authPub, _, _, _, err := ssh.ParseAuthorizedKey(auth)
	if err != nil || string(authPub.Marshal()) != string(signer.PublicKey().Marshal()) {
		t.Errorf("authorized_keys does not hold the client key: %v", err)
	}
	hostKey, err := os.ReadFile(filepath.Join(dir, bootDir, bootHostKey))
	if err != nil {
		t.Fatal(err)
	}
	host, err := ssh.ParsePrivateKey(hostKey)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := knownhosts.New(filepath.Join(dir, knownHostsFile))
	if err != nil {
		t.Fatal(err)
	}
	addr := &fakeAddr{"127.0.0.1:40022"}
	if err := cb("127.0.0.1:40022", addr, host.PublicKey()); err != nil {
		t.Errorf("known_hosts refuses the guest's host key: %v", err)
	}
	if err := cb("127.0.0.1:40022", addr, signer.PublicKey()); err == nil {
		t.Error("known_hosts accepts another key")
	}
	for _, f := range []string{keyFile, filepath.Join(bootDir, bootHostKey)} {
		if fi, _ := os.Stat(filepath.Join(dir, f)); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", f, fi.Mode().Perm())
		}
	}
	got, _ := os.ReadFile(filepath.Join(dir, bootDir, bootShares))
	if string(got) != "share0 /c ro\nshare1 /mnt/o rw\n" {
		t.Errorf("shares file:\n%s", got)
	}
}

type fakeAddr struct{ s string }

func (a *fakeAddr) Network() string { return "tcp" }
func (a *fakeAddr) String() string  { return a.s }

func TestConfigValidation(t *testing.T) {
	dir := t.TempDir()
	img := Image{Disk: filepath.Join(dir, "disk"), Kernel: filepath.Join(dir, "k"), Initrd: filepath.Join(dir, "i")}
	for _, f := range []string{img.Disk, img.Kernel, img.Initrd} {
		os.WriteFile(f, nil, 0o644)
	}
	// A real directory, so that only its name is wrong.
	commaDir := filepath.Join(dir, "a,security_model=passthrough")
	if err := os.Mkdir(commaDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{
		"bad name":        {Name: "Bad_Name", Image: img},
		"relative share":  {Image: img, Shares: []Share{{HostPath: "rel"}}},
		"missing share":   {Image: img, Shares: []Share{{HostPath: filepath.Join(dir, "nope")}}},
		"same guest path": {Image: img, Shares: []Share{{HostPath: dir}, {HostPath: "/tmp", GuestPath: dir}}},
		"comma in share":  {Image: img, Shares: []Share{{HostPath: commaDir}}},
		"space in guest":  {Image: img, Shares: []Share{{HostPath: dir, GuestPath: "/mnt/a b"}}},
		"no image":        {},
		"bad accelerator": {Image: img, Accel: "xen"},
		"image file gone": {Image: Image{Disk: "/nonexistent", Kernel: img.Kernel, Initrd: img.Initrd}},
	} {
		c.StateDir = filepath.Join(dir, "state")
		_, err := Up(context.Background(), c)
		if _, ok := err.(*ConfigError); !ok {
			t.Errorf("%s: got %v, want a ConfigError", name, err)
		}
		if strings.Contains(name, " in ") && (err == nil || !strings.Contains(err.Error(), "has a comma, a space")) {
			t.Errorf("%s: got %v, want the path named as the reason", name, err)
		}
		if _, err := os.Stat(c.StateDir); err == nil {
			if des, _ := os.ReadDir(c.StateDir); len(des) > 0 {
				t.Errorf("%s: Up left %v in the state dir", name, des)
			}
		}
	}
}

// TestDownKillsProcessGroupAndRemovesDir runs a process group standing in
// for qemu (its command line names the overlay, as qemu's does) and checks
// that Down, from another Instance loaded from the state file as skewtest
// vm down does, kills the whole group and removes the directory; and that a
// process whose command line does not name the overlay is never killed.
func TestDownKillsProcessGroupAndRemovesDir(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, "t")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, overlayFile)
	// sh (the group leader) and its child sleep ignore nothing: SIGTERM
	// ends both.
	cmd := osexec.Command("sh", "-c", "sleep 600 & wait", overlay)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	waitCmdline(t, cmd.Process.Pid, overlay)
	inst := &Instance{Name: "t", Dir: dir, PID: cmd.Process.Pid, Overlay: overlay}
	if err := inst.save(); err != nil {
		t.Fatal(err)
	}
	// A stranger with the same PID would not name the overlay.
	stranger := &Instance{Name: "t", Dir: t.TempDir(), PID: cmd.Process.Pid, Overlay: "/elsewhere/overlay.qcow2"}
	if stranger.ownsPID() {
		t.Fatal("a process not naming the overlay is taken as the instance's qemu")
	}
	loaded, err := Load(state, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Running() {
		t.Fatal("Running is false for a live process")
	}
	if err := loaded.Down(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the group leader still runs after Down")
	}
	// The killed sleep is reparented and reaped by another process; until
	// then, a zombie, it is still a member of the group. Under load that
	// takes a moment.
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(-cmd.Process.Pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Error("a process of the group still runs 5 s after Down")
			break
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Down left %s: %v", dir, err)
	}
	if _, err := Load(state, "t", nil); err == nil {
		t.Error("Load finds an instance after Down")
	}
}

// TestCleanStale: an instance whose qemu is gone (the harness was killed)
// is removed; a running one is left alone.
func TestCleanStale(t *testing.T) {
	state := t.TempDir()
	live := filepath.Join(state, "live")
	stale := filepath.Join(state, "stale")
	for _, d := range []string{live, stale} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	overlay := filepath.Join(live, overlayFile)
	cmd := osexec.Command("sh", "-c", "sleep 600 & wait", overlay)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	// CI once saw CleanStale remove the live instance, its stand-in
	// still running: see waitCmdline.
	waitCmdline(t, cmd.Process.Pid, overlay)
	if err := (&Instance{Name: "live", Dir: live, PID: cmd.Process.Pid, Overlay: overlay}).save(); err != nil {
		t.Fatal(err)
	}
	// A PID that is certainly not a qemu naming this overlay: our own.
	if err := (&Instance{Name: "stale", Dir: stale, PID: os.Getpid(), Overlay: filepath.Join(stale, overlayFile)}).save(); err != nil {
		t.Fatal(err)
	}
	removed, err := CleanStale(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{"stale"}) {
		t.Errorf("removed %v, want [stale]", removed)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale instance still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("running instance removed: %v", err)
	}
	if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
		t.Errorf("running instance's process killed: %v", err)
	}
}

// waitCmdline waits until process pid's command line names want, as a
// real qemu's names its overlay from its start. Start may return before
// the stand-in's command line is readable: the kernel resumes a vfork
// parent before the new image's argument area is set, and /proc/PID/cmdline
// reads empty (or the parent's) until then.
func waitCmdline(t *testing.T, pid int, want string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if last = strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(last, want) {
			return
		}
	}
	t.Fatalf("process %d's command line %q does not name %s after 5 s", pid, last, want)
}

// The default state directory is not in world-writable /tmp, where anyone
// could make it first.
func TestDefaultStateDirIsRoots(t *testing.T) {
	if d := DefaultStateDir(); !filepath.IsAbs(d) || strings.HasPrefix(d, os.TempDir()) || strings.HasPrefix(d, "/tmp") || strings.HasPrefix(d, "/var/lib/skewtest/") {
		t.Errorf("DefaultStateDir %s: want a directory of root's, outside /tmp and outside the run root (skewtest clean takes what is there for runs)", d)
	}
}

// A state directory someone else could write into is refused by Up, Load
// and CleanStale, naming the directory and the fix: its state files name
// the pids Down signals. A missing one is made 0700.
func TestStateDirOthersCanWriteIsRefused(t *testing.T) {
	// Should a check regress, the planted pid 1 below gets no signal.
	sent := recordSignals(t)
	defer func() {
		if len(*sent) > 0 {
			t.Errorf("signals sent: %q", *sent)
		}
	}()
	base := t.TempDir()
	img := Image{Disk: filepath.Join(base, "disk"), Kernel: filepath.Join(base, "k"), Initrd: filepath.Join(base, "i")}
	for _, f := range []string{img.Disk, img.Kernel, img.Initrd} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(name string, mode os.FileMode) string {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return d
	}
	cases := map[string]struct{ dir, want string }{
		"world writable":   {mkdir("world", 0o777), "writable by others (mode 0777)"},
		"group writable":   {mkdir("group", 0o770), "writable by others (mode 0770)"},
		"sticky /tmp-like": {mkdir("sticky", 0o1777), "writable by others"},
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(mkdir("target", 0o700), link); err != nil {
		t.Fatal(err)
	}
	cases["a symbolic link"] = struct{ dir, want string }{link, "not a directory"}
	if os.Geteuid() == 0 {
		other := mkdir("other", 0o700)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases["another user's"] = struct{ dir, want string }{other, "owned by uid 65534, not by you (uid 0)"}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// A planted instance whose pid is init's.
			if fi, err := os.Lstat(tc.dir); err == nil && fi.IsDir() {
				planted := filepath.Join(tc.dir, "default")
				_ = os.Mkdir(planted, 0o700)
				_ = os.WriteFile(filepath.Join(planted, stateFile), []byte(`{"name":"default","dir":"`+planted+`","pid":1,"overlay":"/"}`), 0o600)
			}
			_, upErr := Up(context.Background(), Config{Image: img, StateDir: tc.dir})
			_, loadErr := Load(tc.dir, "", nil)
			_, cleanErr := CleanStale(tc.dir, nil)
			for verb, err := range map[string]error{"Up": upErr, "Load": loadErr, "CleanStale": cleanErr} {
				if _, ok := err.(*ConfigError); !ok {
					t.Errorf("%s in a state directory %s: %v; want a ConfigError", verb, name, err)
					continue
				}
				for _, w := range []string{"state directory " + tc.dir, tc.want, "rm -r " + tc.dir, "chmod 0700 " + tc.dir} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: refusal does not say %q: %v", verb, w, err)
					}
				}
			}
		})
	}

	fresh := filepath.Join(base, "new", "state")
	if err := checkStateDir(fresh, true); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("a missing state directory made as %v, %v; want mode 0700", fi.Mode(), err)
	}
	if err := checkStateDir(filepath.Join(base, "absent"), false); err != nil {
		t.Errorf("a missing state directory without create: %v; want no error (it holds no instance)", err)
	}
}

// recordSignals replaces the signals vm sends with a record of them.
func recordSignals(t *testing.T) *[]string {
	t.Helper()
	var sent []string
	saved := killProcess
	killProcess = func(pid int, sig syscall.Signal) error {
		sent = append(sent, strconv.Itoa(pid)+" "+sig.String())
		return nil
	}
	t.Cleanup(func() { killProcess = saved })
	return &sent
}

// No pid from a state file ever makes vm signal init, every process
// (kill(-1)) or its own group (kill(0)), whatever the file says.
func TestNeverSignalsPIDOneOrLess(t *testing.T) {
	sent := recordSignals(t)
	for _, pid := range []int{1, 0, -1, -4242} {
		if err := signalGroup(pid, syscall.SIGTERM); err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("signalGroup(%d) = %v; want a refusal", pid, err)
		}
	}
	if err := signalGroup(4242, syscall.SIGTERM); err != nil {
		t.Errorf("signalGroup(4242): %v", err)
	}
	if want := []string{"-4242 terminated"}; !slices.Equal(*sent, want) {
		t.Errorf("signals sent %q, want only %q", *sent, want)
	}
	*sent = nil

	// A planted state naming init, with an "overlay" its command line
	// contains, as ownsPID checks.
	init1, _ := os.ReadFile("/proc/1/cmdline")
	overlay, _, _ := strings.Cut(string(init1), "\x00")
	if overlay == "" {
		overlay = "/"
	}
	state := t.TempDir()
	dir := filepath.Join(state, "planted")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	planted := &Instance{Name: "planted", Dir: dir, PID: 1, Overlay: overlay}
	if err := planted.save(); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(state, "planted", nil); err == nil || !strings.Contains(err.Error(), "records pid 1") {
		t.Errorf("Load of a state naming pid 1 = %v; want a refusal", err)
	}
	if planted.ownsPID() || planted.Running() {
		t.Error("pid 1 is taken for the instance's qemu")
	}
	if err := planted.kill(context.Background()); err == nil {
		t.Error("kill of pid 1's group succeeded; want a refusal")
	}
	if err := planted.Down(context.Background()); err != nil {
		t.Errorf("Down of a planted instance: %v", err)
	}
	if removed, err := CleanStale(state, nil); err != nil || len(removed) != 0 {
		t.Errorf("CleanStale after Down: %v, %v", removed, err)
	}
	if len(*sent) != 0 {
		t.Errorf("signals sent for a state naming pid 1: %q", *sent)
	}
}
