// Package suiteconfig sets the Ginkgo suites' deadlines so that a run's
// teardown always finishes: after SIGINT, SIGTERM or the suite's own
// deadline, Ginkgo cancels the running spec and then waits its grace
// period for the spec's cleanup; by default that is 30 s, far shorter
// than a cluster's teardown (a kops delete takes up to an hour), and when
// go test's -timeout fires first the process panics with no teardown at
// all. So the grace period is the provider's teardown bound, and the
// Ginkgo deadline ends that much before go test's.
package suiteconfig

import (
	"context"
	"fmt"
	"os"
	"os/exec" // the suites' own child commands, which interrupts must reach
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/timeouts"
)

// margin is left between the end of the grace period and go test's
// deadline, for Ginkgo's own reports (JUnit) to be written.
const margin = time.Minute

// Apply sets cfg's grace period to the teardown bound of the provider in
// PROVIDER (scaled by SKEWTEST_TIMEOUT_FACTOR), and its timeout to end
// the grace period plus a margin before t's deadline (go test -timeout).
// Without a deadline the suite has none either.
func Apply(t *testing.T, cfg *types.SuiteConfig) {
	d, ok := t.Deadline()
	grace, timeout, err := deadlines(provider(), time.Now(), d, ok)
	if err != nil {
		t.Fatal(err)
	}
	cfg.GracePeriod, cfg.Timeout = grace, timeout
}

// deadlines are the grace period and suite timeout for provider, now, and
// go test's deadline if it has one.
func deadlines(provider string, now, deadline time.Time, hasDeadline bool) (grace, timeout time.Duration, err error) {
	grace = timeouts.Scale(clusters.TeardownBound(provider), timeouts.FromEnv())
	if !hasDeadline {
		return grace, 0, nil
	}
	left := deadline.Sub(now) - grace - margin
	if left <= 0 {
		// Say so rather than let go test panic in the middle of a
		// teardown.
		return 0, 0, fmt.Errorf("go test -timeout leaves %s, less than the %s a teardown on PROVIDER=%s may take plus %s; raise -timeout", deadline.Sub(now).Round(time.Second), grace, provider, margin)
	}
	return grace, left, nil
}

func provider() string {
	if p := os.Getenv("PROVIDER"); p != "" {
		return p
	}
	return clusters.Default().Name
}

// Interruptible makes cmd, a skewtest run started with
// exec.CommandContext, end with SIGINT when its context ends (a spec's
// deadline, or an interrupted suite), and get the teardown bound to
// finish before it is killed: exec.CommandContext's default SIGKILL
// would stop it in the middle of its own teardown.
func Interruptible(cmd *exec.Cmd) *exec.Cmd {
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = TeardownWait()
	return cmd
}

// TeardownWait is how long an interrupted skewtest run on PROVIDER may
// take to tear down: its bound, scaled by SKEWTEST_TIMEOUT_FACTOR.
func TeardownWait() time.Duration {
	return timeouts.Scale(clusters.TeardownBound(provider()), timeouts.FromEnv())
}

// skewtestPackage is the skewtest command's package.
const skewtestPackage = "sigs.k8s.io/skewtest/cmd/skewtest"

// BuildSkewtest builds the skewtest command into dir/skewtest, with env
// added to the build's environment, and returns its path: the suites run
// it as a user does, and read its real exit code (go run would report 1
// for any failure). A failed build's error holds the compiler's output.
func BuildSkewtest(ctx context.Context, dir string, env ...string) (string, error) {
	bin := filepath.Join(dir, "skewtest")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, skewtestPackage)
	build.Env = append(os.Environ(), env...)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", skewtestPackage, err, out)
	}
	return bin, nil
}

// BuildSkewtestWithHelpers builds the skewtest command into dir/skewtest
// the way `make skewtest` builds bin/skewtest, by running that target of
// the module's Makefile, and returns its path: a binary carrying its
// helper programs, for runs outside the source tree (a test's temporary
// directory, a guest with no Go toolchain). The module is the one the
// working directory is in. A failed build's error holds make's output.
func BuildSkewtestWithHelpers(ctx context.Context, dir string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	bin := filepath.Join(dir, "skewtest")
	build := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", root, "skewtest", "SKEWTEST_BIN="+bin)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make -C %s skewtest SKEWTEST_BIN=%s: %w\n%s", root, bin, err, out)
	}
	return bin, nil
}
