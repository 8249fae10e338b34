package local

import (
	"context"
	"errors"
	"fmt"
	"os/exec" // finds this host's systemd-run before the cluster exists
	"path/filepath"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
	"sigs.k8s.io/skewtest/clusters/local/internal/process"
)

// The run's cgroups.
//
// On a cgroup v1 (hybrid or legacy) host each node's kubelet gets a cgroup
// root at the top of every hierarchy (/skewtest-<id>, /skewtest-<id>2, ...)
// and the daemons run where the harness runs.
//
// On a cgroup v2 (unified) host the run has one cgroup of its own, R:
//
//	R/daemons          etcd, the control plane, containerds, kubelets, shims
//	R/skewtest-worker  node 1's kubelet cgroupRoot (kubepods/... below)
//	R/skewtest-worker2 node 2's, ...
//
// with cpu, cpuset, memory, pids (and hugetlb, io where the kernel has
// them) enabled from the top of the hierarchy down to each node's root, as
// the kubelet requires; only the leaves hold processes, as cgroup v2
// requires. Without systemd R is /skewtest-<id>. Where systemd is PID 1, R
// is a transient scope unit with Delegate=yes, /system.slice/skewtest-<id>.scope
// (see cgroups.ScopeCommand for why): systemd then neither moves nor
// prunes anything in it, and `systemctl status skewtest-<id>.scope` shows
// the whole run. The kubelets use the cgroupfs driver and containerd's runc
// the same (SystemdCgroup = false) on every host: the pods' cgroups are
// inside the run's own subtree, which systemd has handed over, so no
// systemd unit is made per pod. Teardown kills R's whole subtree with
// cgroup.kill and removes it deepest first.

// runCgroup is the run's own cgroup on a unified host.
type runCgroup struct {
	// Path is R under /sys/fs/cgroup.
	Path string `json:"path"`
	// Unit is R's systemd scope unit, when systemd is PID 1.
	Unit string `json:"unit,omitempty"`
	// SubtreeBefore is cgroup.subtree_control of the cgroups above R
	// before the run enabled controllers there (cgroups.Tree.Restore).
	SubtreeBefore map[string][]string `json:"subtreeBefore,omitempty"`
}

// daemonsCgroup is the leaf, under R, every daemon of the run starts in.
const daemonsCgroup = "daemons"

func (rc *runCgroup) daemons() string { return rc.Path + "/" + daemonsCgroup }

// scopeKeeperName names the process that holds the run's systemd scope
// (its log and pid file).
const scopeKeeperName = "cgroup-scope"

// scopeTimeout bounds the wait for systemd to make the run's scope: a few
// milliseconds on a workstation, seconds in an emulated VM.
const scopeTimeout = 60 * time.Second

// planCgroups decides the run's cgroups for host, before anything is made:
// on a unified host R, and each node's cgroup root beneath it.
func planCgroups(host cgroups.Host, runID string, nodes []nodeState) *runCgroup {
	if host.Mode != cgroups.Unified {
		return nil
	}
	name := "skewtest-" + shortID(runID)
	rc := &runCgroup{Path: "/" + name}
	if host.Init.Systemd {
		rc.Unit = cgroups.ScopeUnit(name)
		rc.Path = cgroups.ScopeCgroup(rc.Unit)
	}
	for i := range nodes {
		nodes[i].CgroupRoot = rc.Path + "/" + nodes[i].Name
	}
	return rc
}

// checkCgroups tells, before anything is made, whether this host's cgroups
// can run a local cluster.
func checkCgroups(host cgroups.Host) error {
	if host.Mode != cgroups.Unified {
		return nil
	}
	if _, _, err := cgroups.UnifiedTree.Controllers(); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	if host.Init.Systemd {
		for _, tool := range []string{"systemd-run", "systemctl", "sleep"} {
			if _, err := exec.LookPath(tool); err != nil {
				return fmt.Errorf("local provider: systemd is PID 1 and %s is not on PATH: the run's cgroups live in a systemd scope it makes", tool)
			}
		}
	}
	return nil
}

