package reconstruction

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/conditions"
	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/internal/testgate"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// multinodeKubelets are the nodes' first kubelets: one of each version the
// cache's module builds hold, oldest last.
var multinodeKubelets = []string{"v1.37.2", "v1.36.3", "v1.34.4"}

// multinodeNamespace holds one pod per node.
const multinodeNamespace = "skewtest-multinode"

// multinodeLabels are the spec's labels, with the providers it runs on
// and its kubelets.
var multinodeLabels = Label(slices.Concat([]string{"multinode", "disruptive"}, providersWhere(multinodeRunsOn), kubeletLabels(strings.Join(multinodeKubelets, ",")))...)

// multinodeRunsOn says whether the spec runs on provider d: one whose
// several nodes are kubelets of this host (Descriptor.KubeletsOnHost,
// MaxTestNodes: local), whose CSI mounts it reads in this host's mount
// table.
func multinodeRunsOn(d clusters.Descriptor) bool {
	return d.KubeletsOnHost && d.MaxTestNodes >= len(multinodeKubelets)
}

var _ = Describe("a local cluster with several nodes", multinodeLabels, func() {
	needsBinaries(multinodeLabels, func() *skewrun.Options {
		if !multinodeRunsOn(providerOf(os.Getenv("PROVIDER"))) {
			return nil
		}
		// The nodes' kubelets as a plan, newest first: the API server at
		// the newest, every kubelet within the skew policy.
		o := envOptions(strings.Join(multinodeKubelets, ","), "")
		o.VolumeKind = ""
		return o
	})
	It("runs one kubelet version per node, each node with its own CSI plugin, and leaves nothing behind", func(ctx SpecContext) {
		if d := providerOf(os.Getenv("PROVIDER")); !multinodeRunsOn(d) {
			Skip("several nodes on one host are a feature of " + strings.Join(providersWhere(multinodeRunsOn), ", ") + ", not run on PROVIDER=" + d.Name)
		}
		testgate.RequireRoot(GinkgoT(), "a real control plane, containerds, kubelets and mounts")
		cache := binaries.DefaultCacheDir()
		kubelets, missing := cachedKubelets(ctx, cache)
		if len(missing) > 0 {
			// The suite's prefetch built them unless this spec was
			// selected by focus alone.
			testgate.SkipOrFail(GinkgoT(), fmt.Sprintf("the binary cache %s lacks the kubelets %s", cache, strings.Join(missing, ", ")),
				"build each first: go run ./cmd/skewtest build "+missing[0]+" kubelet")
		}
		logger := slog.New(slog.NewTextHandler(GinkgoWriter, nil))
		before := footprint.Take(ctx)

		// Made as every run makes its provider: by name, with the shared
		// options and the provider's default settings.
		prov, err := clusters.New(providerOf(os.Getenv("PROVIDER")).Name, clusters.Options{RunID: reports.NewRunID(time.Now()), CacheDir: cache, Logger: logger,
			APIServerVersion: version.MustParseSemantic(multinodeKubelets[0]), InitialKubelets: kubelets}, nil)
		Expect(err).NotTo(HaveOccurred())
		vols, ok := prov.(volumeProvider)
		Expect(ok).To(BeTrue(), "the %s provider provisions the workload's volumes itself", prov.Name())
		csiCalls, ok := prov.(capabilities.WithCSICalls)
		Expect(ok).To(BeTrue(), "the %s provider records its CSI driver's calls", prov.Name())
		downed := false
		DeferCleanup(func(ctx SpecContext) {
			if !downed {
				Expect(prov.Down(ctx)).To(Succeed())
			}
		}, NodeTimeout(3*time.Minute))
		start := time.Now()
		Expect(prov.Up(ctx)).To(Succeed())
		AddReportEntry("bring-up of 3 nodes", time.Since(start).Round(100*time.Millisecond).String())

		By("every node is Ready at its own kubelet version, as the API server sees it")
		testNodes, err := prov.TestNodes(ctx)
		Expect(err).NotTo(HaveOccurred())
		names := workerNames(len(multinodeKubelets))
		Expect(nodeNames(testNodes)).To(Equal(names))
		cfg, err := prov.RESTConfig()
		Expect(err).NotTo(HaveOccurred())
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		ports := map[int32]string{}
		for i, name := range names {
			node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(node.Status.NodeInfo.KubeletVersion).To(Equal(multinodeKubelets[i]), "node %s", name)
			Expect(node.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))), "node %s: %s", name, conditions.NodeStatus(node))
			port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
			Expect(ports).NotTo(HaveKey(port), "node %s shares its kubelet port with %s", name, ports[port])
			ports[port] = name
			// Through the API server's node proxy: each node's name leads
			// to its own kubelet.
			Expect(kubeletNodeName(ctx, cs, name)).To(Equal(name))
		}

		By("a pod with a CSI volume on each node is mounted under that node's kubelet root only")
		_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: multinodeNamespace}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Pods are refused until the service account controller has made the
		// namespace's default account.
		Eventually(ctx, func() error {
			_, err := cs.CoreV1().ServiceAccounts(multinodeNamespace).Get(ctx, "default", metav1.GetOptions{})
			return err
		}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
		pvs := map[string]string{}
		for _, n := range testNodes {
			pvs[n.String()] = runPodWithVolume(ctx, cs, vols, n.String())
		}
		var uids []string
		for _, n := range testNodes {
			pod := waitPodRunning(ctx, cs, "pod-"+n.String())
			Expect(pod.Spec.NodeName).To(Equal(n.String()))
			uids = append(uids, string(pod.UID))
		}
		mounts, err := mountinfo.ParseFile("/proc/self/mountinfo")
		Expect(err).NotTo(HaveOccurred())
		for i, n := range testNodes {
			for j, other := range testNodes {
				target := filepath.Join(other.KubeletRootDir(), "pods", uids[i], "volumes", "kubernetes.io~csi", pvs[n.String()], "mount")
				if i == j {
					Expect(mountinfo.IsMountPoint(mounts, target)).To(BeTrue(), "pod on %s has its volume mounted at %s", n, target)
				} else {
					Expect(mountinfo.Under(mounts, filepath.Join(other.KubeletRootDir(), "pods", uids[i]))).To(BeEmpty(), "pod on %s has mounts under %s's root", n, other)
				}
			}
		}
		publishedBy := map[string]string{}
		for _, c := range csiCalls.CSICalls() {
			if c.Method == "NodePublishVolume" && c.Err == "" {
				publishedBy[c.VolumeID] = c.Node
			}
		}
		for _, n := range testNodes {
			Expect(publishedBy).To(HaveKeyWithValue("vol-"+pvs[n.String()], n.String()), "the CSI call log names the node that published the volume")
		}

		By("one node's kubelet hops to another version while the others' pods keep running")
		hopper := testNodes[1]
		containersBefore := containerStates(ctx, cs)
		Expect(containersBefore).To(HaveLen(len(testNodes)))
		Expect(hopper.StopKubelet(ctx)).To(Succeed())
		Expect(hopper.SwapKubelet(ctx, kubelets[0])).To(Succeed())
		Expect(hopper.StartKubelet(ctx)).To(Succeed())
		res, err := resources.New(cfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(conditions.WaitNodeReady(ctx, res, hopper.String(), multinodeKubelets[0], 2*time.Minute)).To(Succeed())
		for i, name := range names {
			node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			want := multinodeKubelets[i]
			if name == hopper.String() {
				want = multinodeKubelets[0]
			}
			Expect(node.Status.NodeInfo.KubeletVersion).To(Equal(want), "node %s", name)
		}
		Expect(containerStates(ctx, cs)).To(Equal(containersBefore), "no container restarted or changed")

		By("Down with the pods and their mounts in place leaves nothing behind")
		downed = true
		start = time.Now()
		Expect(prov.Down(ctx)).To(Succeed())
		AddReportEntry("teardown of 3 nodes", time.Since(start).Round(100*time.Millisecond).String())
		Expect(footprint.Diff(before, footprint.Take(ctx))).To(BeEmpty())
	})
})

