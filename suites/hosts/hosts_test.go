package hosts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/timeouts"
	"sigs.k8s.io/skewtest/clusters/vm"
	"sigs.k8s.io/skewtest/clusters/vm/kopsnode"
	"sigs.k8s.io/skewtest/internal/suiteconfig"
	"sigs.k8s.io/skewtest/internal/testgate"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// Budgets, sized for TCG (no usable KVM), where the guest runs CPU-heavy
// code 10-45 times slower than the host.
const (
	imageBudget  = 20 * time.Minute // debootstrap with the kernel, on a cold cache
	bootBudget   = vm.BootTimeoutTCG + time.Minute
	runBudget    = 100 * time.Minute // the sign-off plan inside the guest
	hostsSubdir  = "hosts"
	instanceName = "hosts"
)

// ContinueOnFailure: the sign-off plan's result is worth having even when a
// check of the guest's shape failed.
var _ = Describe("local provider on a cgroup v2 host with systemd as PID 1", Ordered, ContinueOnFailure, Label("hosts"), func() {
	var (
		inst      *vm.Instance
		logger    *slog.Logger
		out       string // $ARTIFACTS/hosts, shared read-write
		private   string // shared read-write too, outside $ARTIFACTS: the kops-style node's admin kubeconfig
		bin       string // skewtest, built on the host
		binDir    string // bin and the other programs built on the host, shared read-only
		src       string // the module's source tree, shared read-only
		cache     string
		stateDir  string
		qemuProcs func() []string
		before    []string
		busybox   string // a static busybox, in the guest too
		kops      *kopsNode
	)

	BeforeAll(func(ctx SpecContext) {
		if os.Geteuid() != 0 {
			testgate.SkipOrFail(GinkgoT(), "make test-hosts needs root (debootstrap for the guest image, qemu's 9p shares keep file owners)",
				"run it as root: sudo -E make test-hosts")
		}
		logger = slog.New(slog.NewTextHandler(GinkgoWriter, nil))
		cache = binaries.DefaultCacheDir()
		artifacts := os.Getenv("ARTIFACTS")
		if artifacts == "" {
			artifacts = filepath.Join(moduleRoot(), "_artifacts")
		}
		out = filepath.Join(artifacts, hostsSubdir)
		Expect(os.MkdirAll(out, 0o755)).To(Succeed())
		// A temporary directory of the test's own (os.MkdirTemp: not a
		// predictable name), which CI does not upload.
		private = GinkgoT().TempDir()
		src = moduleRoot()
		// The default state dir, so that skewtest clean finds the instance
		// of a killed run.
		stateDir = vm.DefaultStateDir()
		qemuProcs = func() []string { return processesNaming("skewtest-vm-" + instanceName) }
		before = qemuProcs()

		By("resolving the plan's binaries on the host (the guest's cache share is read-only)")
		resolveOnHost(ctx, logger, cache)

		By("building skewtest for the guest (CGO_ENABLED=0)")
		binDir = GinkgoT().TempDir()
		var err error
		bin, err = suiteconfig.BuildSkewtest(ctx, binDir, "CGO_ENABLED=0")
		Expect(err).NotTo(HaveOccurred())
		busybox = filepath.Join(binDir, "busybox")

		By("compiling on the host the programs the local provider compiles at run time")
		prebuildGuestPrograms(ctx, src, binDir)
		By("building the fakes of kops and AWS for the kops provider's runs")
		buildFakeAWS(ctx, src, binDir)

		By("copying a static busybox for the kops-style node's workload image (no registry in the guest)")
		bb, err := os.ReadFile(busyboxPath)
		Expect(err).NotTo(HaveOccurred(), "a static busybox at %s: apt-get install busybox-static (scripts/install-deps.sh)", busyboxPath)
		Expect(os.WriteFile(filepath.Join(binDir, "busybox"), bb, 0o755)).To(Succeed())

		By("building (or finding) the guest image")
		ictx, cancel := context.WithTimeout(ctx, imageBudget)
		defer cancel()
		img, err := vm.BuildImage(ictx, vm.ImageConfig{CacheDir: cache, Logger: logger})
		Expect(err).NotTo(HaveOccurred())

		By("booting the guest")
		goShares, goEnv, err := vm.GoToolchain(ctx)
		Expect(err).NotTo(HaveOccurred())
		shares := append([]vm.Share{
			{HostPath: cache, ReadOnly: true},
			{HostPath: src, ReadOnly: true},
			{HostPath: binDir, ReadOnly: true},
			{HostPath: out},
			{HostPath: private},
		}, goShares...)
		bctx, cancel := context.WithTimeout(ctx, bootBudget)
		defer cancel()
		start := time.Now()
		inst, err = vm.Up(bctx, vm.Config{
			Name: instanceName, Image: img, StateDir: stateDir, Shares: shares, Forwards: []int{kopsnode.APIServerPort},
			Env:       append(goEnv, "SKEWTEST_CACHE="+cache, prebuiltEnv+"="+binDir),
			SerialLog: filepath.Join(out, "serial.log"), Logger: logger,
		})
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("guest boot", fmt.Sprintf("%s until SSH answered (%s)", time.Since(start).Round(time.Second), inst.Accel))
	}, NodeTimeout(imageBudget+bootBudget+30*time.Minute))

	AfterAll(func(ctx SpecContext) {
		if inst == nil {
			return
		}
		if kops != nil {
			// A spec that failed before tearing it down itself.
			_ = kops.stop(ctx)
		}
		Expect(inst.Down(ctx)).To(Succeed())
		By("checking that nothing of the guest is left on the host")
		Expect(qemuProcs()).To(Equal(before), "qemu processes of the instance after Down")
		_, err := os.Stat(filepath.Join(stateDir, instanceName))
		Expect(os.IsNotExist(err)).To(BeTrue(), "the instance's state (overlay, keys) after Down: %v", err)
	}, NodeTimeout(kopsTeardownBudget+2*time.Minute))

	It("runs systemd as PID 1", func(ctx SpecContext) {
		Expect(guest(ctx, inst, "cat", "/proc/1/comm")).To(Equal("systemd"))
		state, _ := guestOutput(ctx, inst, "systemctl", "is-system-running", "--wait")
		AddReportEntry("systemctl is-system-running", state)
		Expect(state).To(BeElementOf("running", "degraded"), "systemd did not finish booting")
	}, NodeTimeout(5*time.Minute))

	It("has the unified cgroup v2 hierarchy and no v1 controllers", func(ctx SpecContext) {
		Expect(guest(ctx, inst, "stat", "-fc", "%T", "/sys/fs/cgroup")).To(Equal("cgroup2fs"))
		var v1 []string
		for _, line := range strings.Split(guest(ctx, inst, "cat", "/proc/mounts"), "\n") {
			// device mountpoint fstype options ...: "cgroup" is v1, "cgroup2" v2.
			if f := strings.Fields(line); len(f) > 2 && f[2] == "cgroup" {
				v1 = append(v1, f[1])
			}
		}
		Expect(v1).To(BeEmpty(), "cgroup v1 hierarchies are mounted")
		Expect(guest(ctx, inst, "cat", "/sys/fs/cgroup/cgroup.controllers")).To(ContainSubstring("memory"))
	}, NodeTimeout(5*time.Minute))

	It("passes the default sign-off plan on the local provider inside the guest", func(ctx SpecContext) {
		start := time.Now()
		w := GinkgoWriter
		cmd := inst.Command(ctx, "sh", "-c", "cd "+exec.ShellQuote(src)+" && exec "+exec.ShellQuote(bin)+" run").
			SetEnv("ARTIFACTS="+out, "PROVIDER=local", "PLAN="+skewrun.DefaultPlan, guestTimeoutFactor(inst.Accel)).
			SetStdout(w).SetStderr(w)
		err := cmd.Run()
		took := time.Since(start).Round(time.Second)
		AddReportEntry("sign-off plan in the guest", fmt.Sprintf("%s, exit %d", took, exec.ExitCode(err)))
		fmt.Fprintf(GinkgoWriter, "skewtest run in the guest took %s (exit %d); reports in %s\n", took, exec.ExitCode(err), out)
		Expect(err).NotTo(HaveOccurred(), "skewtest run in the guest (reports and logs: %s, serial console: %s)", out, inst.SerialLog)
		By("finding the guest's report on the host")
		reports, _ := filepath.Glob(filepath.Join(out, "*", "report.md"))
		Expect(reports).NotTo(BeEmpty(), "no report.md under %s", out)
	}, NodeTimeout(runBudget))

	It("leaves no systemd unit of the run in the guest", func(ctx SpecContext) {
		units := guest(ctx, inst, "systemctl", "list-units", "--all", "--plain", "--no-legend", "skewtest*")
		AddReportEntry("systemctl list-units --all 'skewtest*' after the local run", units)
		Expect(runUnits(units)).To(BeEmpty(), "units of the run left after its teardown (the guest's own %s aside)", vmSetupUnit)
		Expect(guestOutput(ctx, inst, "sh", "-c", "ls -d /sys/fs/cgroup/system.slice/skewtest-* 2>/dev/null || true")).To(BeEmpty(), "cgroups of the run left")
	}, NodeTimeout(5*time.Minute))

	It("serves a kops-style node of a real cluster from the guest", func(ctx SpecContext) {
		start := time.Now()
		kops = startKopsNode(inst, src, bin, busybox, filepath.Join(private, "kops-node"))
		select {
		case <-kops.ready:
		case err := <-kops.done:
			kops = nil
			Fail(fmt.Sprintf("skewtest vm kops-node ended before its node was ready: %v", err))
		case <-ctx.Done():
			Fail("the kops-style node was not ready in time")
		}
		AddReportEntry("kops-style node up in the guest", fmt.Sprintf("%s (local provider's control plane, node handed to systemd)", time.Since(start).Round(time.Second)))
		info := kops.info
		Expect(guest(ctx, inst, "systemctl", "show", "-p", "FragmentPath,EnvironmentFiles,Restart,ActiveState", "--value", kopsnode.Unit)).
			To(And(ContainSubstring(kopsnode.UnitFile), ContainSubstring(kopsnode.EnvironmentFile), ContainSubstring("always"), ContainSubstring("active")))
		Expect(guest(ctx, inst, "cat", kopsnode.EnvironmentFile)).To(ContainSubstring("--config=" + kopsnode.ConfigFile))
		kops.ownSHA = guest(ctx, inst, "sh", "-c", "sha256sum "+kopsnode.Binary+" | cut -d' ' -f1")
		Expect(kops.ownSHA).To(HaveLen(64))
		By("reaching the API server from the host through the forward")
		Expect(nodeState(ctx, kops.kubeconfig(), info.Node)).To(Equal("Ready " + info.KubeletVersion))
	}, NodeTimeout(kopsBudget))

	It("passes the default sign-off plan through the existing provider, from the host, against the guest's node", func(ctx SpecContext) {
		Expect(kops).NotTo(BeNil(), "no kops-style node")
		start := time.Now()
		cmd := suiteconfig.Interruptible(osexec.CommandContext(ctx, bin, "run"))
		cmd.Dir, cmd.Env = src, append(os.Environ(), kops.runEnv(inst, filepath.Join(out, "existing"))...)
		cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
		err := cmd.Run()
		took := time.Since(start).Round(time.Second)
		AddReportEntry("sign-off plan through the existing provider", fmt.Sprintf("%s, exit %d", took, exitCode(err)))
		Expect(err).NotTo(HaveOccurred(), "skewtest run with PROVIDER=existing (reports: %s)", filepath.Join(out, "existing"))
		reports, _ := filepath.Glob(filepath.Join(out, "existing", "*", "report.md"))
		Expect(reports).NotTo(BeEmpty(), "no report.md under %s", filepath.Join(out, "existing"))
		kops.expectOwnKubelet(ctx, inst)
	}, NodeTimeout(runBudget))

	It("puts the node's own kubelet back with skewtest clean after the harness is SIGKILLed in the middle of a hop", func(ctx SpecContext) {
		Expect(kops).NotTo(BeNil(), "no kops-style node")
		start := time.Now()
		cmd := suiteconfig.Interruptible(osexec.CommandContext(ctx, bin, "run"))
		cmd.Dir, cmd.Env = src, append(os.Environ(), kops.runEnv(inst, filepath.Join(out, "existing-killed"))...)
		logs, err := cmd.StderrPipe()
		Expect(err).NotTo(HaveOccurred())
		cmd.Stdout = GinkgoWriter
		Expect(cmd.Start()).To(Succeed())
		stateDir, swapped := watchForSwap(logs, killVersion)
		Expect(swapped).To(BeTrue(), "the run ended before it swapped the kubelet to %s", killVersion)
		Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		werr := cmd.Wait()
		var ee *osexec.ExitError
		Expect(errors.As(werr, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL).To(BeTrue(), "the harness ended with %v, not SIGKILL", werr)
		killedAt := time.Since(start).Round(time.Second)
		Expect(stateDir).NotTo(BeEmpty(), "the run never logged its state directory")
		active, _ := guestOutput(ctx, inst, "systemctl", "is-active", kopsnode.Unit)
		Expect(active).NotTo(Equal("active"), "the kubelet runs after a kill between swap and start")

		By("skewtest clean " + stateDir)
		cstart := time.Now()
		clean := suiteconfig.Interruptible(osexec.CommandContext(ctx, bin, "clean", stateDir))
		clean.Dir, clean.Env = src, append(os.Environ(), kops.runEnv(inst, filepath.Join(out, "existing-killed"))...)
		clean.Stdout, clean.Stderr = GinkgoWriter, GinkgoWriter
		Expect(clean.Run()).To(Succeed(), "skewtest clean %s", stateDir)
		AddReportEntry("SIGKILL mid-hop, then skewtest clean", fmt.Sprintf("killed %s after the start, after the swap to %s; clean took %s", killedAt, killVersion, time.Since(cstart).Round(time.Second)))
		_, err = os.Stat(stateDir)
		Expect(os.IsNotExist(err)).To(BeTrue(), "the state directory after clean: %v", err)
		kops.expectOwnKubelet(ctx, inst)
	}, NodeTimeout(runBudget))

	It("passes the default sign-off plan through the kops provider in the guest (fake kops on PATH; fake EC2, ELB and S3 at AWS_ENDPOINT_URL), then deletes the cluster and sweeps", func(ctx SpecContext) {
		Expect(kops).NotTo(BeNil(), "no kops-style node")
		start := time.Now()
		art := filepath.Join(out, "kops")
		r := kops.startKopsRun(inst, src, bin, binDir, "signoff", art)
		err := r.wait()
		AddReportEntry("sign-off plan through the kops provider", fmt.Sprintf("%s, exit %d", time.Since(start).Round(time.Second), exitCode(err)))
		Expect(err).NotTo(HaveOccurred(), "skewtest run with PROVIDER=kops in the guest (reports: %s)", art)
		reports, _ := filepath.Glob(filepath.Join(art, "*", "report.md"))
		Expect(reports).NotTo(BeEmpty(), "no report.md under %s", art)
		r.expectDeletedAndSwept(ctx, inst)
		r.expectNoSecret()
		kops.expectOwnKubelet(ctx, inst)
	}, NodeTimeout(runBudget))

	It("deletes the kops cluster and puts the node's own kubelet back when the kops run is interrupted (SIGINT) in the middle of a hop", func(ctx SpecContext) {
		Expect(kops).NotTo(BeNil(), "no kops-style node")
		start := time.Now()
		art := filepath.Join(out, "kops-interrupted")
		r := kops.startKopsRun(inst, src, bin, binDir, "interrupted", art)
		r.interruptAfterSwap(ctx, inst, killVersion)
		interruptedAt := time.Since(start).Round(time.Second)
		err := r.wait()
		AddReportEntry("kops run interrupted mid-hop", fmt.Sprintf("SIGINT %s after the start, after the swap to %s; the run ended %s later, exit %d",
			interruptedAt, killVersion, (time.Since(start)-interruptedAt).Round(time.Second), exitCode(err)))
		Expect(exitCode(err)).To(Equal(exitInterrupted), "skewtest run with PROVIDER=kops after SIGINT: %v", err)
		r.expectDeletedAndSwept(ctx, inst)
		r.expectNoSecret()
		kops.expectOwnKubelet(ctx, inst)
	}, NodeTimeout(runBudget))

	It("removes the kops-style node and its cluster from the guest", func(ctx SpecContext) {
		Expect(kops).NotTo(BeNil(), "no kops-style node")
		Expect(kops.stop(ctx)).To(Succeed(), "skewtest vm kops-node's teardown")
		kops = nil
		Expect(guestOutput(ctx, inst, "sh", "-c", "ls "+strings.Join([]string{kopsnode.UnitFile, kopsnode.Binary + "*", kopsnode.EnvironmentFile, kopsnode.ConfigFile}, " ")+" 2>/dev/null || true")).To(BeEmpty(), "kops layout files left")
		units := guest(ctx, inst, "systemctl", "list-units", "--all", "--plain", "--no-legend", "skewtest*", kopsnode.Unit+".service")
		Expect(runUnits(units)).To(BeEmpty(), "units left")
	}, NodeTimeout(kopsTeardownBudget))

	It("leaves no private key and no admin credential in $ARTIFACTS", func() {
		found := secretsIn(out)
		AddReportEntry("files under $ARTIFACTS/hosts checked for keys and credentials", fmt.Sprint(found.files))
		Expect(found.files).To(BeNumerically(">", 0), "nothing under %s to check", out)
		Expect(found.hits).To(BeEmpty(), "CI uploads $ARTIFACTS: whoever reads it would hold the cluster")
	})
})

// guest runs argv in the guest and returns its trimmed stdout; it must
// succeed.
func guest(ctx context.Context, inst *vm.Instance, argv ...string) string {
	GinkgoHelper()
	out, err := guestOutput(ctx, inst, argv...)
	Expect(err).NotTo(HaveOccurred(), "%s in the guest", strings.Join(argv, " "))
	return out
}

func guestOutput(ctx context.Context, inst *vm.Instance, argv ...string) (string, error) {
	res, err := exec.Output(ctx, inst, argv...)
	return strings.TrimSpace(res.Stdout), err
}

type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.a.Write(p)
	return t.b.Write(p)
}

