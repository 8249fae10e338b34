package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/skewtest/clusters/internal/procfs"
	"sigs.k8s.io/skewtest/clusters/nodes"
)

var _ nodes.WithKubeletUsage = (*Node)(nil)

// KubeletUsage implements nodes.WithKubeletUsage from /proc of the
// kubelet's process. The process the node started is the kubelet itself:
// whatever wraps its command line (its mount namespace's set-up) execs
// it in place. Its CPU time and peak memory are read only once that
// process runs the installed kubelet binary, so that they are the
// kubelet's, not those of what ran before the exec.
func (n *Node) KubeletUsage(context.Context) (nodes.KubeletUsage, error) {
	n.mu.Lock()
	proc, bin := n.proc, n.bin.Path
	n.mu.Unlock()
	if proc == nil {
		return nodes.KubeletUsage{}, fmt.Errorf("kubelet usage on %s: no kubelet runs", n.l.name)
	}
	pid := proc.PID()
	if err := runsBinary(pid, bin); err != nil {
		return nodes.KubeletUsage{}, fmt.Errorf("kubelet usage on %s: %w", n.l.name, err)
	}
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return nodes.KubeletUsage{}, fmt.Errorf("kubelet usage on %s: %w", n.l.name, err)
	}
	peak, err := procfs.ReadPeakRSS(pid)
	if err != nil {
		return nodes.KubeletUsage{}, fmt.Errorf("kubelet usage on %s: pid %d: %w", n.l.name, pid, err)
	}
	return nodes.KubeletUsage{PID: pid, CPU: st.CPUTime(), PeakRSS: peak}, nil
}

// runsBinary checks that pid runs the program at path.
func runsBinary(pid int, path string) error {
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	if got != want {
		return fmt.Errorf("pid %d runs %s, not the kubelet %s (not exec'd yet, or gone)", pid, got, want)
	}
	return nil
}
