package kops

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/skewtest/clusters/internal/sshnode"
)

// Waits for what EC2 reports late.
const (
	// hostKeyTimeout bounds the wait for the worker's console output to
	// show its SSH host keys (cloud-init prints them once sshd has keys;
	// EC2 publishes the console some minutes after boot).
	hostKeyTimeout = 10 * time.Minute
	// awsPoll is how often EC2 is asked again while waiting.
	awsPoll = 10 * time.Second
)

// roleNodeTag is kops's tag on worker instances.
const roleNodeTag = "k8s.io/role/node"

// defaultSSHUser is the user of kops's default Ubuntu images, when kops
// toolbox dump does not say.
const defaultSSHUser = "ubuntu"

// workerInstance is an EC2 instance of the cluster.
type workerInstance struct {
	ID, Type, PublicIP, PrivateIP, Zone string
}

// clusterInstances lists the cluster's running instances by kops's
// KubernetesCluster tag (all pages); workers only when workers is set.
func clusterInstances(ctx context.Context, c ec2API, cluster string, workers bool) ([]workerInstance, error) {
	filters := []ec2types.Filter{
		{Name: aws.String("tag:" + tagCluster), Values: []string{cluster}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}
	if workers {
		filters = append(filters, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{roleNodeTag}})
	}
	var out []workerInstance
	pg := ec2.NewDescribeInstancesPaginator(c, &ec2.DescribeInstancesInput{Filters: filters})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe the instances of %s: %w", cluster, err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				in := workerInstance{ID: aws.ToString(i.InstanceId), Type: string(i.InstanceType),
					PublicIP: aws.ToString(i.PublicIpAddress), PrivateIP: aws.ToString(i.PrivateIpAddress)}
				if i.Placement != nil {
					in.Zone = aws.ToString(i.Placement.AvailabilityZone)
				}
				out = append(out, in)
			}
		}
	}
	return out, nil
}

// findWorker finds the one worker instance by the cluster's tags, its
// Kubernetes node by provider ID (or address), its SSH user from kops
// toolbox dump and its host keys from its console output, and returns the
// Node that reaches it over SSH.
func (p *provider) findWorker(ctx context.Context) (*Node, error) {
	cluster := p.cfg.ClusterName()
	all, err := clusterInstances(ctx, p.clients.EC2, cluster, false)
	if err != nil {
		return nil, fmt.Errorf("kops: %w", err)
	}
	var types []string
	for _, i := range all {
		types = append(types, i.Type)
	}
	if err := p.updateState(func(s *State) { s.Instances = types }); err != nil {
		return nil, err
	}
	workers, err := clusterInstances(ctx, p.clients.EC2, cluster, true)
	if err != nil {
		return nil, fmt.Errorf("kops: %w", err)
	}
	if len(workers) != 1 {
		return nil, fmt.Errorf("kops: cluster %s has %d running worker instances (tag %s), want 1", cluster, len(workers), roleNodeTag)
	}
	w := workers[0]
	if w.PublicIP == "" {
		return nil, fmt.Errorf("kops: worker %s has no public address to reach over SSH", w.ID)
	}
	cs, err := p.kubeClient()
	if err != nil {
		return nil, err
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("kops: list nodes: %w", err)
	}
	name := nodeFor(list.Items, w)
	if name == "" {
		return nil, fmt.Errorf("kops: no node of the cluster has provider ID .../%s or address %s", w.ID, w.PrivateIP)
	}
	knownHosts, err := p.hostKeys(ctx, w)
	if err != nil {
		return nil, err
	}
	user := p.sshUser(ctx, w)
	key := p.snapshot().SSHKey
	p.cli = p.newCLI(p.cli.path, key, user)
	d, err := sshnode.NewDialer(&sshnode.Config{User: user, KeyFile: key, KnownHostsFile: knownHosts}, p.log)
	if err != nil {
		return nil, fmt.Errorf("kops: %w", err)
	}
	return newNode(p, newSSHKubelet(sshnode.New(d, name, w.PublicIP), p.log, p.cfg.TimeoutFactor), w), nil
}