// cachedKubelets are the multinode kubelets, from the module builds in
// cache, and the versions missing from it. The rest (control plane,
// containerd) Up builds if it must.
func cachedKubelets(ctx context.Context, cache string) ([]binaries.Binary, []string) {
	mb := &binaries.ModuleBuilder{CacheDir: cache}
	var missing []string
	for _, v := range multinodeKubelets {
		if _, err := os.Stat(mb.BinaryPath(version.MustParseSemantic(v), "kubelet")); err != nil {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		return nil, missing
	}
	r := &binaries.Resolver{CacheDir: cache, Module: mb}
	var out []binaries.Binary
	for _, v := range multinodeKubelets {
		b, err := r.Resolve(ctx, "kubelet", "module:"+v)
		Expect(err).NotTo(HaveOccurred())
		out = append(out, b)
	}
	return out, nil
}

func nodeNames(ns []nodes.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.String())
	}
	return out
}

// kubeletNodeName asks the kubelet behind node's API server proxy which
// node it runs (its kubelet_node_name metric).
func kubeletNodeName(ctx context.Context, cs kubernetes.Interface, node string) string {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred(), "metrics of %s through the API server", node)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, `kubelet_node_name{node="`); ok {
			name, _, _ := strings.Cut(rest, `"`)
			return name
		}
	}
	Fail("kubelet metrics of " + node + " have no kubelet_node_name")
	return ""
}

