package skewrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
)

func TestExitCode(t *testing.T) {
	kubelet := classify(errors.New("hop 1: start kubelet v1.36.3: exited"), ErrKubelet)
	infra := classify(errors.New("bring up the local cluster: etcd did not start"), ErrInfrastructure)
	badSource := fmt.Errorf("plan entry 1: %w", binaries.ErrBadSource)
	sigint := &Interrupted{Signal: os.Interrupt}
	sigterm := &Interrupted{Signal: syscall.SIGTERM}
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"pass", nil, 0},
		{"kubelet failure", kubelet, 1},
		{"bad input", fmt.Errorf("%w: PLAN=banana", ErrInvalid), 2},
		{"a source the user must change", badSource, 2},
		{"a source the user must change, found while bringing up", classify(badSource, ErrInfrastructure), 2},
		{"infrastructure", infra, 3},
		{"kubelet failure whose teardown failed too", errors.Join(kubelet, infra), 1},
		{"pass whose teardown failed", errors.Join(nil, infra), 3},
		{"unclassified", errors.New("something else"), 1},
		{"SIGINT", fmt.Errorf("%w: %w", sigint, kubelet), 130},
		{"SIGTERM", fmt.Errorf("%w: %w", sigterm, infra), 143},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("%s: ExitCode(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
	// A scenario's step error, as the runner wraps it.
	step := func(err error) error { return fmt.Errorf("step 22 %q: %w", "hop 2: re-created pods Running", err) }
	notScheduled := step(fmt.Errorf("%w: web-0 never scheduled onto a node: %w", scenarios.ErrControlPlane, context.DeadlineExceeded))
	if got := ExitCode(classify(notScheduled, scenarioClass(notScheduled))); got != ExitInfrastructure {
		t.Errorf("a pod the control plane never scheduled: exit %d, want %d (the kubelet was never asked)", got, ExitInfrastructure)
	}
	ownPVs := step(fmt.Errorf("%w: claim skewtest/web-0-gen (uid 45699bf6) is Pending and none of the 3 PVs skewtest made for it is free: gen-0 (Released, claim web-0-gen uid 1f), gen-2 (Bound, claim web-0-gen uid 1f): %w", scenarios.ErrHarness, context.DeadlineExceeded))
	if got := ExitCode(classify(ownPVs, scenarioClass(ownPVs))); got != ExitHarness {
		t.Errorf("a pod Pending on skewtest's own taken PVs: exit %d, want %d (skewtest's bug, neither the kubelet's nor a flake)", got, ExitHarness)
	}
	if errors.Is(ownPVs, scenarios.ErrControlPlane) {
		t.Error("a harness fault is also a control plane fault: the suites would retry skewtest's own bug as a flake")
	}
	taken := step(fmt.Errorf("%w: namespace skewtest-20261206-010203-ab12 exists, and this run did not make it", workloads.ErrNotOurs))
	if got := ExitCode(classify(taken, scenarioClass(taken))); got != ExitInfrastructure {
		t.Errorf("a name of the run's taken by another's object: exit %d, want %d (neither the kubelet's nor skewtest's)", got, ExitInfrastructure)
	}
	// clean, refusing to act on a cluster that is not the run's, asks the
	// user to point the kubeconfig back: bad input.
	elsewhere := fmt.Errorf("existing: clean /var/lib/skewtest/x: %w: the kubeconfig now points at context \"other\"", workloads.ErrOtherCluster)
	if got := ExitCode(elsewhere); got != ExitInvalid {
		t.Errorf("clean refusing another cluster: exit %d, want %d", got, ExitInvalid)
	}
	leak := step(errors.New("mount of pod 93826acf left"))
	if got := ExitCode(classify(leak, scenarioClass(leak))); got != ExitKubelet {
		t.Errorf("a leak: exit %d, want %d", got, ExitKubelet)
	}
	if msg := classify(errors.New("the message"), ErrKubelet).Error(); msg != "the message" {
		t.Errorf("classify changed the message to %q", msg)
	}
}

func TestInterruptedAddsTheSignalThatCancelledTheRun(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	err := classify(errors.New("step 5: context canceled"), ErrKubelet)
	if got := interrupted(ctx, err); got != err {
		t.Errorf("interrupted(live ctx) = %v, want the error as it was", got)
	}
	cancel(&Interrupted{Signal: syscall.SIGTERM})
	got := interrupted(ctx, err)
	if code := ExitCode(got); code != 143 {
		t.Errorf("ExitCode(%v) = %d, want 143", got, code)
	}
	if interrupted(ctx, nil) != nil {
		t.Error("interrupted(ctx, nil) is not nil: a run that finished despite the signal passed")
	}
	plain, cancelPlain := context.WithCancel(t.Context())
	cancelPlain()
	if code := ExitCode(interrupted(plain, err)); code != 1 {
		t.Errorf("a context cancelled without a signal: ExitCode = %d, want 1", code)
	}
}

// SignalContext is tested with a real signal to this test process; the
// handler it installs keeps the signal from killing the process.
func TestSignalContext(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		var logged strings.Builder
		ctx, stop := SignalContext(t.Context(), slog.New(slog.NewTextHandler(&logged, nil)))
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%v did not cancel the context", sig)
		}
		var in *Interrupted
		if cause := context.Cause(ctx); !errors.As(cause, &in) || in.Signal != sig {
			t.Fatalf("cause = %v, want *Interrupted{%v}", cause, sig)
		}
		if code := ExitCode(fmt.Errorf("%w: run", in)); code != 128+int(sig) {
			t.Errorf("%v: exit %d, want %d", sig, code, 128+int(sig))
		}
		if !strings.Contains(logged.String(), `msg="`+ReceivedSignalMsg+`"`) || !strings.Contains(logged.String(), "signal="+sig.String()) {
			t.Errorf("%v: logged %q, want %q naming the signal", sig, logged.String(), ReceivedSignalMsg)
		}
		stop()
	}
}

// A panic in bring-up or in the scenario must still let Finish tear down:
// upAndRun returns it as the run's infrastructure failure, with the panic
// in the report, instead of unwinding past Finish.
func TestRecoverRunTurnsAPanicIntoAnInfrastructureFailure(t *testing.T) {
	run := &reports.Run{}
	err := func() (err error) {
		defer recoverRun(run, &err)
		panic("nil map in the provider's Up")
	}()
	if code := ExitCode(err); code != ExitInfrastructure {
		t.Errorf("a panic: exit %d, want %d", code, ExitInfrastructure)
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
