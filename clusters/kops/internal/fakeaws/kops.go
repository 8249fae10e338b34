package fakeaws

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// What kops and cloud-init write, as the real ones do. They are spelled
// here again, not taken from the provider: a fake that shared the
// provider's constants would agree with it even where both were wrong.
const (
	tagCluster     = "KubernetesCluster"
	tagRoleNode    = "k8s.io/role/node"
	tagRoleControl = "k8s.io/role/control-plane"
	hostKeysBegin  = "-----BEGIN SSH HOST KEY KEYS-----"
	hostKeysEnd    = "-----END SSH HOST KEY KEYS-----"
	// exitNotValid is kops validate cluster's exit code for a cluster
	// that is not valid yet.
	exitNotValid = 2
	// validateTimeout bounds the fake's look at the API server.
	validateTimeout = 30 * time.Second
	// deleteTimeout bounds delete's wait for the workloads made on a
	// Node's cluster to go (their pods finish on the Node's kubelet,
	// minutes under TCG).
	deleteTimeout = 10 * time.Minute
)

// WorldEnv names the world's file for the fake kops.
const WorldEnv = "SKEWTEST_FAKE_WORLD"

// FakeHostKey is the made-up worker's SSH host key, printed on its
// console when the world has no Node.
func FakeHostKey() ssh.PublicKey {
	k, _ := ssh.NewPublicKey(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey))
	return k
}

