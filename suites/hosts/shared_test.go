package hosts

// The shared-cluster proof: someone else's workload under the names every
// older skewtest run used (namespace skewtest, StatefulSet web, claim
// data-web-0), with a credential in a Secret and in a container's
// environment, made in the guest's cluster before the runs; the runs must
// leave every one of its objects as it was, and copy none of its values.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/internal/suiteconfig"
)

const (
	// The owner's workload, under the names every run used before runs
	// got namespaces of their own.
	foreignNamespace = "skewtest"
	foreignSTS       = "web"
	foreignClaim     = "data-web-0"
	foreignPod       = "web-0"
	foreignSecret    = "owner-credentials"
	// foreignReplicas is the PVs the owner's StatefulSet binds on the
	// first node.
	foreignReplicas = 1
	// foreignReady bounds the owner's pod's start (TCG).
	foreignReady = 10 * time.Minute
	// otherContext is the kubeconfig context the clean-after-a-switch
	// check makes current: another cluster's server.
	otherContext = "someone-elses-cluster"
)

// foreignWorkload is the owner's objects and their UIDs as made.
type foreignWorkload struct {
	secret string // the planted credential's value
	uids   map[string]types.UID
}

// plantedSecret is a value no file of the runs may hold.
func plantedSecret() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "owner-token-" + hex.EncodeToString(b)
}

// clientFor is a clientset of kubeconfig.
func clientFor(kubeconfig string) *kubernetes.Clientset {
	GinkgoHelper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(rc)
	Expect(err).NotTo(HaveOccurred())
	return cs
}

// makeForeignWorkload makes the owner's workload on node, as kubectl apply
// would (no run label), and waits for its pod to run on its claim.
func makeForeignWorkload(ctx context.Context, cs kubernetes.Interface, node, storageClass, image string) *foreignWorkload {
	GinkgoHelper()
	f := &foreignWorkload{secret: plantedSecret(), uids: map[string]types.UID{}}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: foreignNamespace}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "the owner's namespace %s", foreignNamespace)
	sec, err := cs.CoreV1().Secrets(foreignNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: foreignSecret},
		StringData: map[string]string{"token": f.secret},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	labels := map[string]string{"app": "owners-" + foreignSTS}
	sts, err := cs.AppsV1().StatefulSets(foreignNamespace).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: foreignSTS},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](foreignReplicas),
			ServiceName: foreignSTS,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{corev1.LabelHostname: node},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					// A run stops the node's kubelet for as long as a hop,
					// or a killed run until its clean: the node
					// controller's eviction after 5 minutes NotReady
					// (TCG is slow) is not what this proof watches for.
					Tolerations: []corev1.Toleration{
						{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
						{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
					},
					Containers: []corev1.Container{{
						Name: "app", Image: image, ImagePullPolicy: corev1.PullNever,
						Command: []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"},
						// An inline credential, as many manifests carry one.
						Env:          []corev1.EnvVar{{Name: "OWNER_TOKEN", Value: f.secret}},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr.To(storageClass),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
				},
			}},
		},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	var pod *corev1.Pod
	Eventually(func(g Gomega) {
		var err error
		pod, err = cs.CoreV1().Pods(foreignNamespace).Get(ctx, foreignPod, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	}).WithContext(ctx).WithTimeout(foreignReady).WithPolling(2*time.Second).Should(Succeed(), "the owner's pod %s/%s", foreignNamespace, foreignPod)
	pvc, err := cs.CoreV1().PersistentVolumeClaims(foreignNamespace).Get(ctx, foreignClaim, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	f.uids["namespace/"+ns.Name] = ns.UID
	f.uids["secret/"+sec.Name] = sec.UID
	f.uids["statefulset/"+sts.Name] = sts.UID
	f.uids["pod/"+pod.Name] = pod.UID
	f.uids["pvc/"+pvc.Name] = pvc.UID
	f.uids["pv/"+pv.Name] = pv.UID
	return f
}

// current reads the owner's objects' UIDs as they are now; a missing one
// is "".
func (f *foreignWorkload) current(ctx context.Context, cs kubernetes.Interface) map[string]types.UID {
	now := map[string]types.UID{}
	for key := range f.uids {
		kind, name, _ := strings.Cut(key, "/")
		var m metav1.Object
		var err error
		switch kind {
		case "namespace":
			m, err = cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		case "secret":
			m, err = cs.CoreV1().Secrets(foreignNamespace).Get(ctx, name, metav1.GetOptions{})
		case "statefulset":
			m, err = cs.AppsV1().StatefulSets(foreignNamespace).Get(ctx, name, metav1.GetOptions{})
		case "pod":
			m, err = cs.CoreV1().Pods(foreignNamespace).Get(ctx, name, metav1.GetOptions{})
		case "pvc":
			m, err = cs.CoreV1().PersistentVolumeClaims(foreignNamespace).Get(ctx, name, metav1.GetOptions{})
		case "pv":
			m, err = cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		}
		if err == nil {
			now[key] = m.GetUID()
		} else {
			now[key] = ""
		}
	}
	return now
}

// expectUntouched checks that every object of the owner's is the one made
// (same UID), its pod still Running.
func (f *foreignWorkload) expectUntouched(ctx context.Context, cs kubernetes.Interface) {
	GinkgoHelper()
	Expect(f.current(ctx, cs)).To(Equal(f.uids), "the owner's objects (kind/name: UID) after the runs")
	pod, err := cs.CoreV1().Pods(foreignNamespace).Get(ctx, foreignPod, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "the owner's pod")
	Expect(pod.DeletionTimestamp).To(BeNil(), "the owner's pod is being deleted")
}

// runNamespaces are the namespaces carrying a run's label, as
// "name (run)".
func runNamespaces(ctx context.Context, cs kubernetes.Interface) []string {
	GinkgoHelper()
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: workloads.RunLabel})
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, n := range list.Items {
		out = append(out, n.Name+" ("+n.Labels[workloads.RunLabel]+")")
	}
	return out
}

