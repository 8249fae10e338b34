package kops

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/skewtest/clusters/exec"
)

// Timeouts of single kops calls (the long ones, validate and delete, carry
// their own --wait).
const (
	kopsVersionTimeout = 30 * time.Second
	kopsCallTimeout    = 10 * time.Minute
)

// exitNotValid is kops validate cluster's exit code for a cluster that is
// not valid (yet): kubetest2-kops retries on it.
const exitNotValid = 2

// cli runs kops as kubetest2-kops does (deployer/common.go env()): the
// state store, KOPS_RUN_TOO_NEW_VERSION=1, the SSH key and user, and the
// run's own KUBECONFIG, on top of this process's environment, which passes
// the AWS credential variables through to kops untouched. Every call is
// appended to the run's command log, scrubbed of credentials.
type cli struct {
	path string
	env  []string
	log  *commandLog
}

// commandLog is the record of every kops and kubectl call, for the
// artifacts.
type commandLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *commandLog) add(r exec.Result, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.buf, "$ %s\n# exit %d after %s\n", exec.JoinArgv(r.Argv), r.ExitCode, r.Duration.Round(time.Millisecond))
	if r.Stdout != "" {
		fmt.Fprintf(&l.buf, "%s\n", strings.TrimRight(r.Stdout, "\n"))
	}
	if r.Stderr != "" {
		fmt.Fprintf(&l.buf, "# stderr:\n%s\n", strings.TrimRight(r.Stderr, "\n"))
	}
	if err != nil && r.ExitCode < 0 {
		fmt.Fprintf(&l.buf, "# error: %v\n", err)
	}
}

// writeTo writes the log, scrubbed, to path.
func (l *commandLog) writeTo(path string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return os.WriteFile(path, []byte(scrub(l.buf.String())), 0o644)
}

// run runs kops with args; its output is returned and logged. A non-zero
// exit is an *exec.RunError carrying the code (exec.ExitCode).
func (k *cli) run(ctx context.Context, args ...string) (exec.Result, error) {
	return k.runOut(ctx, nil, args...)
}

// runOut is run with stdout also copied to w (a file of the dump).
func (k *cli) runOut(ctx context.Context, w io.Writer, args ...string) (exec.Result, error) {
	var out, errb bytes.Buffer
	stdout := io.Writer(&out)
	if w != nil {
		stdout = io.MultiWriter(&out, w)
	}
	start := time.Now()
	err := exec.Local{}.Command(ctx, k.path, args...).SetEnv(k.env...).SetStdout(stdout).SetStderr(&errb).Run()
	r := exec.Result{Argv: append([]string{k.path}, args...), Stdout: out.String(), Stderr: errb.String(),
		ExitCode: exec.ExitCode(err), Duration: time.Since(start)}
	k.log.add(r, err)
	if err != nil {
		// Errors end up in logs and reports: scrubbed too.
		shown := r
		shown.Stdout, shown.Stderr = scrub(r.Stdout), scrub(r.Stderr)
		return r, &exec.RunError{Result: shown, Err: err}
	}
	return r, nil
}