// nodeFor is the name of the node backing instance w: its provider ID
// (aws:///<zone>/<instance-id>) names it, or its InternalIP is w's
// private address.
func nodeFor(ns []corev1.Node, w workerInstance) string {
	for _, n := range ns {
		if strings.HasSuffix(n.Spec.ProviderID, "/"+w.ID) {
			return n.Name
		}
	}
	for _, n := range ns {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && a.Address == w.PrivateIP && w.PrivateIP != "" {
				return n.Name
			}
		}
	}
	return ""
}

// Console markers cloud-init prints around the host's public keys.
const (
	hostKeysBegin = "-----BEGIN SSH HOST KEY KEYS-----"
	hostKeysEnd   = "-----END SSH HOST KEY KEYS-----"
)

// hostKeys reads w's SSH host keys from its console output, where
// cloud-init prints them, and writes them as the run's known_hosts for its
// public address: the host key is checked, never trusted on first use.
func (p *provider) hostKeys(ctx context.Context, w workerInstance) (string, error) {
	deadline := time.Now().Add(hostKeyTimeout)
	for {
		out, err := p.clients.EC2.GetConsoleOutput(ctx, &ec2.GetConsoleOutputInput{InstanceId: aws.String(w.ID), Latest: aws.Bool(true)})
		var keys []ssh.PublicKey
		if err == nil {
			keys = parseHostKeys(aws.ToString(out.Output))
		}
		if len(keys) > 0 {
			var b strings.Builder
			for _, k := range keys {
				b.WriteString(knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort(w.PublicIP, "22"))}, k) + "\n")
			}
			path := filepath.Join(p.cfg.RunDir, "known_hosts")
			if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
				return "", err
			}
			p.log.Info("worker host keys from its console output", "instance", w.ID, "keys", len(keys), "known_hosts", path)
			return path, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("kops: the console output of %s shows no SSH host keys after %s (last error: %v); cannot check the host key", w.ID, hostKeyTimeout, err)
		}
		select {
		case <-ctx.Done():
			return "", context.Cause(ctx)
		case <-time.After(p.clients.poll()):
		}
	}
}

// parseHostKeys reads the keys between cloud-init's markers in a console
// output (base64, as EC2 returns it, or plain).
func parseHostKeys(console string) []ssh.PublicKey {
	if b, err := base64.StdEncoding.DecodeString(console); err == nil {
		console = string(b)
	}
	_, rest, ok := strings.Cut(console, hostKeysBegin)
	if !ok {
		return nil
	}
	block, _, ok := strings.Cut(rest, hostKeysEnd)
	if !ok {
		return nil
	}
	var keys []ssh.PublicKey
	for _, line := range strings.Split(block, "\n") {
		if k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(line))); err == nil {
			keys = append(keys, k)
		}
	}
	return keys
}

// dumpInstances is the part of kops toolbox dump -o yaml the provider
// reads: each instance's SSH user, which kops guesses from the image.
type dumpInstances struct {
	Instances []struct {
		Name    string `json:"name"`
		SSHUser string `json:"sshUser"`
	} `json:"instances"`
}

// sshUser asks kops toolbox dump for w's SSH user; ubuntu (kops's default
// images) when it cannot tell.
func (p *provider) sshUser(ctx context.Context, w workerInstance) string {
	res, err := p.cli.run(ctx, "toolbox", "dump", "--name", p.cfg.ClusterName(), "-o", "yaml", "--private-key", p.snapshot().SSHKey)
	var d dumpInstances
	if err == nil {
		err = yaml.Unmarshal([]byte(res.Stdout), &d)
	}
	for _, i := range d.Instances {
		if i.Name == w.ID && i.SSHUser != "" {
			return i.SSHUser
		}
	}
	p.log.Info("kops toolbox dump did not name the worker's SSH user; using kops's default image's", "user", defaultSSHUser, "err", errors.Join(err))
	return defaultSSHUser
}
