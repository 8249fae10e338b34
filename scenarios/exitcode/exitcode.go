// Package exitcode is skewtest's exit codes and the error classes that
// decide them (Of), and the signal handling that turns SIGINT, SIGTERM,
// SIGHUP and a closed output into a cancelled run (SignalContext): one
// place that every command, suite and CI job reads a run's outcome from.
package exitcode

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/hostlock"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/scenarios"
)

// Exit codes of skewtest, for the jobs and dashboards that act on them
// (docs/design.md, "Exit codes").
const (
	// Pass: the run passed, possibly with expected deviations.
	Pass = 0
	// Kubelet: the kubelet misbehaved: a check failed, something
	// leaked, or a kubelet refused to start after a swap. Also any error
	// no phase classified, so that nothing unexplained passes as a flake.
	Kubelet = 1
	// Invalid: bad input, refused before anything was made (or, for
	// an existing cluster, before any node was touched).
	Invalid = 2
	// Infrastructure: the harness could not do its job: the cluster
	// did not come up, a build or download failed, a registry or SSH was
	// unreachable, teardown failed.
	Infrastructure = 3
	// Harness: skewtest itself is at fault (scenarios.ErrHarness),
	// e.g. the PVs it made for a claim were all taken: no verdict on the
	// kubelet, and not a flake to retry; a bug to report against skewtest.
	Harness = 4
	// An interrupted run exits 128 + the signal's number, as a shell
	// reports a process killed by it: 130 for SIGINT, 143 for SIGTERM, 129
	// for SIGHUP.
	exitSignalBase = 128
)

var (
	// ErrInvalid marks errors in the user's input.
	ErrInvalid = errors.New("invalid input")
	// ErrInfrastructure marks failures of the harness or its environment,
	// not of the kubelet under test.
	ErrInfrastructure = errors.New("infrastructure failure")
	// ErrKubelet marks a scenario that failed: the kubelet under test
	// misbehaved.
	ErrKubelet = errors.New("kubelet failure")
	// ErrHarness marks a run that failed through skewtest's own fault:
	// scenarios.ErrHarness itself, one value wherever it is raised.
	ErrHarness = scenarios.ErrHarness
)

// Interrupted is the cause of a context SignalContext cancelled.
type Interrupted struct {
	Signal os.Signal
	// Why, when set, says what the signal stands for ("its output was
	// closed").
	Why string
}

func (e *Interrupted) Error() string {
	if e.Why != "" {
		return fmt.Sprintf("interrupted: %s (taken as %v)", e.Why, e.Signal)
	}
	return fmt.Sprintf("interrupted by %v", e.Signal)
}

// Of is skewtest's exit code for a run's error. An interrupt wins,
// then bad input, then a kubelet failure, then an infrastructure failure
// (so a failed scenario whose teardown also failed is still a failure of
// the kubelet).
func Of(err error) int {
	if err == nil {
		return Pass
	}
	var in *Interrupted
	if errors.As(err, &in) {
		if s, ok := in.Signal.(syscall.Signal); ok {
			return exitSignalBase + int(s)
		}
		return exitSignalBase + int(syscall.SIGINT)
	}
	switch {
	case errors.Is(err, ErrInvalid), errors.Is(err, binaries.ErrBadSource), errors.Is(err, hostlock.ErrHostInUse), errors.Is(err, workloads.ErrOtherCluster):
		return Invalid
	case errors.Is(err, ErrHarness):
		return Harness
	case errors.Is(err, ErrKubelet):
		return Kubelet
	case errors.Is(err, ErrInfrastructure):
		return Infrastructure
	}
	return Kubelet
}
