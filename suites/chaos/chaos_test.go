package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/internal/suiteconfig"
	"sigs.k8s.io/skewtest/internal/testgate"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// Settings of the suite, from the environment.
const (
	seedEnv = "CHAOS_SEED" // default: the time
	runsEnv = "CHAOS_RUNS" // default: every phase with every signal
	// runBudget bounds one interrupted run and its clean.
	runBudget = 15 * time.Minute
)

// result is one run's outcome, for the summary.
type result struct {
	Run     int    `json:"run"`
	Phase   string `json:"phase"`
	Signal  string `json:"signal"`
	DelayMS int64  `json:"delayMs"`
	Exit    int    `json:"exit"`
	Missed  bool   `json:"missed,omitempty"` // the run ended before the signal
	// DuringTeardown: the run took the signal in its teardown, finished
	// it, and exited as the run had ended (0 for a pass).
	DuringTeardown bool     `json:"duringTeardown,omitempty"`
	Leaks          []string `json:"leaks,omitempty"`
	Seconds        float64  `json:"seconds"`
	Cleaned        bool     `json:"cleaned,omitempty"`
	RunDirErr      string   `json:"error,omitempty"`
}

var (
	seed    = chaosSeed()
	planned = plan(seed, chaosRuns())
	results []result
)

func chaosSeed() uint64 {
	if v := os.Getenv(seedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: want a number", seedEnv, v))
		}
		return s
	}
	return uint64(time.Now().UnixNano())
}

func chaosRuns() int {
	if v := os.Getenv(runsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			panic(fmt.Sprintf("%s=%q: want a number of runs, at least 1", runsEnv, v))
		}
		return n
	}
	return len(phases) * len(signals)
}

// provider is PROVIDER, the default one when unset.
func provider() clusters.Descriptor {
	name := os.Getenv("PROVIDER")
	if name == "" {
		return clusters.Default()
	}
	d, err := clusters.Lookup(name)
	if err != nil {
		panic(err)
	}
	return d
}