// FlagValue is the value of flag name in args (--name v or --name=v).
func FlagValue(args []string, name string) string {
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

// Kops is the fake kops executable: it records its arguments in the
// world and answers as kops does. kops get cluster exits 1 for a cluster
// it does not know; validate exits 2 while the cluster is "not valid
// yet"; update makes the cluster's instances, group, load balancer and
// volumes in the fake EC2 with kops's tags and the cloud labels; delete
// removes them. With a World.Node the worker is that machine (see Node).
func Kops(store *Store, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	name := FlagValue(args, "--name")
	secret := getenv("AWS_SECRET_ACCESS_KEY")
	code, hang := 0, false
	var out, errb strings.Builder
	var validateWith string
	var removeFrom string // the Node's kubeconfig, on delete cluster
	var madeSince time.Time
	err := store.Update(func(w *World) error {
		w.KopsCalls = append(w.KopsCalls, args)
		w.KopsPID = os.Getpid()
		if secret != "" {
			w.SecretSeen = true
		}
		verb := strings.Join(args[:min(2, len(args))], " ")
		switch {
		case verb == "version --short":
			out.WriteString("1.36.0\n")
		case verb == "get cluster":
			if !w.Clusters[name] {
				fmt.Fprintf(&errb, "Error: cluster not found %q\n", name)
				code = 1
				return nil
			}
			fmt.Fprintf(&out, "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: %s\n", name)
		case verb == "get instancegroups":
			out.WriteString("apiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata:\n  name: nodes-us-east-1a\n")
		case verb == "create cluster":
			if key := FlagValue(args, "--ssh-public-key"); key != "" {
				if _, err := os.Stat(key); err != nil {
					fmt.Fprintf(&errb, "Error: reading SSH public key %s: %v\n", key, err)
					code = 1
					return nil
				}
			}
			w.Clusters[name] = true
		case verb == "update cluster":
			if err := w.update(name, getenv("KUBECONFIG")); err != nil {
				fmt.Fprintf(&errb, "Error: %v\n", err)
				code = 1
				return nil
			}
			if w.Node != nil {
				if w.UpdatedAt == nil {
					w.UpdatedAt = map[string]time.Time{}
				}
				w.UpdatedAt[name] = time.Now()
			}
			hang = w.HangOnUpdate
		case verb == "validate cluster":
			w.ValidateCalls++
			if w.ValidateCalls <= w.NotValidFor {
				fmt.Fprintf(&errb, "Validation Failed\nmachine %s has not yet joined cluster\n", "i-0")
				if secret != "" {
					// A tool echoing its environment on error.
					fmt.Fprintf(&errb, "debug: AWS_SECRET_ACCESS_KEY=%s\n", secret)
				}
				code = exitNotValid
				return nil
			}
			if w.Node != nil {
				validateWith = getenv("KUBECONFIG")
			}
		case verb == "toolbox dump":
			if dir := FlagValue(args, "--dir"); dir != "" {
				body := "node dump of " + name + "\n"
				if secret != "" {
					body += "environment: AWS_SECRET_ACCESS_KEY=" + secret + "\n"
				}
				_ = os.MkdirAll(filepath.Join(dir, "nodes"), 0o755)
				_ = os.WriteFile(filepath.Join(dir, "nodes", "kubelet.log"), []byte(body), 0o644)
				return nil
			}
			user := "ubuntu"
			if w.Node != nil && w.Node.SSHUser != "" {
				user = w.Node.SSHUser
			}
			out.WriteString("instances:\n")
			for _, i := range w.Instances {
				if i.Tags[tagCluster] == name && i.State == "running" {
					fmt.Fprintf(&out, "- name: %s\n  sshUser: %s\n", i.ID, user)
				}
			}
		case verb == "delete cluster":
			for _, i := range w.Instances {
				if i.Tags[tagCluster] == name {
					w.terminate(i.ID)
				}
			}
			w.LBs = deleteTagged(w.LBs, func(l *LB) map[string]string { return l.Tags }, name)
			if !w.LeakOnDelete {
				w.Groups = deleteTagged(w.Groups, func(g *Group) map[string]string { return g.Tags }, name)
				w.Volumes = deleteTagged(w.Volumes, func(v *Volume) map[string]string { return v.Tags }, name)
			}
			if w.Node != nil {
				if t, ok := w.UpdatedAt[name]; ok {
					removeFrom, madeSince = w.Node.Kubeconfig, t
					delete(w.UpdatedAt, name)
				}
				if err := removeKey(w.Node.AuthorizedKeys, keyComment(name)); err != nil {
					fmt.Fprintf(&errb, "Error: %v\n", err)
					code = 1
					return nil
				}
			}
			delete(w.Clusters, name)
			fmt.Fprintf(&out, "Deleted cluster: %q\n", name)
		default:
			fmt.Fprintf(&errb, "fake kops: unknown command %q\n", args)
			code = 1
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(stderr, "fake kops:", err)
		return 1
	}
	if validateWith != "" && code == 0 {
		// Outside the world's lock: the API server may take a while.
		if err := nodesReady(validateWith); err != nil {
			fmt.Fprintf(&errb, "Validation Failed\n%v\n", err)
			code = exitNotValid
		}
	}
	if removeFrom != "" && code == 0 {
		// Outside the world's lock, as validate's look: the pods take a
		// while to finish.
		if err := removeMadeSince(removeFrom, madeSince); err != nil {
			fmt.Fprintf(&errb, "Error: %v\n", err)
			code = 1
		}
	}
	if code == 0 && len(args) > 0 && args[0] == "validate" {
		fmt.Fprintf(&out, "Your cluster %s is ready\n", name)
	}
	io.WriteString(stdout, out.String())
	io.WriteString(stderr, errb.String())
	if hang {
		// Hang like a slow AWS call until killed (SIGINT's cancel).
		time.Sleep(time.Hour)
	}
	return code
}

// update is kops update cluster --yes --admin: the cluster's instances,
// their root volumes, a security group and the API server's load
// balancer, tagged; the admin kubeconfig written to kubeconfig.
func (w *World) update(name, kubeconfig string) error {
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
	hostKeys := []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(FakeHostKey()))) + " root@ip-172-20-1-1"}
	public, private := "198.51.100.11", "172.20.1.1"
	kc := []byte(FakeKubeconfig)
	if n := w.Node; n != nil {
		hostKeys, public, private = n.HostKeys, n.PublicIP, n.PrivateIP
		b, err := os.ReadFile(n.Kubeconfig)
		if err != nil {
			return fmt.Errorf("the node's kubeconfig: %w", err)
		}
		kc = b
		// cloud-init installs the cluster's SSH public key for the
		// image's user.
		pub, err := os.ReadFile(w.createFlag(name, "--ssh-public-key"))
		if err != nil {
			return fmt.Errorf("the cluster's SSH public key: %w", err)
		}
		if err := addKey(n.AuthorizedKeys, strings.TrimSpace(string(pub)), keyComment(name)); err != nil {
			return err
		}
	}
	console := "cloud-init: ...\n" + hostKeysBegin + "\n" + strings.Join(hostKeys, "\n") + "\n" + hostKeysEnd + "\n"
	cp := &Instance{ID: w.ID("i"), Type: "c5.large", State: "running", PublicIP: "198.51.100.10", PrivateIP: "172.20.0.10", Zone: "us-east-1a", Tags: tags(tagRoleControl, "1")}
	node := &Instance{ID: w.ID("i"), Type: "c5.large", State: "running", PublicIP: public, PrivateIP: private, Zone: "us-east-1a", Tags: tags(tagRoleNode, "1"), Console: console}
	w.Instances = append(w.Instances, cp, node)
	for _, i := range []*Instance{cp, node} {
		w.Volumes = append(w.Volumes, &Volume{ID: w.ID("vol"), Tags: tags(), DeleteOnTermination: true, Attachments: []Attachment{{Instance: i.ID, State: "attached"}}})
	}
	w.Groups = append(w.Groups, &Group{ID: w.ID("sg"), Tags: tags(), UsedBy: node.ID})
	w.LBs = append(w.LBs, &LB{ARN: "arn:aws:elasticloadbalancing:us-east-1:000000000000:loadbalancer/net/api-" + w.ID("lb"), Tags: tags()})
	if kubeconfig != "" {
		if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// labels are the --cloud-labels of the create cluster call for name.
func (w *World) labels(name string) string { return w.createFlag(name, "--cloud-labels") }

func (w *World) createFlag(name, flag string) string {
	for _, c := range w.KopsCalls {
		if len(c) > 1 && c[0] == "create" && FlagValue(c, "--name") == name {
			return FlagValue(c, flag)
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

// keyComment marks the authorized_keys line the fake installed for a
// cluster, so that delete takes out that line and no other.
func keyComment(cluster string) string { return "fake-kops:" + cluster }

func addKey(path, key, comment string) error {
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	f := strings.Fields(key)
	if len(f) < 2 {
		return fmt.Errorf("not an SSH public key: %q", key)
	}
	line := f[0] + " " + f[1] + " " + comment
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if slices.Contains(lines, line) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(strings.TrimLeft(strings.Join(append(lines, line), "\n")+"\n", "\n")), 0o600)
}

func removeKey(path, comment string) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.HasSuffix(l, " "+comment) {
			keep = append(keep, l)
		}
	}
	return os.WriteFile(path, []byte(strings.Join(keep, "\n")+"\n"), 0o600)
}

// nodesReady is what kops validate cluster checks of the nodes: every
// node of kubeconfig's cluster Ready, and at least one.
func nodesReady(kubeconfig string) error {
	cs, err := Clientset(kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), validateTimeout)
	defer cancel()
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	if len(list.Items) == 0 {
		return fmt.Errorf("no nodes have joined the cluster")
	}
	for _, n := range list.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready {
			return fmt.Errorf("node %q is not ready", n.Name)
		}
	}
	return nil
}

