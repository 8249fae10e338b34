// Package hostpath deploys the upstream CSI hostpath driver
// (kubernetes-csi/csi-driver-host-path) on a kind cluster, as typed objects
// written here rather than upstream's YAML, for users who are online: every
// image is pulled from registry.k8s.io. A host without registry access uses
// skewtest's own node plugin instead (KIND_CSI=skewtest). It is the kind
// provider's, and public so that a suite can have a real API server check
// its objects (Validate) without importing a provider.
//
// The deployment is upstream's single-node one, cut down to what volume
// reconstruction needs: the plugin StatefulSet with the hostpath plugin,
// node-driver-registrar, livenessprobe, csi-attacher and csi-provisioner.
// No snapshotter, resizer or health monitor: the first needs the snapshot
// CRDs and a snapshot controller, and none of them take part in mounting.
//
// Upstream sources followed (the version each object follows is noted at
// the object):
//   - kubernetes-csi/csi-driver-host-path
//     deploy/kubernetes-1.34/hostpath/csi-hostpath-plugin.yaml at commit
//     3c6f759f893a10eac631d5309adca736b506ab82, the newest versioned
//     deployment there, for the StatefulSet, the images and the service
//     account's bindings;
//   - the deployment's csi-hostpath-driverinfo.yaml and
//     examples/csi-storageclass.yaml, as deploy/util/chart-releaser.sh
//     copies them into charts/csi-hostpathplugin/templates (commit
//     43105a005ffadbab3d875400aba53e06a9bf7ea9), for the CSIDriver and
//     the StorageClass;
//   - the sidecars' deploy/kubernetes/rbac.yaml (see rbac.go).
package hostpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/k8s"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/klient/wait/conditions"

	skewconditions "sigs.k8s.io/skewtest/clusters/conditions"
)

const (
	// DriverName is the CSI driver name the plugin registers.
	DriverName = "hostpath.csi.k8s.io"
	// StorageClassName is the StorageClass that provisions from the driver.
	StorageClassName = "skewtest-hostpath"
	// Namespace holds every namespaced object of the deployment.
	Namespace = "skewtest-hostpath"
	// StatefulSetName is upstream's name for the plugin StatefulSet.
	StatefulSetName = "csi-hostpathplugin"
)

// Images, pinned to the tags of csi-hostpath-plugin.yaml in
// deploy/kubernetes-1.34 of csi-driver-host-path (commit 3c6f759f).
const (
	HostPathPluginImage      = "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1"
	NodeDriverRegistrarImage = "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0"
	LivenessProbeImage       = "registry.k8s.io/sig-storage/livenessprobe:v2.19.0"
	AttacherImage            = "registry.k8s.io/sig-storage/csi-attacher:v4.12.0"
	ProvisionerImage         = "registry.k8s.io/sig-storage/csi-provisioner:v6.3.0"
)

// Images lists every image the deployment runs, for pre-pulling or
// `kind load` on a host that can pull but whose nodes cannot.
func Images() []string {
	return []string{HostPathPluginImage, NodeDriverRegistrarImage, LivenessProbeImage, AttacherImage, ProvisionerImage}
}

const (
	kubeletDir = "/var/lib/kubelet"
	// socketDir is where the plugin's socket lives on the node; the
	// kubelet is told this path, the containers see it as /csi.
	socketDir = kubeletDir + "/plugins/csi-hostpath"
	// RegistrationPath is the socket the kubelet dials, as the registrar
	// reports it.
	RegistrationPath = socketDir + "/csi.sock"
	csiAddress       = "/csi/csi.sock"
	healthPort       = 9898
	registrarPort    = 9809
)

// Objects returns every object of the deployment, in creation order, with
// the plugin pinned to node (its kubernetes.io/hostname label, which kind
// sets to the node name).
func Objects(node string) []k8s.Object {
	objs := []k8s.Object{namespace(), csiDriver()}
	objs = append(objs, rbacObjects()...)
	return append(objs, pluginStatefulSet(node), storageClass())
}

// labelsFor follows upstream's app.kubernetes.io labels; managed-by lets
// skewtest find what it made.
func labelsFor(name, component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/instance":   DriverName,
		"app.kubernetes.io/part-of":    "csi-driver-host-path",
		"app.kubernetes.io/name":       name,
		"app.kubernetes.io/component":  component,
		"app.kubernetes.io/managed-by": "skewtest",
	}
}

