package kops

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/procfs"
)

// checkIPTimeout bounds the request for this machine's public address.
const checkIPTimeout = 15 * time.Second

// Up makes the cluster as kubetest2-kops does (deployer/up.go): kops
// (downloaded when KOPS_VERSION is set), Down of a leftover cluster of the
// same name, the state store, kops create cluster, kops update cluster
// --yes --admin, kops validate cluster --wait (exit code 2: not valid yet,
// asked again until ValidateTimeout); then it finds the worker through
// EC2 and the API server, reads its host key from the console output, and
// swaps in the plan's first kubelet. Every step's state is written before
// the step, so Down after a failed or interrupted Up removes what it made.
func (p *provider) Up(ctx context.Context) error {
	p.started = time.Now()
	if err := os.MkdirAll(p.cfg.RunDir, 0o700); err != nil {
		return fmt.Errorf("kops: run directory: %w", err)
	}
	if err := p.connect(ctx); err != nil {
		return err
	}
	p.tags = p.cfg.Tags(p.started)
	if err := p.updateState(func(s *State) { s.Tags, s.Owner = p.tags, procfs.Self() }); err != nil {
		return err
	}
	kops, err := p.resolveKops(ctx)
	if err != nil {
		return err
	}
	if p.cfg.StateStore == "" {
		if err := p.createStateStore(ctx); err != nil {
			return err
		}
		if err := p.updateState(func(s *State) { s.StateStore = "s3://" + s.Bucket }); err != nil {
			return err
		}
	}
	key, err := p.sshKey()
	if err != nil {
		return err
	}
	if err := p.updateState(func(s *State) { s.Kops, s.SSHKey = kops, key }); err != nil {
		return err
	}
	p.cli = p.newCLI(kops, key, "")

	// kubetest2-kops: Down first, for a leaked cluster of the same name.
	if exists, err := p.clusterExists(ctx); err != nil {
		return err
	} else if exists {
		p.log.Warn("a cluster of this name exists already: deleting it first, as kops's own deployer does", "cluster", p.cfg.ClusterName())
		if err := p.deleteCluster(ctx); err != nil {
			return fmt.Errorf("kops: delete the leftover cluster %s: %w", p.cfg.ClusterName(), err)
		}
	}

	admin, err := p.adminAccess(ctx)
	if err != nil {
		return err
	}
	if err := p.updateState(func(s *State) { s.Created = true }); err != nil {
		return err
	}
	if _, err := p.cli.run(ctx, p.createArgs(key, admin)...); err != nil {
		return fmt.Errorf("kops: create cluster: %w", err)
	}
	if _, err := p.cli.run(ctx, "update", "cluster", "--name", p.cfg.ClusterName(), "--yes", "--admin"); err != nil {
		return fmt.Errorf("kops: update cluster: %w", err)
	}
	if err := p.validate(ctx); err != nil {
		return err
	}
	if err := p.updateState(func(s *State) { s.ClusterUp = time.Now().UTC() }); err != nil {
		return err
	}
	n, err := p.findWorker(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.node = n
	p.mu.Unlock()
	if p.cfg.Kubelet.Path != "" {
		if err := n.install(ctx, p.cfg.Kubelet); err != nil {
			return fmt.Errorf("kops: start the worker at the plan's first kubelet: %w", err)
		}
	}
	p.log.Info("kops cluster up", "cluster", p.cfg.ClusterName(), "worker", n.String(), "instance", n.instance.ID, "took", time.Since(p.started).Round(time.Second))
	return nil
}

// connect makes the AWS clients from the SDK's default chain, unless a
// test set them.
func (p *provider) connect(ctx context.Context) error {
	if p.clients != nil {
		return nil
	}
	cfg, err := loadAWS(ctx, p.cfg.Region, nil)
	if err != nil {
		return fmt.Errorf("kops: %w", err)
	}
	p.clients = newClients(cfg, "")
	return nil
}

// newCLI is kops with kubetest2-kops's environment.
func (p *provider) newCLI(kops, key, user string) *cli {
	st := p.snapshot()
	env := []string{
		"KOPS_STATE_STORE=" + st.StateStore,
		"KOPS_RUN_TOO_NEW_VERSION=1",
		"KUBECONFIG=" + p.KubeconfigPath(),
		"KUBE_SSH_KEY_PATH=" + key,
	}
	if user != "" {
		env = append(env, "KUBE_SSH_USER="+user)
	}
	return &cli{path: kops, env: env, log: &p.cmds}
}

// createArgs is kops create cluster as kubetest2-kops runs it, with one
// control plane and one worker so that every pod lands on the one node.
func (p *provider) createArgs(key, admin string) []string {
	args := []string{"create", "cluster",
		"--name", p.cfg.ClusterName(),
		"--cloud", "aws",
		"--kubernetes-version", "v" + p.cfg.APIServerVersion.String(),
		"--ssh-public-key", key + ".pub",
		"--cloud-labels", cloudLabels(p.tags),
		"--admin-access", admin,
		"--control-plane-count", "1",
		"--control-plane-size", p.cfg.ControlPlaneSize,
		"--control-plane-volume-size", strconv.Itoa(defaultVolumeSize),
		"--node-count", "1",
		"--node-size", p.cfg.NodeSize,
		"--node-volume-size", strconv.Itoa(defaultVolumeSize),
		"--zones", strings.Join(p.cfg.Zones, ","),
	}
	return append(args, p.cfg.CreateArgs...)
}

// clusterExists is kops get cluster: kubetest2-kops's Down returns at once
// when it finds nothing.
func (p *provider) clusterExists(ctx context.Context) (bool, error) {
	_, err := p.cli.run(ctx, "get", "cluster", "--name", p.cfg.ClusterName())
	switch code := exec.ExitCode(err); {
	case err == nil:
		return true, nil
	case code > 0:
		// kops exits 1 with "cluster not found" (or no state store yet).
		return false, nil
	default:
		return false, fmt.Errorf("kops: get cluster: %w", err)
	}
}

// validate runs kops validate cluster --wait until it exits 0; exit code 2
// (not valid yet) is asked again until ValidateTimeout, any other fails.
func (p *provider) validate(ctx context.Context) error {
	deadline := time.Now().Add(p.cfg.ValidateTimeout)
	for attempt := 1; ; attempt++ {
		left := time.Until(deadline).Round(time.Second)
		_, err := p.cli.run(ctx, "validate", "cluster", "--name", p.cfg.ClusterName(), "--count", "2", "--wait", left.String())
		if err == nil {
			p.log.Info("kops validate cluster: valid", "attempts", attempt)
			return nil
		}
		if exec.ExitCode(err) != exitNotValid || time.Now().Add(p.validateRetry).After(deadline) {
			return fmt.Errorf("kops: validate cluster (attempt %d, %s of %s): %w", attempt, p.cfg.ValidateTimeout-time.Until(deadline).Round(time.Second), p.cfg.ValidateTimeout, err)
		}
		p.log.Info("kops validate cluster: not valid yet (exit 2), asking again", "attempt", attempt, "left", left)
		select {
		case <-ctx.Done():
			return fmt.Errorf("kops: validate cluster: %w", context.Cause(ctx))
		case <-time.After(p.validateRetry):
		}
	}
}

// adminAccess is KOPS_ADMIN_ACCESS, or this machine's public address as a
// /32, so that only the runner reaches the API server and SSH.
func (p *provider) adminAccess(ctx context.Context) (string, error) {
	if p.cfg.AdminAccess != "" {
		return p.cfg.AdminAccess, nil
	}
	ctx, cancel := context.WithTimeout(ctx, checkIPTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.checkIPURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("kops: find this machine's public address for --admin-access at %s: %w (set KOPS_ADMIN_ACCESS to a CIDR)", p.checkIPURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	ip := net.ParseIP(strings.TrimSpace(string(b)))
	if err != nil || resp.StatusCode != http.StatusOK || ip == nil || ip.To4() == nil {
		return "", fmt.Errorf("kops: %s answered %d %q, not an IPv4 address (set KOPS_ADMIN_ACCESS to a CIDR)", p.checkIPURL, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return ip.String() + "/32", nil
}

// sshKey is SSH_KEY, or an ed25519 keypair made for the run in its
// directory (kops does not read ~/.ssh on AWS: without a key there is no
// SSH).
func (p *provider) sshKey() (string, error) {
	if p.cfg.SSHKey != "" {
		return p.cfg.SSHKey, nil
	}
	path := filepath.Join(p.cfg.RunDir, "id_ed25519")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, "skewtest "+p.cfg.RunID)
	if err != nil {
		return "", err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return "", fmt.Errorf("kops: keypair for the run: %w", err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " skewtest-" + p.cfg.RunID + "\n"
	if err := os.WriteFile(path+".pub", []byte(line), 0o644); err != nil {
		return "", fmt.Errorf("kops: keypair for the run: %w", err)
	}
	return path, nil
}

// resolveKops is KOPS or kops in PATH, or the KOPS_VERSION release
// downloaded into the cache.
func (p *provider) resolveKops(ctx context.Context) (string, error) {
	if p.cfg.Kops == "" && p.cfg.KopsVersion != "" {
		return downloadKops(ctx, p.cfg.ReleaseURL, p.cfg.KopsVersion, p.cfg.CacheDir, p.log)
	}
	path, err := p.cfg.kopsPath()
	if err != nil {
		return "", errors.New("kops: " + err.Error())
	}
	return path, nil
}
