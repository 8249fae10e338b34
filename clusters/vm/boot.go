package vm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	osexec "os/exec" // qemu, a daemon in its own process group that outlives the call
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"sigs.k8s.io/skewtest/clusters/internal/hostports"
	"sigs.k8s.io/skewtest/internal/lines"
)

// Config says which guest to boot and what it shares with the host.
type Config struct {
	// Name names the instance (lower-case letters, digits, '-'); empty
	// means DefaultName. One instance of a name runs at a time.
	Name  string
	Image Image
	// StateDir holds the instance's directory; empty means
	// DefaultStateDir().
	StateDir string
	// Shares are host directories the guest mounts over 9p, at the same
	// paths unless GuestPath says otherwise.
	Shares []Share
	// Env is set for every command the instance runs (Instance.Command),
	// e.g. GoToolchain's.
	Env []string
	// Forwards are guest TCP ports forwarded from a free port on the
	// host's loopback, besides SSH (Instance.Forwards has the host
	// addresses): e.g. an API server in the guest that the host reaches.
	// The guest must listen on its network address (10.0.2.15 under
	// qemu's user networking), not its loopback.
	Forwards []int
	// SerialLog receives the guest's serial console (kernel and systemd);
	// empty means serial.log in the instance's directory, which Down
	// removes: point it into $ARTIFACTS to keep it.
	SerialLog string
	MemoryMiB int
	CPUs      int
	// Accel: AccelAuto (the default), AccelKVM or AccelTCG.
	Accel Accel
	// BootTimeout bounds the boot until SSH answers; 0 means
	// BootTimeoutKVM or BootTimeoutTCG.
	BootTimeout time.Duration
	// Detach lets qemu outlive the calling process (skewtest vm up). By
	// default qemu gets SIGKILL when the process that started it dies, so
	// a killed test leaves no guest running, only a stale state directory
	// that the next Up of the name, or skewtest clean, removes.
	Detach bool
	Logger *slog.Logger
}

// ConfigError is a Config Up refused before making anything: a bad
// name, share or image, a missing qemu, an instance of that name already up.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Share is a host directory mounted in the guest over 9p (virtfs).
type Share struct {
	HostPath string `json:"hostPath"`
	// GuestPath is where the guest mounts it; empty means HostPath.
	GuestPath string `json:"guestPath,omitempty"`
	ReadOnly  bool   `json:"readOnly"`
}

func (s Share) guestPath() string {
	if s.GuestPath == "" {
		return s.HostPath
	}
	return s.GuestPath
}