// resolveOnHost builds or finds every binary the default plan needs on the
// local provider, so that the guest only reads the cache.
func resolveOnHost(ctx context.Context, logger *slog.Logger, cache string) {
	GinkgoHelper()
	mb := &binaries.ModuleBuilder{CacheDir: cache, Logger: logger}
	seen := map[string]bool{}
	plan := strings.Split(skewrun.DefaultPlan, ",")
	for i, v := range plan {
		if seen[v] {
			continue
		}
		seen[v] = true
		components := []string{"kubelet"}
		if i == 0 {
			// The API server runs the plan's newest version, its first.
			components = append(components, "kube-apiserver", "kube-controller-manager", "kube-scheduler")
		}
		_, err := mb.Build(ctx, version.MustParseSemantic(v), components...)
		Expect(err).NotTo(HaveOccurred())
	}
	_, err := mb.BuildTool(ctx, binaries.Containerd)
	Expect(err).NotTo(HaveOccurred())
}

// guestBuilds are the programs the local provider compiles at run time
// (clusters/internal/images: its pods' program and its CSI driver).
var guestBuilds = map[string]string{
	"podbin":              "./clusters/internal/podbin",
	"skewtest-csi-driver": "./clusters/internal/csidriver/cmd/skewtest-csi-driver",
}

