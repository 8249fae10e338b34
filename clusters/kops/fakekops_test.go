package kops

// The fake kops executable: this test binary, run through a
// wrapper script named kops, records its arguments in the fake world and
// answers as kops does: kops get cluster exits 1 for a cluster it does not
// know, validate exits 2 while the cluster is "not valid yet", update
// makes the cluster's instances, group, load balancer and volumes in the
// fake EC2 with kops's tags and the cloud labels, delete removes them.

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

const (
	fakeToolEnv  = "SKEWTEST_FAKE_TOOL"
	fakeWorldEnv = "SKEWTEST_FAKE_WORLD"
)

func TestMain(m *testing.M) {
	switch os.Getenv(fakeToolEnv) {
	case "kops":
		os.Exit(fakeKops(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// writeFakeTools writes kops and kubectl wrappers into dir that run this
// test binary as the fakes.
func writeFakeTools(t *testing.T, dir, world string) (kops, kubectl string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\n%s=kops %s=%s exec %s \"$@\"\n", fakeToolEnv, fakeWorldEnv, world, self)
	if err := os.WriteFile(filepath.Join(dir, "kops"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// kubectl only writes what kubectl would: a shell script is enough,
	// and keeps the dump from starting this test binary ten times.
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(fakeKubectl), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "kops"), filepath.Join(dir, "kubectl")
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// fakeHostKey is the worker's SSH host key, printed on its console.
func fakeHostKey() ssh.PublicKey {
	k, _ := ssh.NewPublicKey(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey))
	return k
}

func fakeKops(args []string) int {
	store := &fakeStore{path: os.Getenv(fakeWorldEnv)}
	name := flagValue(args, "--name")
	secret := os.Getenv("AWS_SECRET_ACCESS_KEY")
	code, hang := 0, false
	var stdout, stderr strings.Builder
	err := store.update(func(w *fakeWorld) error {
		w.KopsCalls = append(w.KopsCalls, args)
		w.KopsPID = os.Getpid()
		if secret != "" {
			w.SecretSeen = true
		}
		verb := strings.Join(args[:min(2, len(args))], " ")
		switch {
		case verb == "version --short":
			stdout.WriteString("1.36.0\n")
		case verb == "get cluster":
			if !w.Clusters[name] {
				fmt.Fprintf(&stderr, "Error: cluster not found %q\n", name)
				code = 1
				return nil
			}
			fmt.Fprintf(&stdout, "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: %s\n", name)
		case verb == "get instancegroups":
			stdout.WriteString("apiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata:\n  name: nodes-us-east-1a\n")
		case verb == "create cluster":
			w.Clusters[name] = true
		case verb == "update cluster":
			labels := map[string]string{}
			for _, kv := range strings.Split(w.labels(name), ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					labels[k] = v
				}
			}
			tags := func(extra ...string) map[string]string {
				t := map[string]string{tagCluster: name, "kubernetes.io/cluster/" + name: "owned"}
				for k, v := range labels {
					t[k] = v
				}
				for i := 0; i+1 < len(extra); i += 2 {
					t[extra[i]] = extra[i+1]
				}
				return t
			}
			console := "cloud-init: ...\n" + hostKeysBegin + "\n" + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(fakeHostKey()))) + " root@ip-172-20-1-1\n" + hostKeysEnd + "\n"
			cp := &fakeInstance{ID: w.id("i"), Type: "c5.large", State: "running", PublicIP: "198.51.100.10", PrivateIP: "172.20.0.10", Zone: "us-east-1a", Tags: tags("k8s.io/role/control-plane", "1")}
			node := &fakeInstance{ID: w.id("i"), Type: "c5.large", State: "running", PublicIP: "198.51.100.11", PrivateIP: "172.20.1.1", Zone: "us-east-1a", Tags: tags(roleNodeTag, "1"), Console: console}
			w.Instances = append(w.Instances, cp, node)
			for _, i := range []*fakeInstance{cp, node} {
				w.Volumes = append(w.Volumes, &fakeVolume{ID: w.id("vol"), Tags: tags(), DeleteOnTermination: true, Attachments: []fakeAttachment{{Instance: i.ID, State: "attached"}}})
			}
			w.Groups = append(w.Groups, &fakeGroup{ID: w.id("sg"), Tags: tags(), UsedBy: node.ID})
			w.LBs = append(w.LBs, &fakeLB{ARN: "arn:aws:elasticloadbalancing:us-east-1:000000000000:loadbalancer/net/api-" + w.id("lb"), Tags: tags()})
			if kc := os.Getenv("KUBECONFIG"); kc != "" {
				_ = os.WriteFile(kc, []byte(fakeKubeconfig), 0o600)
			}
			hang = w.HangOnUpdate
		case verb == "validate cluster":
			w.ValidateCalls++
			if w.ValidateCalls <= w.NotValidFor {
				fmt.Fprintf(&stderr, "Validation Failed\nmachine %s has not yet joined cluster\n", "i-0")
				if secret != "" {
					// A tool echoing its environment on error.
					fmt.Fprintf(&stderr, "debug: AWS_SECRET_ACCESS_KEY=%s\n", secret)
				}
				code = exitNotValid
				return nil
			}
			fmt.Fprintf(&stdout, "Your cluster %s is ready\n", name)
		case verb == "toolbox dump":
			if dir := flagValue(args, "--dir"); dir != "" {
				body := "node dump of " + name + "\n"
				if secret != "" {
					body += "environment: AWS_SECRET_ACCESS_KEY=" + secret + "\n"
				}
				_ = os.MkdirAll(filepath.Join(dir, "nodes"), 0o755)
				_ = os.WriteFile(filepath.Join(dir, "nodes", "kubelet.log"), []byte(body), 0o644)
				return nil
			}
			stdout.WriteString("instances:\n")
			for _, i := range w.Instances {
				if i.Tags[tagCluster] == name && i.State == "running" {
					fmt.Fprintf(&stdout, "- name: %s\n  sshUser: ubuntu\n", i.ID)
				}
			}
		case verb == "delete cluster":
			for _, i := range w.Instances {
				if i.Tags[tagCluster] == name {
					w.terminate(i.ID)
				}
			}
			w.LBs = deleteTagged(w.LBs, func(l *fakeLB) map[string]string { return l.Tags }, name)
			if !w.LeakOnDelete {
				w.Groups = deleteTagged(w.Groups, func(g *fakeGroup) map[string]string { return g.Tags }, name)
				w.Volumes = deleteTagged(w.Volumes, func(v *fakeVolume) map[string]string { return v.Tags }, name)
			}
			delete(w.Clusters, name)
			fmt.Fprintf(&stdout, "Deleted cluster: %q\n", name)
		default:
			fmt.Fprintf(&stderr, "fake kops: unknown command %q\n", args)
			code = 1
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake kops:", err)
		return 1
	}
	os.Stdout.WriteString(stdout.String())
	os.Stderr.WriteString(stderr.String())
	if hang {
		// Hang like a slow AWS call until killed (SIGINT's cancel).
		time.Sleep(time.Hour)
	}
	return code
}

// labels are the --cloud-labels of the create cluster call for name.
func (w *fakeWorld) labels(name string) string {
	for _, c := range w.KopsCalls {
		if len(c) > 1 && c[0] == "create" && flagValue(c, "--name") == name {
			return flagValue(c, "--cloud-labels")
		}
	}
	return ""
}

func deleteTagged[T any](items []T, tags func(T) map[string]string, cluster string) []T {
	var out []T
	for _, it := range items {
		if tags(it)[tagCluster] != cluster {
			out = append(out, it)
		}
	}
	return out
}

const fakeKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: fake
  context:
    cluster: fake
    user: admin
current-context: fake
users:
- name: admin
  user:
    token: fake-token
`

// fakeKubectl answers kubectl cluster-info dump --output-directory D and
// kubectl get X -o yaml.
const fakeKubectl = `#!/bin/sh
while [ $# -gt 0 ]; do
  if [ "$1" = --output-directory ]; then mkdir -p "$2" && echo '{"kind":"NodeList","items":[]}' > "$2/nodes.json"; exit 0; fi
  shift
done
printf 'apiVersion: v1\nkind: List\nitems: []\n'
`
