// Package testgate is the one gate of skewtest's tests that need root, a
// tool on PATH or a long time: such a test skips where it cannot run,
// saying how to run it, and fails instead where it must run (CI), so that
// nothing CI is meant to run can pass by skipping.
//
// A test must run when SKEWTEST_REQUIRE_ALL=1 (.ci/run sets it) or CI=true
// (GitHub Actions and Prow set it).
package testgate

import (
	"fmt"
	"os"
	"os/exec" // finds the tools a test needs
	"strings"
)

// RequireAllEnv, set to 1, turns every skip of this package into a
// failure.
const RequireAllEnv = "SKEWTEST_REQUIRE_ALL"

// SlowEnv, set to 1, runs the tests gated by Slow.
const SlowEnv = "SKEWTEST_SLOW"

// TB is what the gate needs of a test: *testing.T and Ginkgo's GinkgoT()
// are both one.
type TB interface {
	Helper()
	Skip(args ...any)
	Fatal(args ...any)
}

// Required says whether this process must run every test it is given.
func Required() bool {
	return os.Getenv(RequireAllEnv) == "1" || os.Getenv("CI") == "true"
}

// SkipOrFail skips t with why and how to run it, or fails it where every
// test must run.
func SkipOrFail(t TB, why, how string) {
	t.Helper()
	if Required() {
		t.Fatal(fmt.Sprintf("NOT RUN, FAILED: %s; %s (%s=1 or CI=true: this test must run here, so its missing prerequisite is a failure)", why, how, RequireAllEnv))
		return
	}
	t.Skip(fmt.Sprintf("SKIPPED, NOT PASSED: %s; %s", why, how))
}

// RequireRoot skips (or fails) t unless it runs as root.
func RequireRoot(t TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, "needs root ("+what+")", "run as root, e.g. sudo -E make test")
	}
}

// RequireTools skips (or fails) t unless every tool is on PATH.
func RequireTools(t TB, tools ...string) {
	t.Helper()
	var missing []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		SkipOrFail(t, "needs "+strings.Join(missing, ", ")+" on PATH", "scripts/install-deps.sh installs them")
	}
}

// Slow skips t unless SKEWTEST_SLOW=1 or every test must run: for tests
// that take minutes, which make test leaves to the targets that run them.
func Slow(t TB, what string) {
	t.Helper()
	if os.Getenv(SlowEnv) != "1" && !Required() {
		t.Skip(fmt.Sprintf("SKIPPED, NOT PASSED: slow (%s); run with %s=1", what, SlowEnv))
	}
}