// prebuiltEnv is clusters/internal/images.PrebuiltEnv.
const prebuiltEnv = "SKEWTEST_PREBUILT"

// prebuildGuestPrograms compiles guestBuilds on the host into dir, with
// the images package's flags, for the guest to take (prebuiltEnv): in
// the emulated guest go build took minutes even with a warm build cache
// and starved the control plane starting beside it (an API server
// exited; another's watch cache never synced).
func prebuildGuestPrograms(ctx context.Context, src, dir string) {
	GinkgoHelper()
	for name, pkg := range guestBuilds {
		build := osexec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(dir, name), pkg)
		build.Dir = src
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		o, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "go build %s: %s", pkg, o)
	}
}

// processesNaming lists the host's processes whose command line contains s.
func processesNaming(s string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// moduleRoot is the skewtest source tree this test runs from.
func moduleRoot() string {
	wd, err := os.Getwd()
	Expect(err).NotTo(HaveOccurred())
	return filepath.Dir(filepath.Dir(wd))
}

// tcgTimeoutFactor stretches the run's waits in an emulated guest, where
// the same programs run 10-45 times slower (docs/measurements.md); under
// KVM they run at about the host's speed and keep their timeouts.
const tcgTimeoutFactor = 10

// guestTimeoutFactor is the timeouts.FactorEnv setting for a guest run
// under accel.
func guestTimeoutFactor(accel vm.Accel) string {
	if accel == vm.AccelTCG {
		return fmt.Sprintf("%s=%d", timeouts.FactorEnv, tcgTimeoutFactor)
	}
	return timeouts.FactorEnv + "=1"
}
