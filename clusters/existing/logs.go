package existing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/reports"
)

// DumpClusterLogs writes each test node's kubelet log (journalctl -u
// <unit>) since the run began to dir/<node>/kubelet.log, capped at
// reports.MaxLogBytes: the node's journal from before is its owner's, and
// the artifacts are uploaded. It is best effort: it tries every node,
// keeps what each wrote, and returns the failures joined.
func (p *provider) DumpClusterLogs(ctx context.Context, dir string) error {
	ns, err := p.resolve(ctx, false)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range ns {
		if err := n.dumpKubeletLog(ctx, filepath.Join(dir, n.String())); err != nil {
			p.log.Warn("dump kubelet log", "node", n.String(), "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (n *Node) dumpKubeletLog(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dump kubelet log of %s: %w", n, err)
	}
	path := filepath.Join(dir, "kubelet.log")
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("dump kubelet log of %s: %w", n, err)
	}
	out := reports.NewCapWriter(f, n.p.maxLog)
	var stderr strings.Builder
	argv := n.driver.LogsArgv(n.p.started)
	err = n.Command(ctx, argv[0], argv[1:]...).SetStdout(out).SetStderr(&stderr).Run()
	if cerr := out.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("dump kubelet log of %s to %s: %s: %w %s", n, path, exec.JoinArgv(argv), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