// namespace keeps the deployment out of default (where upstream puts it).
// The plugin runs privileged, so the namespace says so for Pod Security
// admission instead of relying on the cluster's default level.
func namespace() *corev1.Namespace {
	l := labelsFor("csi-hostpathplugin", "namespace")
	l["pod-security.kubernetes.io/enforce"] = "privileged"
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace, Labels: l}}
}

// csiDriver follows csi-hostpath-driverinfo.yaml (as copied into
// charts/csi-hostpathplugin/templates at 43105a00). Upstream leaves
// attachRequired unset, which the API defaults to true; it is spelled out
// here because it is why the attacher runs: the kubelet waits for a
// VolumeAttachment that only the external-attacher marks attached.
func csiDriver() *storagev1.CSIDriver {
	return &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: DriverName, Labels: labelsFor(DriverName, "csi-driver")},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired: ptr.To(true),
			// Pod info tells the plugin whether a volume is ephemeral.
			PodInfoOnMount:       ptr.To(true),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
			FSGroupPolicy:        ptr.To(storagev1.FileFSGroupPolicy),
		},
	}
}

// storageClass follows csi-storageclass.yaml except for the binding mode:
// upstream binds Immediate; WaitForFirstConsumer makes the provisioner
// create the volume for the node the pod was scheduled to, which is where
// the scenario's pods and the single plugin are. Expansion stays off as no
// resizer runs.
func storageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClassName, Labels: labelsFor("csi-hostpathplugin", "storageclass")},
		Provisioner:       DriverName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
}

func hostPathVolume(name, path string, t corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(t)}}}
}

// nodeNameEnv is the downward-API node name the plugin uses as its CSI node
// ID.
var nodeNameEnv = corev1.EnvVar{Name: "KUBE_NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}

// privileged is upstream's for every sidecar too: on SELinux hosts an
// unprivileged container cannot reach the socket the privileged plugin made.
func privileged() *corev1.SecurityContext {
	return &corev1.SecurityContext{Privileged: ptr.To(true)}
}

var socketMount = corev1.VolumeMount{Name: "socket-dir", MountPath: "/csi"}

// pluginStatefulSet follows csi-hostpathplugin of
// deploy/kubernetes-1.34/hostpath/csi-hostpath-plugin.yaml (commit
// 3c6f759f) without the csi-resizer and csi-snapshotter containers, and with
// a nodeSelector: upstream lets the one replica land anywhere, the
// scenario needs it on the node under test.
func pluginStatefulSet(node string) *appsv1.StatefulSet {
	sel := labelsFor("csi-hostpathplugin", "plugin")
	bidi := ptr.To(corev1.MountPropagationBidirectional)
	containers := []corev1.Container{
		{
			Name:  "hostpath",
			Image: HostPathPluginImage,
			Args: []string{
				"--drivername=" + DriverName,
				"--v=5",
				"--endpoint=$(CSI_ENDPOINT)",
				"--nodeid=$(KUBE_NODE_NAME)",
			},
			Env:             []corev1.EnvVar{{Name: "CSI_ENDPOINT", Value: "unix://" + csiAddress}, nodeNameEnv},
			SecurityContext: privileged(),
			Ports:           []corev1.ContainerPort{{Name: "healthz", ContainerPort: healthPort, Protocol: corev1.ProtocolTCP}},
			LivenessProbe: &corev1.Probe{
				ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("healthz")}},
				FailureThreshold:    5,
				InitialDelaySeconds: 10,
				TimeoutSeconds:      3,
				PeriodSeconds:       2,
			},
			// Bidirectional so the mounts the plugin makes under the
			// kubelet's directories show on the node, where the kubelet
			// and the pods look for them.
			VolumeMounts: []corev1.VolumeMount{
				socketMount,
				{Name: "mountpoint-dir", MountPath: kubeletDir + "/pods", MountPropagation: bidi},
				{Name: "plugins-dir", MountPath: kubeletDir + "/plugins", MountPropagation: bidi},
				{Name: "csi-data-dir", MountPath: "/csi-data-dir"},
				{Name: "dev-dir", MountPath: "/dev"},
			},
		},
		{
			Name:  "node-driver-registrar",
			Image: NodeDriverRegistrarImage,
			Args: []string{
				"--v=5",
				"--csi-address=" + csiAddress,
				"--kubelet-registration-path=" + RegistrationPath,
				fmt.Sprintf("--http-endpoint=:%d", registrarPort),
			},
			SecurityContext: privileged(),
			Env:             []corev1.EnvVar{nodeNameEnv},
			Ports:           []corev1.ContainerPort{{Name: "healthz", ContainerPort: registrarPort, Protocol: corev1.ProtocolTCP}},
			LivenessProbe: &corev1.Probe{
				ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("healthz")}},
				InitialDelaySeconds: 30,
				TimeoutSeconds:      15,
				PeriodSeconds:       10,
				FailureThreshold:    3,
			},
			VolumeMounts: []corev1.VolumeMount{
				socketMount,
				{Name: "registration-dir", MountPath: "/registration"},
				{Name: "csi-data-dir", MountPath: "/csi-data-dir"},
			},
		},
		{
			Name:         "liveness-probe",
			Image:        LivenessProbeImage,
			Args:         []string{"--csi-address=" + csiAddress, fmt.Sprintf("--health-port=%d", healthPort)},
			VolumeMounts: []corev1.VolumeMount{socketMount},
		},
		{
			Name:            "csi-attacher",
			Image:           AttacherImage,
			Args:            []string{"--v=5", "--csi-address=" + csiAddress},
			SecurityContext: privileged(),
			VolumeMounts:    []corev1.VolumeMount{socketMount},
		},
		{
			Name:            "csi-provisioner",
			Image:           ProvisionerImage,
			Args:            []string{"-v=5", "--csi-address=" + csiAddress, "--feature-gates=Topology=true"},
			SecurityContext: privileged(),
			VolumeMounts:    []corev1.VolumeMount{socketMount},
		},
	}
	for i := range containers {
		// What the API would default to for a pinned tag; explicit so an
		// image loaded into the node beforehand is used as is.
		containers[i].ImagePullPolicy = corev1.PullIfNotPresent
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: StatefulSetName, Namespace: Namespace, Labels: sel},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: StatefulSetName,
			// One replica: the hostpath driver keeps its volumes on the
			// node it runs on, so controller and node side must be one.
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{
					ServiceAccountName: serviceAccountName,
					NodeSelector:       map[string]string{corev1.LabelHostname: node},
					Containers:         containers,
					Volumes: []corev1.Volume{
						hostPathVolume("socket-dir", socketDir, corev1.HostPathDirectoryOrCreate),
						hostPathVolume("mountpoint-dir", kubeletDir+"/pods", corev1.HostPathDirectoryOrCreate),
						hostPathVolume("registration-dir", kubeletDir+"/plugins_registry", corev1.HostPathDirectory),
						hostPathVolume("plugins-dir", kubeletDir+"/plugins", corev1.HostPathDirectory),
						// Where the volumes' data lives on the node; it
						// outlives the plugin's container.
						hostPathVolume("csi-data-dir", "/var/lib/csi-hostpath-data/", corev1.HostPathDirectoryOrCreate),
						hostPathVolume("dev-dir", "/dev", corev1.HostPathDirectory),
					},
				},
			},
		},
	}
}

