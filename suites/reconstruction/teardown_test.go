package reconstruction

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/internal/suiteconfig"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// brokenKubelet reports v1.36.3 but refuses to run, so a run fails in the
// middle of hop 1: the pods are force-deleted and their volumes still
// mounted when the new kubelet fails to start.
const brokenKubelet = `#!/bin/sh
if [ "$1" = "--version" ]; then echo "Kubernetes v1.36.3"; exit 0; fi
echo "skewtest teardown test: this kubelet refuses to start on purpose" >&2
exit 1
`

// failingHop is a run whose second kubelet refuses to start: it fails in
// the middle of hop 1, with the pods force-deleted and their volumes still
// mounted.
func failingHop() skewrun.Options {
	dir := GinkgoT().TempDir()
	fake := filepath.Join(dir, "kubelet")
	Expect(os.WriteFile(fake, []byte(brokenKubelet), 0o755)).To(Succeed())
	return skewrun.Options{
		Provider:     teardownProvider().Name,
		Plan:         "v1.37.2,v1.36.3",
		Kubelets:     []string{"module:v1.37.2", "file:" + fake},
		ArtifactsDir: filepath.Join(dir, "artifacts"),
		Logger:       slog.New(slog.NewTextHandler(GinkgoWriter, nil)),
		Out:          GinkgoWriter,
	}
}

