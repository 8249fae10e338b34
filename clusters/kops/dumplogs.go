package kops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec" // finds kubectl on this host for the log dump
	"path/filepath"
	"strings"
)

// kubectlDumps are the objects kubetest2-kops dumps as YAML besides
// kubectl cluster-info dump: the storage side of the cluster, webhooks and
// RBAC.
var kubectlDumps = []string{"csinodes", "csidrivers", "storageclasses", "persistentvolumes", "volumeattachments",
	"mutatingwebhookconfigurations", "validatingwebhookconfigurations", "clusterroles", "clusterrolebindings"}

// DumpClusterLogs dumps what kubetest2-kops dumps (deployer/dumplogs.go)
// into dir: kops toolbox dump (nodes' logs over SSH, with
// KOPS_TOOLBOX_DUMP_K8S_RESOURCES=1), kops get cluster and instancegroups
// as YAML, kubectl cluster-info dump and the storage objects; then the
// run's own records: every kops and kubectl call, the EBS evidence. Files
// other programs wrote are scrubbed of AWS credentials. Best effort: it
// tries everything and returns the failures joined.
func (p *provider) DumpClusterLogs(ctx context.Context, dir string) error {
	p.mu.Lock()
	p.dumped = true
	c := p.cli
	p.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	if c != nil {
		st := p.snapshot()
		dump := *c
		dump.env = append(append([]string(nil), c.env...), "KOPS_TOOLBOX_DUMP_K8S_RESOURCES=1")
		if _, err := dump.run(ctx, "toolbox", "dump", "--name", p.cfg.ClusterName(), "--dir", dir, "--private-key", st.SSHKey); err != nil {
			errs = append(errs, err)
		}
		for _, what := range []string{"cluster", "instancegroups"} {
			if err := toFile(filepath.Join(dir, "kops-get-"+what+".yaml"), func(f *os.File) error {
				_, err := c.runOut(ctx, f, "get", what, "--name", p.cfg.ClusterName(), "-o", "yaml")
				return err
			}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := p.kubectlDump(ctx, dir); err != nil {
		errs = append(errs, err)
	}
	if err := scrubDir(dir); err != nil {
		errs = append(errs, fmt.Errorf("scrub %s of credentials: %w", dir, err))
	}
	p.writeRecords(dir)
	return errors.Join(errs...)
}

// kubectlDump runs kubectl cluster-info dump and gets the storage objects,
// with the run's kubeconfig.
func (p *provider) kubectlDump(ctx context.Context, dir string) error {
	kubectl := p.cfg.Kubectl
	if kubectl == "" {
		var err error
		if kubectl, err = osexec.LookPath("kubectl"); err != nil {
			p.log.Warn("kubectl not in PATH: the log dump has no kubectl cluster-info dump (go run ./cmd/skewtest build v1.37.2 kubectl builds one)")
			return nil
		}
	}
	k := &cli{path: kubectl, env: []string{"KUBECONFIG=" + p.KubeconfigPath()}, log: &p.cmds}
	var errs []error
	if _, err := k.run(ctx, "cluster-info", "dump", "--all-namespaces", "--output-directory", filepath.Join(dir, "cluster-info")); err != nil {
		errs = append(errs, err)
	}
	for _, what := range kubectlDumps {
		if err := toFile(filepath.Join(dir, "kubectl-"+what+".yaml"), func(f *os.File) error {
			_, err := k.runOut(ctx, f, "get", what, "-o", "yaml")
			return err
		}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func toFile(path string, f func(*os.File) error) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	err = f(out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeRecords writes the run's command log and EBS evidence into dir.
func (p *provider) writeRecords(dir string) {
	if err := p.cmds.writeTo(filepath.Join(dir, "kops-commands.log")); err != nil {
		p.log.Warn("kops: write the command log", "err", err)
	}
	p.mu.Lock()
	ev := append([]ebsState(nil), p.evidence...)
	sweep := append([]resource(nil), p.sweep...)
	p.mu.Unlock()
	if len(ev) > 0 {
		var b strings.Builder
		for _, s := range ev {
			b.WriteString(s.String() + "\n")
		}
		js, _ := json.MarshalIndent(ev, "", "  ")
		_ = os.WriteFile(filepath.Join(dir, "ebs-evidence.txt"), []byte(b.String()), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "ebs-evidence.json"), append(js, '\n'), 0o644)
	}
	if sweep != nil {
		var b strings.Builder
		for _, r := range sweep {
			fmt.Fprintf(&b, "%s deleted=%t\n", r, r.Deleted)
		}
		_ = os.WriteFile(filepath.Join(dir, "kops-sweep.txt"), []byte(b.String()), 0o644)
	}
}

// writeArtifacts writes the records again after Down, so the command log
// has kops delete cluster and the sweep is there.
func (p *provider) writeArtifacts() {
	if p.cfg.ArtifactsDir == "" {
		return
	}
	dir := filepath.Join(p.cfg.ArtifactsDir, "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.log.Warn("kops: artifacts", "err", err)
		return
	}
	p.writeRecords(dir)
}
