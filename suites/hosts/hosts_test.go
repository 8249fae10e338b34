package hosts

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"sigs.k8s.io/skewtest/internal/secretscan"
	"sigs.k8s.io/skewtest/internal/suiteconfig"
	"sigs.k8s.io/skewtest/internal/testgate"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// Budgets, sized for TCG (no usable KVM), where the guest runs CPU-heavy
// code 10-45 times slower than the host.
const (
	imageBudget = 40 * time.Minute // debootstrap with the kernel, on a cold cache
	// bootBudget is above vm up's own bound until SSH answers under TCG
	// (15 min), so that vm up's error, which names the serial log, is
	// the one seen.
	bootBudget   = 20 * time.Minute
	runBudget    = 100 * time.Minute // the sign-off plan inside the guest
	hostsSubdir  = "hosts"
	instanceName = "hosts"
)

// ContinueOnFailure: the sign-off plan's result is worth having even when a
// check of the guest's shape failed.
var _ = Describe("local provider on a cgroup v2 host with systemd as PID 1", Ordered, ContinueOnFailure, Label("hosts"), func() {
	var (
		g       *guestVM
		logger  *slog.Logger
		out     string // $ARTIFACTS/hosts, shared read-write
		private string // shared read-write too, outside $ARTIFACTS: the kops-style node's admin kubeconfig
		bin     string // skewtest, built on the host
		binDir  string // bin and the other programs built on the host, shared read-only
		src     string // the module's source tree, shared read-only
		cache   string
		qemu    []string // the host processes of the guest (qemu)
		busybox string   // a static busybox, in the guest too
		kops    *kopsNode
		foreign *foreignWorkload // someone else's, in the node's cluster
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
		By("resolving the plan's binaries on the host (the guest's cache share is read-only)")
		resolveOnHost(ctx, logger, cache)

		// In the emulated guest go build took minutes even with a warm
		// build cache and starved the control plane starting beside it (an
		// API server exited; another's watch cache never synced): the
		// guest's skewtest carries its helper programs, as bin/skewtest does.
		By("building skewtest for the guest as make skewtest does (static, carrying its helper programs)")
		binDir = GinkgoT().TempDir()
		var err error
		bin, err = suiteconfig.BuildSkewtestWithHelpers(ctx, binDir)
		Expect(err).NotTo(HaveOccurred())
		busybox = filepath.Join(binDir, "busybox")

		By("building the fakes of kops and AWS for the kops provider's runs")
		buildFakeAWS(ctx, src, binDir)

		By("copying a static busybox for the kops-style node's workload image (no registry in the guest)")
		bb, err := os.ReadFile(busyboxPath)
		Expect(err).NotTo(HaveOccurred(), "a static busybox at %s: apt-get install busybox-static (scripts/install-deps.sh)", busyboxPath)
		Expect(os.WriteFile(filepath.Join(binDir, "busybox"), bb, 0o755)).To(Succeed())

		By("building (or finding) the guest image: skewtest vm image")
		ictx, cancel := context.WithTimeout(ctx, imageBudget)
		defer cancel()
		_, err = skewtest(ictx, bin, "vm", "image")
		Expect(err).NotTo(HaveOccurred())

		By("booting the guest: skewtest vm up")
		// A guest of this name left by a killed suite is not this run's:
		// vm up refuses it, and skewtest vm down -name hosts removes it.
		bctx, cancel := context.WithTimeout(ctx, bootBudget)
		defer cancel()
		start := time.Now()
		g, err = upGuest(bctx, bin, instanceName,
			"-go", "-share", src+":ro", "-share", binDir+":ro", "-share", out, "-share", private,
			"-forward", fmt.Sprint(guestAPIServerPort),
			"-serial-log", filepath.Join(out, "serial.log"))
		Expect(err).NotTo(HaveOccurred())
		Expect(g.inst.Running).To(BeTrue(), "vm show says the guest's qemu is not running")
		// qemu's command line names the instance's directory.
		qemu = processesNaming(g.inst.Dir)
		Expect(qemu).NotTo(BeEmpty(), "no host process names the instance's directory %s", g.inst.Dir)
		AddReportEntry("guest boot", fmt.Sprintf("%s until SSH answered (%s)", time.Since(start).Round(time.Second), g.inst.Accel))
	}, NodeTimeout(imageBudget+bootBudget+30*time.Minute))

	AfterAll(func(ctx SpecContext) {
		if g == nil {
			return
		}
		if kops != nil {
			// A spec that failed before tearing it down itself.
			_ = kops.stop(ctx)
		}
		Expect(g.down(ctx)).To(Succeed())
		By("checking that nothing of the guest is left on the host")
		Expect(processesNaming(g.inst.Dir)).To(BeEmpty(), "processes of the instance after vm down")
		_, err := os.Stat(g.inst.Dir)
		Expect(os.IsNotExist(err)).To(BeTrue(), "the instance's directory (overlay, keys, state) after vm down: %v", err)
		_, err = skewtest(ctx, bin, "vm", "show", "-name", instanceName)
		Expect(err).To(HaveOccurred(), "skewtest vm show still finds the instance after vm down")
	}, NodeTimeout(kopsTeardownBudget+2*time.Minute))

	It("runs systemd as PID 1", func(ctx SpecContext) {
		Expect(g.must(ctx, "cat", "/proc/1/comm")).To(Equal("systemd"))
		state, _ := g.output(ctx, "systemctl", "is-system-running", "--wait")
		AddReportEntry("systemctl is-system-running", state)
		Expect(state).To(BeElementOf("running", "degraded"), "systemd did not finish booting")
	}, NodeTimeout(5*time.Minute))

	It("has the unified cgroup v2 hierarchy and no v1 controllers", func(ctx SpecContext) {
		Expect(g.must(ctx, "stat", "-fc", "%T", "/sys/fs/cgroup")).To(Equal("cgroup2fs"))
		var v1 []string
		for _, line := range strings.Split(g.must(ctx, "cat", "/proc/mounts"), "\n") {
			// device mountpoint fstype options ...: "cgroup" is v1, "cgroup2" v2.
			if f := strings.Fields(line); len(f) > 2 && f[2] == "cgroup" {
				v1 = append(v1, f[1])
			}
		}
		Expect(v1).To(BeEmpty(), "cgroup v1 hierarchies are mounted")
		Expect(g.must(ctx, "cat", "/sys/fs/cgroup/cgroup.controllers")).To(ContainSubstring("memory"))
	}, NodeTimeout(5*time.Minute))

	It("passes the default sign-off plan on the local provider inside the guest", func(ctx SpecContext) {
		start := time.Now()
		w := GinkgoWriter
		env := []string{"ARTIFACTS=" + out, "PROVIDER=local", "PLAN=" + plan.Default, g.timeoutFactor()}
		// On an interrupted suite, vm exec ends with SIGINT, and kills the
		// run in the guest, which vm down then discards.
		cmd := suiteconfig.Interruptible(g.command(ctx, envArgv(env, "sh", "-c", "cd "+exec.ShellQuote(src)+" && exec "+exec.ShellQuote(bin)+" run")...))
		cmd.Stdout, cmd.Stderr = w, w
		err := cmd.Run()
		took := time.Since(start).Round(time.Second)
		AddReportEntry("sign-off plan in the guest", fmt.Sprintf("%s, exit %d", took, exec.ExitCode(err)))
		fmt.Fprintf(GinkgoWriter, "skewtest run in the guest took %s (exit %d); reports in %s\n", took, exec.ExitCode(err), out)
		Expect(err).NotTo(HaveOccurred(), "skewtest run in the guest (reports and logs: %s, serial console: %s)", out, g.inst.SerialLog)
		By("finding the guest's report on the host")
		reports, _ := filepath.Glob(filepath.Join(out, "*", "report.md"))
		Expect(reports).NotTo(BeEmpty(), "no report.md under %s", out)
	}, NodeTimeout(runBudget))

	It("leaves no systemd unit of the run in the guest", func(ctx SpecContext) {
		units := g.must(ctx, "systemctl", "list-units", "--all", "--plain", "--no-legend", "skewtest*")
		AddReportEntry("systemctl list-units --all 'skewtest*' after the local run", units)
		Expect(runUnits(units)).To(BeEmpty(), "units of the run left after its teardown (the guest's own %s aside)", vmSetupUnit)
		Expect(g.output(ctx, "sh", "-c", "ls -d /sys/fs/cgroup/system.slice/skewtest-* 2>/dev/null || true")).To(BeEmpty(), "cgroups of the run left")
	}, NodeTimeout(5*time.Minute))

	It("serves a kops-style node of a real cluster from the guest, and a second node beside it", func(ctx SpecContext) {
		start := time.Now()
		kops = startKopsNode(g, src, bin, busybox, filepath.Join(private, "kops-node"))
		select {
		case <-kops.ready:
		case err := <-kops.done:
			kops = nil
			Fail(fmt.Sprintf("skewtest vm kops-node ended before its node was ready: %v", err))
		case <-ctx.Done():
			Fail("the kops-style node was not ready in time")
		}
		AddReportEntry("kops-style node up in the guest", fmt.Sprintf("%s (local provider's control plane, %d nodes handed to systemd)", time.Since(start).Round(time.Second), len(kops.info.nodes())))
		Expect(kops.info.nodes()).To(HaveLen(kopsNodes))
		kops.ownSHA = map[string]string{}
		for _, l := range kops.info.nodes() {
			Expect(g.must(ctx, "systemctl", "show", "-p", "FragmentPath,EnvironmentFiles,Restart,ActiveState", "--value", l.KubeletUnit)).
				To(And(ContainSubstring(l.KubeletUnitFile), ContainSubstring(l.KubeletEnvironmentFile), ContainSubstring("always"), ContainSubstring("active")))
			Expect(g.must(ctx, "cat", l.KubeletEnvironmentFile)).To(ContainSubstring("--config=" + l.KubeletConfigFile))
			sha := g.must(ctx, "sh", "-c", `sha256sum "$1" | cut -d' ' -f1`, "sh", l.KubeletBinary)
			Expect(sha).To(HaveLen(64))
			kops.ownSHA[l.Node] = sha
			By("reaching the API server from the host through the forward: node " + l.Node)
			Expect(nodeState(ctx, kops.kubeconfig(), l.Node)).To(Equal("Ready " + kops.info.KubeletVersion))
		}
		// The first node is laid out as kops lays out its one kubelet.
		Expect(kops.info.KubeletUnitFile).To(Equal("/lib/systemd/system/kubelet.service"))
		Expect(kops.info.KubeletBinary).To(Equal("/usr/local/bin/kubelet"))
	}, NodeTimeout(kopsBudget))

	It("has someone else's workload in the node's cluster under the names older runs used (namespace skewtest, StatefulSet web, claim data-web-0)", func(ctx SpecContext) {
		Expect(kops).NotTo(BeNil(), "no kops-style node")
		foreign = makeForeignWorkload(ctx, clientFor(kops.kubeconfig()), kops.info.Node, kops.info.StorageClass, kops.info.Image)
		AddReportEntry("someone else's workload", foreign.String())
	}, NodeTimeout(foreignReady+time.Minute))

	It("passes two runs at once through the existing provider, from the host, one on each node of the shared cluster, and leaves the owner's workload as it was", func(ctx SpecContext) {
		Expect(kops).NotTo(BeNil(), "no kops-style node")
		Expect(foreign).NotTo(BeNil(), "no workload of someone else's")
		start := time.Now()
		var runs []*runOn
		for i, l := range kops.info.nodes() {
			runs = append(runs, kops.startRun(ctx, g, src, bin, l, filepath.Join(out, fmt.Sprintf("existing-%d", i+1)), nil))
		}
		var took []string
		for _, r := range runs {
			err := r.wait()
			took = append(took, fmt.Sprintf("node %s: %s, exit %d", r.node, time.Since(start).Round(time.Second), exitCode(err)))
			Expect(err).NotTo(HaveOccurred(), "skewtest run with PROVIDER=existing on node %s (reports: %s)", r.node, r.art)
			r.expectReport()
		}
		AddReportEntry("two sign-off plans at once through the existing provider", strings.Join(took, "; "))
		cs := clientFor(kops.kubeconfig())
		foreign.expectUntouched(ctx, cs)
		kops.expectOwnKubelet(ctx, g)
		kops.expectNoRunNamespace(ctx)
	}, NodeTimeout(runBudget))

	It("cleans a run SIGKILLed in the middle of a hop while another runs on the other node: refused after a context switch, then only its own objects removed", func(ctx SpecContext) {
		Expect(kops).NotTo(BeNil(), "no kops-style node")
		Expect(foreign).NotTo(BeNil(), "no workload of someone else's")
		nodes := kops.info.nodes()
		first, second := nodes[0], nodes[1]
		start := time.Now()
		other := kops.startRun(ctx, g, src, bin, second, filepath.Join(out, "existing-beside"), nil)
		var logs io.ReadCloser
		killed := kops.startRun(ctx, g, src, bin, first, filepath.Join(out, "existing-killed"), func(c *osexec.Cmd) {
			c.Stderr = nil
			var err error
			logs, err = c.StderrPipe()
			Expect(err).NotTo(HaveOccurred())
		})
		stateDir, swapped := watchForSwap(logs, killVersion)
		Expect(swapped).To(BeTrue(), "the run ended before it swapped the kubelet to %s", killVersion)
		Expect(killed.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		go func() { _, _ = io.Copy(GinkgoWriter, logs) }()
		werr := killed.wait()
		var ee *osexec.ExitError
		Expect(errors.As(werr, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL).To(BeTrue(), "the harness ended with %v, not SIGKILL", werr)
		killedAt := time.Since(start).Round(time.Second)
		Expect(stateDir).NotTo(BeEmpty(), "the run never logged its state directory")
		killedRun := strings.TrimPrefix(filepath.Base(stateDir), "existing-")
		active, _ := g.output(ctx, "systemctl", "is-active", first.KubeletUnit)
		Expect(active).NotTo(Equal("active"), "the kubelet runs after a kill between swap and start")

		cleanCmd := func() *osexec.Cmd {
			c := suiteconfig.Interruptible(osexec.CommandContext(ctx, bin, "clean", stateDir))
			c.Dir, c.Env = src, append(os.Environ(), kops.runEnv(g, first, filepath.Join(out, "existing-killed"))...)
			return c
		}
		By("skewtest clean " + stateDir + " after the kubeconfig's context was switched to another cluster")
		restore := switchContext(kops.kubeconfig())
		refused, rerr := cleanCmd().CombinedOutput()
		restore()
		fmt.Fprintf(GinkgoWriter, "%s\n", refused)
		Expect(exitCode(rerr)).To(Equal(2), "skewtest clean after a context switch: %v", rerr)
		Expect(string(refused)).To(And(ContainSubstring("another cluster"), ContainSubstring(otherContext), ContainSubstring("Nothing was touched")), "clean's refusal names both clusters")
		_, err := os.Stat(stateDir)
		Expect(err).NotTo(HaveOccurred(), "the refused clean removed the state directory")

		By("skewtest clean " + stateDir + " with the run's context back, while the other run goes on")
		cstart := time.Now()
		clean := cleanCmd()
		clean.Stdout, clean.Stderr = GinkgoWriter, GinkgoWriter
		Expect(clean.Run()).To(Succeed(), "skewtest clean %s", stateDir)
		cleanTook := time.Since(cstart).Round(time.Second)
		_, err = os.Stat(stateDir)
		Expect(os.IsNotExist(err)).To(BeTrue(), "the state directory after clean: %v", err)
		cs := clientFor(kops.kubeconfig())
		left := runNamespaces(ctx, cs)
		for _, n := range left {
			Expect(n).NotTo(HaveSuffix("("+killedRun+")"), "the killed run's namespace after its clean")
		}
		select {
		case err := <-other.done:
			other.done <- err
			AddReportEntry("the other run", "ended before the clean did: the clean's restraint was shown against the owner's workload only")
		default:
			Expect(left).To(HaveLen(1), "while the other run goes on, its namespace alone is left: %v", left)
		}
		foreign.expectUntouched(ctx, cs)

		Expect(other.wait()).To(Succeed(), "the run on node %s beside the killed one (reports: %s)", other.node, other.art)
		other.expectReport()
		AddReportEntry("SIGKILL mid-hop beside another run, then skewtest clean", fmt.Sprintf("killed %s after the start, after the swap to %s; the clean after a context switch refused (exit 2); clean took %s; the other run ended %s after the start, exit 0",
			killedAt, killVersion, cleanTook, time.Since(start).Round(time.Second)))
		foreign.expectUntouched(ctx, cs)
		kops.expectOwnKubelet(ctx, g)
		kops.expectNoRunNamespace(ctx)
	}, NodeTimeout(runBudget))

	It("passes the default sign-off plan through the kops provider in the guest (fake kops on PATH; fake EC2, ELB and S3 at AWS_ENDPOINT_URL), then deletes the cluster and sweeps", func(ctx SpecContext) {
		Expect(kops).NotTo(BeNil(), "no kops-style node")
		start := time.Now()
		art := filepath.Join(out, "kops")
		r := kops.startKopsRun(ctx, g, src, bin, binDir, "signoff", art)
		err := r.wait()
		AddReportEntry("sign-off plan through the kops provider", fmt.Sprintf("%s, exit %d", time.Since(start).Round(time.Second), exitCode(err)))
		Expect(err).NotTo(HaveOccurred(), "skewtest run with PROVIDER=kops in the guest (reports: %s)", art)
		reports, _ := filepath.Glob(filepath.Join(art, "*", "report.md"))
		Expect(reports).NotTo(BeEmpty(), "no report.md under %s", art)
		r.expectDeletedAndSwept(ctx, g)
		r.expectNoSecret()
		kops.expectOwnKubelet(ctx, g)
		kops.expectNoRunNamespace(ctx)
	}, NodeTimeout(runBudget))

	It("deletes the kops cluster and puts the node's own kubelet back when the kops run is interrupted (SIGINT) in the middle of a hop", func(ctx SpecContext) {
		Expect(kops).NotTo(BeNil(), "no kops-style node")
		start := time.Now()
		art := filepath.Join(out, "kops-interrupted")
		r := kops.startKopsRun(ctx, g, src, bin, binDir, "interrupted", art)
		r.interruptAfterSwap(ctx, g, killVersion)
		interruptedAt := time.Since(start).Round(time.Second)
		err := r.wait()
		AddReportEntry("kops run interrupted mid-hop", fmt.Sprintf("SIGINT %s after the start, after the swap to %s; the run ended %s later, exit %d",
			interruptedAt, killVersion, (time.Since(start)-interruptedAt).Round(time.Second), exitCode(err)))
		Expect(exitCode(err)).To(Equal(exitInterrupted), "skewtest run with PROVIDER=kops after SIGINT: %v", err)
		r.expectDeletedAndSwept(ctx, g)
		r.expectNoSecret()
		kops.expectOwnKubelet(ctx, g)
		kops.expectNoRunNamespace(ctx)
	}, NodeTimeout(runBudget))

	It("removes the kops-style node and its cluster from the guest", func(ctx SpecContext) {
		Expect(kops).NotTo(BeNil(), "no kops-style node")
		info := kops.info
		Expect(kops.stop(ctx)).To(Succeed(), "skewtest vm kops-node's teardown")
		kops = nil
		for _, l := range info.nodes() {
			files := append(l.files(), l.KubeletBinary+".*")
			Expect(g.output(ctx, "sh", "-c", "ls "+strings.Join(files, " ")+" 2>/dev/null || true")).To(BeEmpty(), "node %s's layout files left", l.Node)
			units := g.must(ctx, "systemctl", "list-units", "--all", "--plain", "--no-legend", "skewtest*", l.KubeletUnit+".service")
			Expect(runUnits(units)).To(BeEmpty(), "units left")
		}
	}, NodeTimeout(kopsTeardownBudget))

	It("leaves no private key and no admin credential in $ARTIFACTS", func() {
		found := secretscan.Dir(out, secretscan.Credentials...)
		AddReportEntry("files under $ARTIFACTS/hosts checked for keys and credentials", fmt.Sprint(found.Files))
		Expect(found.Files).To(BeNumerically(">", 0), "nothing under %s to check", out)
		Expect(found.Hits).To(BeEmpty(), "CI uploads $ARTIFACTS: whoever reads it would hold the cluster")
		if foreign != nil {
			Expect(secretscan.Dir(out, secretscan.Literal("the owner's credential", foreign.secret)).Hits).To(BeEmpty(), "files under %s holding the owner's credential (its Secret and its pod's environment)", out)
		}
	})
})

// resolveOnHost builds or finds every binary the default plan needs on the
// local provider, so that the guest only reads the cache.
func resolveOnHost(ctx context.Context, logger *slog.Logger, cache string) {
	GinkgoHelper()
	mb := &binaries.ModuleBuilder{CacheDir: cache, Logger: logger}
	seen := map[string]bool{}
	plan := strings.Split(plan.Default, ",")
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

// moduleRoot is the skewtest source tree this test runs from.
func moduleRoot() string {
	wd, err := os.Getwd()
	Expect(err).NotTo(HaveOccurred())
	return filepath.Dir(filepath.Dir(wd))
}