// volumeProvider is a provider that provisions the workload's volumes and
// names its image itself (the scenario's reconstruction.Cluster).
type volumeProvider interface {
	ProvisionVolumes(ctx context.Context, req storage.Request) (storage.Volumes, error)
	Workload() storage.Workload
}

// workerNames are the names of n nodes as kind names workers, and as the
// providers that make several nodes here name theirs: skewtest-worker,
// skewtest-worker2, ...
func workerNames(n int) []string {
	out := []string{"skewtest-worker"}
	for i := 2; i <= n; i++ {
		out = append(out, fmt.Sprintf("skewtest-worker%d", i))
	}
	return out[:n]
}

// runPodWithVolume provisions a CSI volume on node and starts a pod there
// using it; it returns the PV's name.
func runPodWithVolume(ctx context.Context, cs kubernetes.Interface, prov volumeProvider, node string) string {
	claim := "data-" + node
	vols, err := prov.ProvisionVolumes(ctx, storage.Request{Kind: storage.CSI, Namespace: multinodeNamespace, Claims: []string{claim}, Size: "16Mi", Node: node})
	Expect(err).NotTo(HaveOccurred())
	Expect(vols.PVs).To(HaveLen(1))
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: multinodeNamespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(vols.StorageClass),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		},
	}
	_, err = cs.CoreV1().PersistentVolumeClaims(multinodeNamespace).Create(ctx, pvc, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	w := prov.Workload()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-" + node, Namespace: multinodeNamespace},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: node},
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			Containers: []corev1.Container{{
				Name: "workload", Image: w.Image, ImagePullPolicy: corev1.PullPolicy(w.PullPolicy), Command: w.Command,
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
		},
	}
	_, err = cs.CoreV1().Pods(multinodeNamespace).Create(ctx, pod, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return vols.PVs[0].Name
}

func waitPodRunning(ctx context.Context, cs kubernetes.Interface, name string) *corev1.Pod {
	var pod *corev1.Pod
	Eventually(ctx, func(g Gomega) {
		var err error
		pod, err = cs.CoreV1().Pods(multinodeNamespace).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	}).WithTimeout(2*time.Minute).WithPolling(200*time.Millisecond).Should(Succeed(), "pod %s Running", name)
	return pod
}

// containerStates are "pod container-id restarts" of the namespace's pods.
func containerStates(ctx context.Context, cs kubernetes.Interface) []string {
	pods, err := cs.CoreV1().Pods(multinodeNamespace).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			out = append(out, fmt.Sprintf("%s %s %d", p.Name, c.ContainerID, c.RestartCount))
		}
	}
	return out
}