// switchContext makes otherContext, on another cluster's server, the
// kubeconfig's current context, as kubectl config use-context would; the
// returned func puts the file back as it was.
func switchContext(kubeconfig string) (restore func()) {
	GinkgoHelper()
	orig, err := os.ReadFile(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	kc, err := clientcmd.Load(orig)
	Expect(err).NotTo(HaveOccurred())
	cur := kc.Contexts[kc.CurrentContext]
	Expect(cur).NotTo(BeNil(), "kubeconfig %s has no current context", kubeconfig)
	kc.Clusters[otherContext] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	kc.Contexts[otherContext] = &clientcmdapi.Context{Cluster: otherContext, AuthInfo: cur.AuthInfo}
	kc.CurrentContext = otherContext
	Expect(clientcmd.WriteToFile(*kc, kubeconfig)).To(Succeed())
	return func() { Expect(os.WriteFile(kubeconfig, orig, 0o600)).To(Succeed()) }
}

// runOn is one `skewtest run` of the existing provider against a node,
// started in the background.
type runOn struct {
	node string
	art  string
	cmd  *osexec.Cmd
	done chan error
}

// wait is the run's end.
func (r *runOn) wait() error { return <-r.done }

// startRun starts a run against node l, its output in the spec's log;
// stderr, when set, may change the command before it starts (a pipe of
// its own for the run's log).
func (k *kopsNode) startRun(ctx context.Context, g *guestVM, src, bin string, l nodeLayout, art string, stderr func(*osexec.Cmd)) *runOn {
	GinkgoHelper()
	cmd := suiteconfig.Interruptible(osexec.CommandContext(ctx, bin, "run"))
	cmd.Dir, cmd.Env = src, append(os.Environ(), k.runEnv(g, l, art)...)
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	if stderr != nil {
		stderr(cmd)
	}
	Expect(cmd.Start()).To(Succeed(), "skewtest run against node %s", l.Node)
	r := &runOn{node: l.Node, art: art, cmd: cmd, done: make(chan error, 1)}
	go func() { r.done <- cmd.Wait() }()
	return r
}

// expectReport checks that the run wrote a report under its artifacts.
func (r *runOn) expectReport() {
	GinkgoHelper()
	reports, _ := filepath.Glob(filepath.Join(r.art, "*", "report.md"))
	Expect(reports).NotTo(BeEmpty(), "no report.md under %s", r.art)
}

// String names the workload for a report entry.
func (f *foreignWorkload) String() string {
	return fmt.Sprintf("namespace %s: StatefulSet %s, claim %s, pod %s, Secret %s (%d objects by UID)", foreignNamespace, foreignSTS, foreignClaim, foreignPod, foreignSecret, len(f.uids))
}