// makeCgroups makes the run's cgroups as planned in st: on a unified host
// R (the systemd scope, or a plain cgroup), its daemons leaf and the
// nodes' cgroup roots, and it returns the cgroup directory daemons start
// in ("" on a v1 host: where the harness is).
func (p *Provider) makeCgroups(ctx context.Context, st state) (string, error) {
	if st.Cgroup == nil {
		hier, err := cgroups.Hierarchies()
		if err != nil {
			return "", err
		}
		for _, ns := range st.Nodes {
			if err := cgroups.MakeV1Root(hier, ns.CgroupRoot); err != nil {
				return "", fmt.Errorf("local provider: %w", err)
			}
		}
		return "", nil
	}
	rc, tree := st.Cgroup, cgroups.UnifiedTree
	if rc.Unit != "" {
		// systemd makes R; a directory made there first would be ours,
		// not the scope's.
		if err := p.startScope(ctx, rc); err != nil {
			return "", err
		}
	}
	// What is enabled above R now (with systemd: after it enabled what it
	// delegates to the scope), recorded before MakeRoot enables more.
	before, err := tree.SubtreeControls(filepath.Dir(rc.Path))
	if err != nil {
		return "", fmt.Errorf("local provider: %w", err)
	}
	rc.SubtreeBefore = before
	if err := writeState(p.dir, st); err != nil {
		return "", err
	}
	if err := tree.Mkdir(rc.daemons()); err != nil {
		return "", fmt.Errorf("local provider: %w", err)
	}
	for _, ns := range st.Nodes {
		if err := tree.MakeRoot(ns.CgroupRoot); err != nil {
			return "", fmt.Errorf("local provider: cgroup root of %s: %w", ns.Name, err)
		}
	}
	return tree.Path(rc.daemons()), nil
}

// startScope has systemd make the run's scope, with a keeper process in
// it, and moves the keeper into R/daemons: R itself must hold no process
// for controllers to be enabled below it.
func (p *Provider) startScope(ctx context.Context, rc *runCgroup) error {
	argv := cgroups.ScopeCommand(rc.Unit, "skewtest run "+p.cfg.RunID+" ("+p.dir+")")
	keeper, err := process.Start(scopeKeeperName, p.path("logs", scopeKeeperName+".log"), p.path("pids", scopeKeeperName+".pid"), argv, nil)
	if err != nil {
		return fmt.Errorf("local provider: make the run's systemd scope %s: %w", rc.Unit, err)
	}
	// Down stops it last, after every daemon it keeps company.
	p.keep(keeper)
	wctx, cancel := context.WithTimeout(ctx, p.timeout(scopeTimeout))
	defer cancel()
	err = keeper.WaitReady(wctx, 20*time.Millisecond, func(context.Context) error {
		got, err := cgroups.CgroupOf(keeper.PID())
		if err != nil {
			return err
		}
		if got != rc.Path {
			return fmt.Errorf("pid %d is in %s, not yet in %s", keeper.PID(), got, rc.Path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("local provider: make the run's systemd scope %s: %w", rc.Unit, err)
	}
	tree := cgroups.UnifiedTree
	if err := tree.Mkdir(rc.daemons()); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	if err := tree.Move(rc.daemons(), keeper.PID()); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	return nil
}

// nodeCgroupDirs are the directories of a node's cgroup root: one on a
// unified host, one per hierarchy on a v1 host.
func nodeCgroupDirs(root string) []string {
	hier, _ := cgroups.Hierarchies()
	return cgroups.Dirs(hier, root)
}

// killCgroup SIGKILLs every process in a node's cgroup root: the pods'
// containers, which containerd's shims would otherwise leave behind.
func killCgroup(root string) error {
	return cgroups.Kill(nodeCgroupDirs(root), cgroups.KillTimeout)
}

// removeCgroup removes a node's cgroup root in every hierarchy.
func removeCgroup(root string) error {
	return cgroups.Remove(nodeCgroupDirs(root))
}

// killRunCgroup SIGKILLs whatever is left in R: daemons and shims whose pid
// files are gone, the scope's keeper.
func killRunCgroup(rc *runCgroup) error {
	if rc == nil {
		return nil
	}
	return cgroups.Kill(cgroups.Dirs([]string{cgroups.UnifiedTree.Dir}, rc.Path), cgroups.KillTimeout)
}

// removeRunCgroup removes R and all below it, stops its scope unit, and
// turns off again the controllers the run enabled above R. systemd stops
// an empty scope by itself and prunes its cgroup, racing with this
// removal, which a cgroup already gone does not fail.
func removeRunCgroup(ctx context.Context, rc *runCgroup) error {
	if rc == nil {
		return nil
	}
	var errs []error
	if rc.Unit != "" {
		if err := cgroups.StopScope(ctx, rc.Unit); err != nil {
			errs = append(errs, err)
		}
	}
	if err := cgroups.Remove(cgroups.Dirs([]string{cgroups.UnifiedTree.Dir}, rc.Path)); err != nil {
		errs = append(errs, err)
	} else if err := cgroups.UnifiedTree.Restore(rc.SubtreeBefore); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