var _ = Describe("interrupted runs", Ordered, Label("chaos"), func() {
	var (
		bin       string
		artifacts string
	)

	BeforeAll(func(ctx SpecContext) {
		if !provider().ClusterOnHost {
			testgate.SkipOrFail(GinkgoT(), "make test-chaos interrupts runs that make their cluster on this host (local, kind); PROVIDER="+provider().Name,
				"run it with PROVIDER=local or PROVIDER=kind; the kops provider's interrupts are in go test ./clusters/kops and make test-hosts")
		}
		if os.Geteuid() != 0 {
			testgate.SkipOrFail(GinkgoT(), "make test-chaos needs root (its runs make clusters on this host)", "run it as root: sudo -E make test-chaos")
		}
		fmt.Fprintf(GinkgoWriter, "chaos: %s=%d, %d runs on PROVIDER=%s (repeat them with %s=%d)\n", seedEnv, seed, len(planned), provider().Name, seedEnv, seed)
		AddReportEntry("chaos seed", fmt.Sprintf("%s=%d, %d runs, PROVIDER=%s", seedEnv, seed, len(planned), provider().Name))
		artifacts = os.Getenv("ARTIFACTS")
		if artifacts == "" {
			artifacts = filepath.Join(GinkgoT().TempDir(), "artifacts")
		}
		artifacts = filepath.Join(artifacts, "chaos")
		Expect(os.MkdirAll(artifacts, 0o755)).To(Succeed())
		var err error
		bin, err = suiteconfig.BuildSkewtest(ctx, GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
	}, NodeTimeout(10*time.Minute))

	AfterAll(func() {
		if len(results) == 0 {
			return
		}
		b, _ := json.MarshalIndent(results, "", "  ")
		Expect(os.WriteFile(filepath.Join(artifacts, "chaos.json"), b, 0o644)).To(Succeed())
		md := summary(seed, provider().Name, results)
		Expect(os.WriteFile(filepath.Join(artifacts, "chaos.md"), []byte(md), 0o644)).To(Succeed())
		AddReportEntry("chaos summary", md)
		fmt.Fprintln(GinkgoWriter, md)
	})

	for _, in := range planned {
		It(in.String(), func(ctx SpecContext) {
			res := interruptRun(ctx, bin, filepath.Join(artifacts, fmt.Sprintf("run-%02d", in.n)), in)
			results = append(results, res)
			Expect(res.Leaks).To(BeEmpty(), "%s left this on the host", in)
		}, NodeTimeout(runBudget))
	}
})

// interruptRun runs skewtest run, sends in.sig in.delay after in.phase's
// log line, waits for it (and cleans after SIGKILL), and compares the
// host's footprint with the one before.
func interruptRun(ctx context.Context, bin, artifacts string, in interrupt) result {
	GinkgoHelper()
	res := result{Run: in.n, Phase: in.phase.name, Signal: in.sig.name, DelayMS: in.delay.Milliseconds()}
	before := footprint.Take(ctx)
	start := time.Now()
	cmd := suiteconfig.Interruptible(exec.CommandContext(ctx, bin, "run"))
	cmd.Env = append(os.Environ(), "ARTIFACTS="+artifacts)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs, err := cmd.StderrPipe()
	Expect(err).NotTo(HaveOccurred())
	cmd.Stdout = GinkgoWriter
	Expect(cmd.Start()).To(Succeed())

	sc := bufio.NewScanner(logs)
	sent, received := false, false
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(GinkgoWriter, line)
		received = received || (sent && strings.Contains(line, `msg="`+exitcode.ReceivedSignalMsg+`"`))
		if !sent && in.phase.marker.MatchString(line) {
			time.Sleep(in.delay)
			if in.sig.closePipe {
				// What the run logs from now on goes nowhere: a write
				// to its stderr fails with EPIPE.
				_ = logs.Close()
				time.Sleep(pipeSettle)
			}
			// The run alone: its daemons have process groups of their own
			// and are the run's to stop.
			err := cmd.Process.Signal(in.sig.s)
			sent = err == nil
			if !sent {
				res.Missed = true
			}
			fmt.Fprintf(GinkgoWriter, "chaos: sent %s %s after %q (%v)\n", in.sig.name, in.delay, in.phase.name, err)
			if in.sig.closePipe {
				break
			}
		}
	}
	_, _ = io.Copy(io.Discard, logs)
	werr := cmd.Wait()
	res.Exit = exitCode(werr)
	switch {
	case !sent && !in.phase.late:
		Fail(fmt.Sprintf("%s: the run ended (exit %d) before %s began", in, res.Exit, in.phase.name))
	case !sent || (in.phase.late && res.Exit == 0 && !received):
		res.Missed = true
	case in.sig.clean:
		var ee *exec.ExitError
		Expect(errors.As(werr, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL).To(BeTrue(), "the run ended with %v, not SIGKILL", werr)
		clean := exec.CommandContext(ctx, bin, "clean")
		clean.Stdout, clean.Stderr = GinkgoWriter, GinkgoWriter
		Expect(clean.Run()).To(Succeed(), "skewtest clean after SIGKILL")
		res.Cleaned = true
	case in.phase.late && res.Exit == 0:
		// The signal reached the run in its teardown, which it does not
		// cut short: the passed run's exit stands.
		res.DuringTeardown = true
	case in.sig.orExit != 0:
		Expect(res.Exit).To(BeElementOf(in.sig.exit, in.sig.orExit), "skewtest's exit after %s", in.sig.name)
	default:
		Expect(res.Exit).To(Equal(in.sig.exit), "skewtest's exit after %s", in.sig.name)
	}
	res.Leaks = footprint.Diff(before, footprint.Take(ctx))
	res.Seconds = time.Since(start).Seconds()
	return res
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// summary is the Markdown table of runs tried, interrupted and leaking
// per phase and signal.
func summary(seed uint64, provider string, rs []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Interrupted runs (%s=%d, PROVIDER=%s)\n\n", seedEnv, seed, provider)
	b.WriteString("| phase | signal | runs | interrupted | leaks |\n| --- | --- | --- | --- | --- |\n")
	leaks := 0
	for _, p := range phases {
		for _, s := range signals {
			n, hit, l := 0, 0, 0
			for _, r := range rs {
				if r.Phase == p.name && r.Signal == s.name {
					n++
					if !r.Missed {
						hit++
					}
					if len(r.Leaks) > 0 {
						l++
					}
				}
			}
			if n > 0 {
				fmt.Fprintf(&b, "| %s | %s | %d | %d | %d |\n", p.name, s.name, n, hit, l)
			}
			leaks += l
		}
	}
	fmt.Fprintf(&b, "\n%d runs, %d with leaks.\n", len(rs), leaks)
	if n := countIf(rs, func(r result) bool { return r.DuringTeardown }); n > 0 {
		fmt.Fprintf(&b, "%d took their signal in teardown, finished it and exited as their passed run had (0).\n", n)
	}
	for _, r := range rs {
		for _, l := range r.Leaks {
			fmt.Fprintf(&b, "- run %d (%s, %s): %s\n", r.Run, r.Phase, r.Signal, l)
		}
	}
	return b.String()
}

func countIf(rs []result, f func(result) bool) int {
	n := 0
	for _, r := range rs {
		if f(r) {
			n++
		}
	}
	return n
}