// Validate has the API server check every object of Objects(node) with a
// server-side dry run (validation and admission, nothing stored). The
// namespaced objects need their namespace: Validate creates it when
// missing and deletes it again. Deploy does the same check first, so a
// cluster that rejects an object fails before the driver half exists.
func Validate(ctx context.Context, cfg *rest.Config, node string) (err error) {
	res, err := resources.New(cfg)
	if err != nil {
		return fmt.Errorf("validate CSI hostpath driver: %w", err)
	}
	created, err := ensureNamespace(ctx, res)
	if err != nil {
		return fmt.Errorf("validate CSI hostpath driver: %w", err)
	}
	if created {
		defer func() {
			if derr := res.Delete(context.WithoutCancel(ctx), namespace()); derr != nil && !apierrors.IsNotFound(derr) {
				err = errors.Join(err, fmt.Errorf("validate CSI hostpath driver: delete namespace %s: %w", Namespace, derr))
			}
		}()
	}
	return dryRun(ctx, res, node)
}

func ensureNamespace(ctx context.Context, res *resources.Resources) (created bool, err error) {
	err = res.Create(ctx, namespace())
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create Namespace %s: %w", Namespace, err)
	}
	return true, nil
}

// dryRun creates every object but the namespace with dryRun=All.
func dryRun(ctx context.Context, res *resources.Resources, node string) error {
	opt := func(o *metav1.CreateOptions) { o.DryRun = []string{metav1.DryRunAll} }
	var errs []error
	for _, obj := range Objects(node)[1:] { // all but the namespace
		if err := res.Create(ctx, obj, opt); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("%s %s: %w", kindOf(obj), objName(obj), err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("validate CSI hostpath driver: the API server rejects %d of its objects (server-side dry run): %w", len(errs), errors.Join(errs...))
	}
	return nil
}

// progressEvery is how often Deploy logs what it is waiting for.
var progressEvery = 30 * time.Second

// pollInterval is how often Deploy looks at the StatefulSet and the CSINode.
const pollInterval = 250 * time.Millisecond

// Deploy validates (see Validate), then creates every object of
// Objects(node) (one that already exists is left as it is), waits for the plugin's pod to be Ready and for node's
// CSINode to list DriverName, and returns the StorageClass to provision
// from. timeout bounds the waiting, not the creation.
//
// Pulling five images can take minutes: every progressEvery, logger hears
// what the pod is waiting for.
func Deploy(ctx context.Context, cfg *rest.Config, node string, timeout time.Duration, logger *slog.Logger) (string, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	res, err := resources.New(cfg)
	if err != nil {
		return "", fmt.Errorf("deploy CSI hostpath driver: %w", err)
	}
	// The namespace is made for real (the dry run of the objects in it
	// needs it) and kept: deleting it would leave it Terminating, and the
	// creates below would fail.
	if _, err := ensureNamespace(ctx, res); err != nil {
		return "", fmt.Errorf("deploy CSI hostpath driver: %w", err)
	}
	if err := dryRun(ctx, res, node); err != nil {
		return "", err
	}
	for _, obj := range Objects(node)[1:] { // the namespace exists
		if err := res.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("deploy CSI hostpath driver: create %s %s: %w", kindOf(obj), objName(obj), err)
		}
	}

	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The timeout again, for wait.For's own default (five minutes) would
	// cut a longer one short; wctx bounds both waits together.
	waitOpts := []wait.Option{wait.WithContext(wctx), wait.WithTimeout(timeout), wait.WithInterval(pollInterval), wait.WithImmediate()}
	cond := conditions.New(res)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: StatefulSetName, Namespace: Namespace}}
	start, lastLog := time.Now(), time.Now()
	ready := func(obj k8s.Object) bool {
		s := obj.(*appsv1.StatefulSet)
		if s.Status.ReadyReplicas >= 1 {
			return true
		}
		if time.Since(lastLog) >= progressEvery {
			lastLog = time.Now()
			logger.Info("waiting for the CSI hostpath driver's pod", "waited", time.Since(start).Round(time.Second), "timeout", timeout, "containers", podsWaiting(ctx, res))
		}
		return false
	}
	if err := wait.For(cond.ResourceMatch(sts, ready), waitOpts...); err != nil {
		what := fmt.Sprintf("StatefulSet %s/%s has no Ready pod on %s", Namespace, StatefulSetName, node)
		if timedOut(ctx, err) {
			if waiting := podsWaiting(ctx, res); waiting != "" {
				what += " (" + waiting + ")"
			}
			what += fmt.Sprintf(" after %s; its images are pulled from registry.k8s.io, so a host without access to it should use KIND_CSI=skewtest", timeout)
		}
		return "", fmt.Errorf("deploy CSI hostpath driver: %s: %w", what, err)
	}
	// A Ready pod has a running registrar; the kubelet lists the driver in
	// CSINode only once it has taken the registration.
	if err := wait.For(skewconditions.CSIDriverRegistered(res, node, DriverName), waitOpts...); err != nil {
		what := fmt.Sprintf("CSINode %s does not list %s", node, DriverName)
		if timedOut(ctx, err) {
			what += fmt.Sprintf(" after %s although the plugin pod is Ready; the node-driver-registrar's log says why the kubelet did not take the registration", timeout)
		}
		return "", fmt.Errorf("deploy CSI hostpath driver: %s: %w", what, err)
	}
	return StorageClassName, nil
}

// timedOut tells Deploy's own timeout from the caller giving up (or
// another failure), which needs no advice.
func timedOut(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (apiwait.Interrupted(err) || errors.Is(err, context.DeadlineExceeded))
}

// podsWaiting sums up why the plugin pod's containers are not running, e.g.
// "hostpath: ImagePullBackOff"; best effort.
func podsWaiting(ctx context.Context, res *resources.Resources) string {
	var pods corev1.PodList
	sel := labels.SelectorFromSet(labelsFor("csi-hostpathplugin", "plugin")).String()
	if err := res.WithNamespace(Namespace).List(ctx, &pods, resources.WithLabelSelector(sel)); err != nil {
		return ""
	}
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					out = append(out, fmt.Sprintf("pod %s unschedulable: %s", p.Name, c.Message))
				}
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				out = append(out, cs.Name+": "+w.Reason)
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func kindOf(obj k8s.Object) string {
	if gvks, _, err := scheme.Scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
		return gvks[0].Kind
	}
	return fmt.Sprintf("%T", obj)
}

func objName(obj k8s.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