// buildSkewtest builds the skewtest command, so specs see its real exit
// code (go run would report 1 for any failure).
func buildSkewtest(ctx SpecContext) string {
	bin, err := suiteconfig.BuildSkewtest(ctx, GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	return bin
}

// readRun reads run.json from a run's artifacts directory.
func readRun(dir string) *reports.Run {
	f, err := os.Open(filepath.Join(dir, reports.JSONFileName))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	run, err := reports.ReadJSON(f)
	Expect(err).NotTo(HaveOccurred())
	return run
}

// teardownProvider is the provider the teardown specs run on: one that
// creates its clusters on this host (Descriptor.ClusterOnHost: local,
// kind).
func teardownProvider() clusters.Descriptor { return providerOf(os.Getenv("PROVIDER")) }

var _ = Describe("teardown of clusters made on this host", Label("teardown", "disruptive"), func() {
	needsBinaries(Label("teardown", "disruptive"), func() *skewrun.Options {
		if !teardownProvider().ClusterOnHost {
			return nil
		}
		o := envOptions(plan.Default, "")
		o.Provider, o.VolumeKind = teardownProvider().Name, ""
		return o
	})
	BeforeEach(func() {
		if p := teardownProvider(); !p.ClusterOnHost {
			Skip("teardown specs are for providers that create clusters on this host (" + strings.Join(providersWhere(func(d clusters.Descriptor) bool { return d.ClusterOnHost }), ", ") + "); PROVIDER=" + p.Name +
				" (kops: its Down after a failure, after SIGINT and the sweep are tested against fakes in go test ./clusters/kops)")
		}
	})

	It("leaves nothing behind when a hop fails, and exits 1", func(ctx SpecContext) {
		bin := buildSkewtest(ctx)
		o := failingHop()
		before := footprint.Take(ctx)

		cmd := suiteconfig.Interruptible(exec.CommandContext(ctx, bin, "run"))
		cmd.Env = append(os.Environ(), "PROVIDER="+o.Provider, "PLAN="+o.Plan, "KUBELETS="+strings.Join(o.Kubelets, ","), "ARTIFACTS="+o.ArtifactsDir, "KEEP_CLUSTER_ON_FAILURE=false")
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = GinkgoWriter, io.MultiWriter(GinkgoWriter, &stderr)
		err := cmd.Run()

		var exitErr *exec.ExitError
		Expect(errors.As(err, &exitErr)).To(BeTrue(), "skewtest run: %v", err)
		Expect(exitErr.ExitCode()).To(Equal(exitcode.Kubelet), "a kubelet that refuses to start after a swap is the kubelet's failure")
		Expect(stderr.String()).To(ContainSubstring("start kubelet"))
		run := readRun(filepath.Join(o.ArtifactsDir, "latest"))
		Expect(run.Verdict).To(Equal(reports.Fail))
		Expect(run.Infrastructure).To(BeFalse(), "JUnit must show a <failure>, not an infrastructure <error>")
		Expect(run.Failure).To(ContainSubstring("refuses to start on purpose"), "the report says why, from the kubelet's log")
		Expect(filepath.Join(run.ArtifactsDir, "report.md")).To(BeAnExistingFile())
		if teardownProvider().KubeletsOnHost {
			Expect(filepath.Join(run.ArtifactsDir, "logs", "kubelet-2-v1.36.3.log")).To(BeAnExistingFile(), "the failed kubelet's log is kept")
		} else {
			Expect(filepath.Join(run.ArtifactsDir, "logs")).To(BeADirectory(), "kind's logs are kept")
		}
		pods, err := os.ReadFile(filepath.Join(run.ArtifactsDir, "logs", "api", "pods.yaml"))
		Expect(err).NotTo(HaveOccurred(), "the API objects are kept as evidence")
		Expect(string(pods)).To(ContainSubstring("name: web-0"), "with the workload's pods as the control plane saw them")
		Expect(filepath.Join(run.ArtifactsDir, "logs", "api", "events.yaml")).To(BeAnExistingFile())
		Expect(footprint.Diff(before, footprint.Take(ctx))).To(BeEmpty())
	})

	It("keeps a failed cluster when asked, and skewtest clean removes it", func(ctx SpecContext) {
		before := footprint.Take(ctx)
		o := failingHop()
		o.KeepClusterOnFailure = true

		res, err := skewrun.Run(ctx, o)
		Expect(err).To(HaveOccurred())
		// A run refused before it made a cluster (the host lock held, a
		// setting refused) has no result: fail on why, not on a nil.
		Expect(res).NotTo(BeNil(), "the run made no cluster to keep: %v", err)
		Expect(res.Run).NotTo(BeNil(), "the run made no cluster to keep: %v", err)
		Expect(res.Kept).To(ContainSubstring("kubeconfig"), "says how to reach the cluster")
		Expect(res.Kept).To(MatchRegexp(`skewtest clean /var/lib/skewtest/(kind-)?`+res.Run.ID), "says how to remove it")
		kept := footprint.Diff(before, footprint.Take(ctx))
		Expect(kept).NotTo(BeEmpty(), "the cluster is still there")
		if teardownProvider().KubeletsOnHost {
			Expect(kept).To(ContainElement(HavePrefix("added process kube-apiserver")), "the control plane is still running")
			Expect(kept).To(ContainElement(HavePrefix("added mount ")), "the pods' volumes are still mounted for inspection")
			Expect(kept).To(ContainElement(HavePrefix("added process skewtest-csi-dr")), "the CSI driver outlives the harness, so the kept cluster's pods can mount their volumes")
		} else {
			Expect(kept).To(ContainElement(HavePrefix("added process dockerd")), "the node containers' dockerd is still running")
		}

		dir := strings.TrimSpace(res.Kept[strings.LastIndex(res.Kept, "skewtest clean ")+len("skewtest clean "):])
		By("refusing a new run beside the kept cluster, naming it and skewtest clean")
		res2, err := skewrun.Run(ctx, failingHop())
		Expect(err).To(HaveOccurred(), "a run started beside a kept cluster")
		Expect(exitcode.Of(err)).To(Equal(exitcode.Invalid), "refused as the user's to resolve: %v", err)
		Expect(err.Error()).To(And(ContainSubstring(dir), ContainSubstring("skewtest clean "+dir)))
		Expect(res2).To(BeNil(), "the refused run made a cluster")
		Expect(clusters.LeftOnHost()).To(Equal([]string{dir}), "run directories after the refused run")
		Expect(clusters.Clean(ctx, dir)).To(Succeed())
		Expect(footprint.Diff(before, footprint.Take(ctx))).To(BeEmpty())
	})

	It("leaves nothing behind when interrupted with SIGINT while the kubelet is down, and exits 130", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		bin := buildSkewtest(ctx)
		before := footprint.Take(ctx)

		cmd := exec.Command(bin, "run")
		cmd.Env = append(os.Environ(), "PROVIDER="+teardownProvider().Name, "PLAN="+plan.Default, "ARTIFACTS="+filepath.Join(dir, "artifacts"), "KEEP_CLUSTER_ON_FAILURE=true")
		stderr, err := cmd.StderrPipe()
		Expect(err).NotTo(HaveOccurred())
		cmd.Stdout = GinkgoWriter
		Expect(cmd.Start()).To(Succeed())
		done := make(chan error, 1)
		exited := make(chan struct{})
		go func() { done <- cmd.Wait(); close(exited) }()
		// Should the spec fail before its own SIGINT: SIGINT still, so the
		// run tears down; only what outlives the teardown bound is killed.
		DeferCleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-time.After(suiteconfig.TeardownWait()):
				_ = cmd.Process.Kill()
			case <-exited:
			}
		})

		// Interrupt once the pods are force-deleted and the kubelet is
		// stopped: the most state there is to clean up.
		reached := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			sc := bufio.NewScanner(stderr)
			signalled := false
			for sc.Scan() {
				line := sc.Text()
				fmt.Fprintln(GinkgoWriter, line)
				if !signalled && strings.Contains(line, "step 5 passed") {
					signalled = true
					close(reached)
				}
			}
			_, _ = io.Copy(GinkgoWriter, stderr)
		}()
		Eventually(reached).WithTimeout(5 * time.Minute).Should(BeClosed())
		Expect(cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
		var waitErr error
		Eventually(done).WithTimeout(3 * time.Minute).Should(Receive(&waitErr))

		var exitErr *exec.ExitError
		Expect(errors.As(waitErr, &exitErr)).To(BeTrue(), "an interrupted run exits non-zero: %v", waitErr)
		Expect(exitErr.ExitCode()).To(Equal(130), "128 + SIGINT, as a shell reports it")
		Expect(footprint.Diff(before, footprint.Take(ctx))).To(BeEmpty(), "interrupted even with KEEP_CLUSTER_ON_FAILURE, the run removes everything")
		// One run directory (named by run ID, starting with the year) besides
		// the "latest" link.
		reportFile, err := filepath.Glob(filepath.Join(dir, "artifacts", "2*", "report.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(reportFile).To(HaveLen(1), "the interrupted run still writes its report")
		report, err := os.ReadFile(reportFile[0])
		Expect(err).NotTo(HaveOccurred())
		Expect(string(report)).To(ContainSubstring("FAIL"))
	})
})
