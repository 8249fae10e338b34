package skewrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

func TestExitCode(t *testing.T) {
	kubelet := classify(errors.New("hop 1: start kubelet v1.36.3: exited"), exitcode.ErrKubelet)
	infra := classify(errors.New("bring up the local cluster: etcd did not start"), exitcode.ErrInfrastructure)
	badSource := fmt.Errorf("plan entry 1: %w", binaries.ErrBadSource)
	sigint := &exitcode.Interrupted{Signal: os.Interrupt}
	sigterm := &exitcode.Interrupted{Signal: syscall.SIGTERM}
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"pass", nil, 0},
		{"kubelet failure", kubelet, 1},
		{"bad input", fmt.Errorf("%w: PLAN=banana", exitcode.ErrInvalid), 2},
		{"a source the user must change", badSource, 2},
		{"a source the user must change, found while bringing up", classify(badSource, exitcode.ErrInfrastructure), 2},
		{"infrastructure", infra, 3},
		{"kubelet failure whose teardown failed too", errors.Join(kubelet, infra), 1},
		{"pass whose teardown failed", errors.Join(nil, infra), 3},
		{"unclassified", errors.New("something else"), 1},
		{"SIGINT", fmt.Errorf("%w: %w", sigint, kubelet), 130},
		{"SIGTERM", fmt.Errorf("%w: %w", sigterm, infra), 143},
	} {
		if got := exitcode.Of(tc.err); got != tc.want {
			t.Errorf("%s: exitcode.Of(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
	// A scenario's step error, as the runner wraps it.
	step := func(err error) error { return fmt.Errorf("step 22 %q: %w", "hop 2: re-created pods Running", err) }
	notScheduled := step(fmt.Errorf("%w: web-0 never scheduled onto a node: %w", scenarios.ErrControlPlane, context.DeadlineExceeded))
	if got := exitcode.Of(classify(notScheduled, scenarioClass(notScheduled))); got != exitcode.Infrastructure {
		t.Errorf("a pod the control plane never scheduled: exit %d, want %d (the kubelet was never asked)", got, exitcode.Infrastructure)
	}
	ownPVs := step(fmt.Errorf("%w: claim skewtest/web-0-gen (uid 45699bf6) is Pending and none of the 3 PVs skewtest made for it is free: gen-0 (Released, claim web-0-gen uid 1f), gen-2 (Bound, claim web-0-gen uid 1f): %w", scenarios.ErrHarness, context.DeadlineExceeded))
	if got := exitcode.Of(classify(ownPVs, scenarioClass(ownPVs))); got != exitcode.Harness {
		t.Errorf("a pod Pending on skewtest's own taken PVs: exit %d, want %d (skewtest's bug, neither the kubelet's nor a flake)", got, exitcode.Harness)
	}
	if errors.Is(ownPVs, scenarios.ErrControlPlane) {
		t.Error("a harness fault is also a control plane fault: the suites would retry skewtest's own bug as a flake")
	}
	taken := step(fmt.Errorf("%w: namespace skewtest-20261206-010203-ab12 exists, and this run did not make it", workloads.ErrNotOurs))
	if got := exitcode.Of(classify(taken, scenarioClass(taken))); got != exitcode.Infrastructure {
		t.Errorf("a name of the run's taken by another's object: exit %d, want %d (neither the kubelet's nor skewtest's)", got, exitcode.Infrastructure)
	}
	// clean, refusing to act on a cluster that is not the run's, asks the
	// user to point the kubeconfig back: bad input.
	elsewhere := fmt.Errorf("existing: clean /var/lib/skewtest/x: %w: the kubeconfig now points at context \"other\"", workloads.ErrOtherCluster)
	if got := exitcode.Of(elsewhere); got != exitcode.Invalid {
		t.Errorf("clean refusing another cluster: exit %d, want %d", got, exitcode.Invalid)
	}
	leak := step(errors.New("mount of pod 93826acf left"))
	if got := exitcode.Of(classify(leak, scenarioClass(leak))); got != exitcode.Kubelet {
		t.Errorf("a leak: exit %d, want %d", got, exitcode.Kubelet)
	}
	if msg := classify(errors.New("the message"), exitcode.ErrKubelet).Error(); msg != "the message" {
		t.Errorf("classify changed the message to %q", msg)
	}
}

func TestInterruptedAddsTheSignalThatCancelledTheRun(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	err := classify(errors.New("step 5: context canceled"), exitcode.ErrKubelet)
	if got := interrupted(ctx, err); got != err {
		t.Errorf("interrupted(live ctx) = %v, want the error as it was", got)
	}
	cancel(&exitcode.Interrupted{Signal: syscall.SIGTERM})
	got := interrupted(ctx, err)
	if code := exitcode.Of(got); code != 143 {
		t.Errorf("exitcode.Of(%v) = %d, want 143", got, code)
	}
	if interrupted(ctx, nil) != nil {
		t.Error("interrupted(ctx, nil) is not nil: a run that finished despite the signal passed")
	}
	plain, cancelPlain := context.WithCancel(t.Context())
	cancelPlain()
	if code := exitcode.Of(interrupted(plain, err)); code != 1 {
		t.Errorf("a context cancelled without a signal: exitcode.Of = %d, want 1", code)
	}
}

// A panic in bring-up or in the scenario must still let finishRun tear down:
// upAndRun returns it as the run's infrastructure failure, with the panic
// in the report, instead of unwinding past finishRun.
func TestRecoverRunTurnsAPanicIntoAnInfrastructureFailure(t *testing.T) {
	run := &reports.Run{}
	err := func() (err error) {
		defer recoverRun(run, &err)
		panic("nil map in the provider's Up")
	}()
	if code := exitcode.Of(err); code != exitcode.Infrastructure {
		t.Errorf("a panic: exit %d, want %d", code, exitcode.Infrastructure)
	}
	if run.Verdict != reports.Fail || !strings.Contains(run.Failure, "nil map in the provider's Up") || !strings.Contains(run.Failure, "goroutine") {
		t.Errorf("the report says %q (%s); want the panic and its stack", run.Failure, run.Verdict)
	}
	ok := func() (err error) {
		defer recoverRun(run, &err)
		return nil
	}()
	if ok != nil {
		t.Errorf("recoverRun without a panic changed the error to %v", ok)
	}
}