// removeMadeSince is what deleting a real kops cluster does to the
// workloads on it: they are gone. The Node's cluster outlives the fake's
// cluster, so the fake deletes what was made in it since update cluster
// (the namespaces, with what is in them; PVs; StorageClasses) and waits
// until they are gone, as kops delete waits for its resources; a next run
// on the same Node then finds the cluster as a new one would be.
func removeMadeSince(kubeconfig string, since time.Time) error {
	cs, err := Clientset(kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	made := func(m metav1.Object) bool { return !m.GetCreationTimestamp().Time.Before(since.Truncate(time.Second)) }
	left := func() ([]string, error) {
		var out []string
		var errs []error
		// sweep deletes the objects of one kind made since, and names
		// those still there.
		sweep := func(kind string, objs []metav1.Object, lerr error, del func(context.Context, string, metav1.DeleteOptions) error) {
			if lerr != nil {
				errs = append(errs, lerr)
				return
			}
			for _, o := range objs {
				if !made(o) {
					continue
				}
				out = append(out, kind+"/"+o.GetName())
				if o.GetDeletionTimestamp() == nil {
					errs = append(errs, del(ctx, o.GetName(), metav1.DeleteOptions{}))
				}
			}
		}
		nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		sweep("namespace", objects(nss, err, func(l *corev1.NamespaceList) []corev1.Namespace { return l.Items }), err, cs.CoreV1().Namespaces().Delete)
		pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		sweep("pv", objects(pvs, err, func(l *corev1.PersistentVolumeList) []corev1.PersistentVolume { return l.Items }), err, cs.CoreV1().PersistentVolumes().Delete)
		scs, err := cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
		sweep("storageclass", objects(scs, err, func(l *storagev1.StorageClassList) []storagev1.StorageClass { return l.Items }), err, cs.StorageV1().StorageClasses().Delete)
		return out, errors.Join(errs...)
	}
	for {
		still, err := left()
		if err == nil && len(still) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster's workloads are not gone %s after delete: %v (%v)", deleteTimeout, still, err)
		case <-time.After(time.Second):
		}
	}
}

// objects are the items of a list the API returned, as metav1.Objects;
// none when listing failed.
func objects[L any, T any, PT interface {
	*T
	metav1.Object
}](list *L, err error, items func(*L) []T) []metav1.Object {
	if err != nil || list == nil {
		return nil
	}
	its := items(list)
	out := make([]metav1.Object, len(its))
	for i := range its {
		out[i] = PT(&its[i])
	}
	return out
}

// FakeKubeconfig is the admin kubeconfig of a made-up cluster: what
// update writes without a Node.
const FakeKubeconfig = `apiVersion: v1
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

// Clientset is a client of kubeconfig's cluster.
func Clientset(kubeconfig string) (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}