// Files of an instance's directory.
const (
	stateFile      = "state.json"
	overlayFile    = "overlay.qcow2"
	keyFile        = "id_ed25519"
	knownHostsFile = "known_hosts"
	qemuLogFile    = "qemu.log"
	bootDir        = "boot"
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,30}$`)

// Up boots an instance and returns once SSH answers with the host key it
// was given. On any failure everything it made is removed again (qemu
// killed, the instance's directory deleted) and the error quotes the end of
// the serial console. qemu runs in its own process group; with
// Config.Detach it outlives the calling process until Down.
func Up(ctx context.Context, cfg Config) (*Instance, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, &ConfigError{err}
	}
	log := cfg.Logger
	dir := filepath.Join(cfg.StateDir, cfg.Name)
	if err := checkStateDir(cfg.StateDir, true); err != nil {
		return nil, err
	}
	if err := removeStale(cfg.StateDir, cfg.Name, log); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, &ConfigError{fmt.Errorf("vm: instance %q is already up (or was not taken down): skewtest vm down -name %s (state in %s)", cfg.Name, cfg.Name, dir)}
		}
		return nil, err
	}
	inst := &Instance{
		Name: cfg.Name, Dir: dir, User: GuestUser, Shares: cfg.Shares, Env: cfg.Env, SerialLog: cfg.SerialLog,
		KeyFile: filepath.Join(dir, keyFile), KnownHostsFile: filepath.Join(dir, knownHostsFile),
		Overlay: filepath.Join(dir, overlayFile), log: log,
	}
	ok := false
	defer func() {
		if !ok {
			// A fresh context: ctx may be what ended the boot.
			dctx, cancel := context.WithTimeout(context.Background(), 2*downGrace)
			defer cancel()
			if err := inst.Down(dctx); err != nil {
				log.Error("vm: removing the failed instance", "name", cfg.Name, "err", err)
			}
		}
	}()
	// The state is written before anything it describes exists, and again
	// as each piece is made, so Down finds whatever there is.
	if err := inst.save(); err != nil {
		return nil, err
	}
	ports, err := hostports.Free(1 + len(cfg.Forwards))
	if err != nil {
		return nil, err
	}
	inst.SSHAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	forwards := map[int]int{}
	for i, guestPort := range cfg.Forwards {
		hostPort := ports[1+i]
		forwards[hostPort] = guestPort
		if inst.Forwards == nil {
			inst.Forwards = map[int]string{}
		}
		inst.Forwards[guestPort] = net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPort))
	}
	if err := writeKeys(dir, inst.SSHAddress, cfg.Shares); err != nil {
		return nil, err
	}
	if o, err := osexec.CommandContext(ctx, "qemu-img", overlayArgs(cfg.Image.Disk, inst.Overlay)...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("vm: qemu-img create overlay: %w\n%s", err, o)
	}
	accel := cfg.Accel
	if accel == AccelAuto {
		accel = chooseAccel(ctx, cfg.Image, dir, log)
	}
	inst.Accel = accel
	timeout := cfg.BootTimeout
	if timeout == 0 {
		timeout = BootTimeoutTCG
		if accel == AccelKVM {
			timeout = BootTimeoutKVM
		}
	}
	if err := os.MkdirAll(filepath.Dir(cfg.SerialLog), 0o755); err != nil {
		return nil, err
	}
	// A previous boot's console would be read as this boot's stages.
	if err := os.Remove(cfg.SerialLog); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	args := qemuArgs(qemuParams{
		name: cfg.Name, accel: accel, memoryMiB: cfg.MemoryMiB, cpus: cfg.CPUs,
		kernel: cfg.Image.Kernel, initrd: cfg.Image.Initrd, overlay: inst.Overlay,
		serialLog: cfg.SerialLog, sshPort: ports[0], forwards: forwards, bootDir: filepath.Join(dir, bootDir), shares: cfg.Shares,
		pidFile: filepath.Join(dir, "qemu.pid"),
	})
	qlog, err := os.Create(filepath.Join(dir, qemuLogFile))
	if err != nil {
		return nil, err
	}
	defer qlog.Close()
	// Not CommandContext: the guest outlives ctx and this process; Down
	// ends it.
	cmd := osexec.Command("qemu-system-x86_64", args...)
	cmd.Stdout, cmd.Stderr = qlog, qlog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !cfg.Detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	start := time.Now()
	log.Info("vm: starting qemu", "name", cfg.Name, "accel", accel, "memoryMiB", cfg.MemoryMiB, "cpus", cfg.CPUs,
		"ssh", inst.SSHAddress, "serial", cfg.SerialLog, "timeout", timeout)
	log.Debug("vm: qemu command", "argv", strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("vm: start qemu-system-x86_64 (apt-get install qemu-system-x86): %w", err)
	}
	inst.PID = cmd.Process.Pid
	inst.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(inst.exited)
	}()
	if err := inst.save(); err != nil {
		return nil, err
	}
	if err := inst.waitSSH(ctx, start, timeout); err != nil {
		return nil, err
	}
	inst.BootSeconds = time.Since(start).Seconds()
	if err := inst.save(); err != nil {
		return nil, err
	}
	log.Info("vm: guest is up", "name", cfg.Name, "ssh", inst.SSHAddress, "accel", accel, "took", time.Since(start).Round(time.Second))
	ok = true
	return inst, nil
}

func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if !nameRE.MatchString(c.Name) {
		return c, fmt.Errorf("vm: instance name %q: use lower-case letters, digits and '-', at most 31", c.Name)
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir()
	}
	if c.MemoryMiB == 0 {
		c.MemoryMiB = DefaultMemoryMiB
	}
	if c.CPUs == 0 {
		c.CPUs = DefaultCPUs
	}
	if c.Accel == "" {
		c.Accel = AccelAuto
	}
	switch c.Accel {
	case AccelAuto, AccelKVM, AccelTCG:
	default:
		return c, fmt.Errorf("vm: accel %q: use auto, kvm or tcg", c.Accel)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.SerialLog == "" {
		c.SerialLog = filepath.Join(c.StateDir, c.Name, "serial.log")
	}
	if c.SerialLog, _ = filepath.Abs(c.SerialLog); c.SerialLog == "" {
		return c, errors.New("vm: serial log path")
	}
	for _, f := range []string{c.Image.Disk, c.Image.Kernel, c.Image.Initrd} {
		if f == "" {
			return c, errors.New("vm: Config.Image is not a built image (vm.BuildImage)")
		}
		if _, err := os.Stat(f); err != nil {
			return c, fmt.Errorf("vm: image file: %w (skewtest vm image builds it)", err)
		}
	}
	seen := map[string]bool{}
	for i, s := range c.Shares {
		if !filepath.IsAbs(s.HostPath) || !filepath.IsAbs(s.guestPath()) {
			return c, fmt.Errorf("vm: share %q -> %q: paths must be absolute", s.HostPath, s.guestPath())
		}
		// qemu's -virtfs splits its value at commas, so a comma in the host
		// path would add options of the path's choosing; the guest reads
		// its shares as space-separated lines.
		for _, p := range []string{s.HostPath, s.guestPath()} {
			if strings.ContainsFunc(p, func(r rune) bool { return r == ',' || unicode.IsSpace(r) || unicode.IsControl(r) }) {
				return c, fmt.Errorf("vm: share path %q has a comma, a space or a control character, which qemu's -virtfs or the guest's "+
					"share list would split; share a directory whose path has none (a symbolic link to it will not do: qemu follows it)", p)
			}
		}
		fi, err := os.Stat(s.HostPath)
		if err != nil || !fi.IsDir() {
			return c, fmt.Errorf("vm: share %s: not a directory on the host", s.HostPath)
		}
		if seen[s.guestPath()] {
			return c, fmt.Errorf("vm: two shares mounted at %s", s.guestPath())
		}
		seen[s.guestPath()] = true
		c.Shares[i].HostPath = filepath.Clean(s.HostPath)
	}
	for _, port := range c.Forwards {
		if port < 1 || port > 65535 || port == 22 {
			return c, fmt.Errorf("vm: forwarded guest port %d: want 1-65535, not 22 (SSH is always forwarded)", port)
		}
	}
	for _, t := range []struct{ prog, pkg string }{{"qemu-system-x86_64", "qemu-system-x86"}, {"qemu-img", "qemu-utils"}} {
		if _, err := osexec.LookPath(t.prog); err != nil {
			return c, fmt.Errorf("vm: %s not found (apt-get install %s; scripts/install-deps.sh installs it)", t.prog, t.pkg)
		}
	}
	return c, nil
}

// qemuParams are the inputs of qemuArgs.
type qemuParams struct {
	name                        string
	accel                       Accel
	memoryMiB, cpus             int
	kernel, initrd, overlay     string
	serialLog, bootDir, pidFile string
	sshPort                     int
	// forwards maps host loopback ports to guest ports, besides SSH.
	forwards map[int]int
	shares   []Share
}

// shareTag is the 9p mount tag of share i.
func shareTag(i int) string { return "share" + strconv.Itoa(i) }

// qemuArgs is qemu-system-x86_64's command line: no default devices, the
// serial console to a file, the overlay as a virtio disk, user-mode
// networking with SSH forwarded from loopback only, and one 9p device per
// share plus the boot share.
func qemuArgs(p qemuParams) []string {
	args := []string{"-name", "skewtest-vm-" + p.name, "-nodefaults", "-no-user-config", "-no-reboot",
		"-machine", "q35"}
	switch p.accel {
	case AccelKVM:
		args = append(args, "-accel", "kvm", "-cpu", "host")
	default:
		// thread=multi: one host thread per vCPU.
		args = append(args, "-accel", "tcg,thread=multi", "-cpu", "max")
	}
	args = append(args,
		"-smp", strconv.Itoa(p.cpus), "-m", strconv.Itoa(p.memoryMiB),
		"-display", "none", "-monitor", "none", "-serial", "file:"+p.serialLog,
		"-kernel", p.kernel, "-initrd", p.initrd, "-append", KernelCmdline(),
		"-drive", "file="+p.overlay+",if=virtio,format=qcow2,cache=unsafe",
		"-netdev", netdev(p.sshPort, p.forwards),
		"-device", "virtio-net-pci,netdev=net0",
		"-device", "virtio-rng-pci",
		"-pidfile", p.pidFile,
		"-virtfs", virtfs(p.bootDir, bootTag, "boot", true),
	)
	for i, s := range p.shares {
		args = append(args, "-virtfs", virtfs(s.HostPath, shareTag(i), "fs"+strconv.Itoa(i), s.ReadOnly))
	}
	return args
}

// netdev is the user-mode network with SSH, and each of forwards (host
// port to guest port, in host port order), forwarded from loopback only.
func netdev(sshPort int, forwards map[int]int) string {
	v := fmt.Sprintf("user,id=net0,hostfwd=tcp:127.0.0.1:%d-:22", sshPort)
	hostPorts := slices.Sorted(maps.Keys(forwards))
	for _, h := range hostPorts {
		v += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", h, forwards[h])
	}
	return v
}

// virtfs is one -virtfs value. security_model=none: files keep the host's
// owners and modes, and what the guest's root writes belongs to the host's
// user running qemu.
func virtfs(path, tag, id string, readOnly bool) string {
	v := "local,path=" + path + ",mount_tag=" + tag + ",security_model=none,id=" + id
	if readOnly {
		v += ",readonly=on"
	}
	return v
}

// KernelCmdline is the guest kernel's command line: root on the virtio
// disk, the console on the serial port, the unified cgroup v2 hierarchy
// asked for explicitly (Debian 12's default, but the point of the guest),
// and panic=-1 with -no-reboot so that a panicking guest ends qemu instead
// of hanging until the timeout. mitigations=off: a throwaway guest under
// TCG has no secrets and every cycle counts.
func KernelCmdline() string {
	return strings.Join([]string{
		"root=/dev/vda", "rw", "rootfstype=ext4", "console=ttyS0,115200",
		"systemd.unified_cgroup_hierarchy=1", "panic=-1", "net.ifnames=0", "mitigations=off",
	}, " ")
}

// overlayArgs are qemu-img's arguments for a copy-on-write overlay on the
// cached disk, which the guest then never writes to.
func overlayArgs(disk, overlay string) []string {
	return []string{"create", "-q", "-f", "qcow2", "-b", disk, "-F", "raw", overlay}
}

// chooseAccel returns KVM when /dev/kvm exists and a probe boot of the
// guest kernel prints its banner in time, else TCG. On our nested hosts a
// KVM guest with Debian's kernel hangs before printing anything.
func chooseAccel(ctx context.Context, img Image, dir string, log *slog.Logger) Accel {
	if _, err := os.Stat("/dev/kvm"); err != nil {
		log.Info("vm: no /dev/kvm, using TCG (software emulation: expect minutes)")
		return AccelTCG
	}
	if err := probeKVM(ctx, img, dir); err != nil {
		log.Warn("vm: /dev/kvm exists but a KVM probe boot failed, using TCG", "err", err)
		return AccelTCG
	}
	log.Info("vm: KVM works, using it")
	return AccelKVM
}

// probeKVM boots the kernel alone under KVM (no disk: it panics at root
// mount and -no-reboot ends qemu) and checks that it printed its banner.
func probeKVM(ctx context.Context, img Image, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, kvmProbeTimeout)
	defer cancel()
	serial := filepath.Join(dir, "kvm-probe.log")
	defer os.Remove(serial)
	cmd := osexec.CommandContext(ctx, "qemu-system-x86_64", "-nodefaults", "-no-user-config", "-no-reboot",
		"-accel", "kvm", "-cpu", "host", "-m", "256", "-display", "none", "-monitor", "none",
		"-serial", "file:"+serial, "-kernel", img.Kernel, "-append", "console=ttyS0 panic=-1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return signalGroup(cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	b, _ := os.ReadFile(serial)
	if strings.Contains(string(b), "Linux version") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("no kernel banner within %s: %v %s", kvmProbeTimeout, err, lines.Last(string(out), 3))
	}
	return errors.New("no kernel banner on the serial console")
}

// bootStages are serial console lines worth reporting while waiting.
var bootStages = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`Linux version`), "kernel started"},
	{regexp.MustCompile(`Run /init as init process`), "initramfs"},
	{regexp.MustCompile(`systemd\[1\]: systemd \d+`), "systemd started (PID 1)"},
	{regexp.MustCompile(`skewtest-vm-setup: mounted`), "share mounted"},
	{regexp.MustCompile(`Reached target .*Basic System`), "basic system"},
	{regexp.MustCompile(`Started .*OpenBSD Secure Shell`), "sshd started"},
	{regexp.MustCompile(`Reached target .*Multi-User System`), "multi-user"},
	{regexp.MustCompile(`Kernel panic`), "KERNEL PANIC"},
}

// waitSSH waits until a command runs over SSH, reporting boot stages from
// the serial console and, every progressInterval, that it still waits.
func (i *Instance) waitSSH(ctx context.Context, start time.Time, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var offset int64
	lastReport := time.Now()
	var lastErr error
	for {
		offset = i.reportStages(offset, start)
		select {
		case <-i.exited:
			return fmt.Errorf("vm: qemu exited during boot after %s\n%s", time.Since(start).Round(time.Second), i.diagnostics())
		default:
		}
		actx, acancel := context.WithTimeout(ctx, sshTimeout)
		err := i.Command(actx, "true").Run()
		acancel()
		if err == nil {
			return nil
		}
		lastErr = err
		if time.Since(lastReport) >= progressInterval {
			i.log.Info("vm: waiting for SSH", "name", i.Name, "elapsed", time.Since(start).Round(time.Second), "timeout", timeout)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("vm: SSH to %s did not answer within %s (%v; last error: %v)\n%s", i.SSHAddress, timeout, context.Cause(ctx), lastErr, i.diagnostics())
		case <-i.exited:
		case <-time.After(sshRetryInterval):
		}
	}
}

// reportStages logs the boot stages in the serial log after offset and
// returns the new offset.
func (i *Instance) reportStages(offset int64, start time.Time) int64 {
	f, err := os.Open(i.SerialLog)
	if err != nil {
		return offset
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return offset
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			// An incomplete line is read again next time.
			return offset
		}
		offset += int64(len(line))
		for _, s := range bootStages {
			if s.re.MatchString(line) {
				i.log.Info("vm: boot: "+s.what, "name", i.Name, "elapsed", time.Since(start).Round(100*time.Millisecond))
			}
		}
	}
}

// diagnostics quotes the ends of the serial console and qemu's own log.
func (i *Instance) diagnostics() string {
	serial, _ := os.ReadFile(i.SerialLog)
	q, _ := os.ReadFile(filepath.Join(i.Dir, qemuLogFile))
	return fmt.Sprintf("serial console (%s), last lines:\n%s\nqemu:\n%s", i.SerialLog,
		lines.Last(string(serial), 25), lines.Last(string(q), 10))
}
