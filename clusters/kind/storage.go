package kind

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/klient/wait/conditions"

	skewconditions "sigs.k8s.io/skewtest/clusters/conditions"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/hostpath"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/images"
	"sigs.k8s.io/skewtest/clusters/storage"
)

const csiNamespace = "skewtest-csi"

// The CSI drivers the kind provider can run (KIND_CSI).
const (
	// CSISkewtest is skewtest's own CSI node plugin as a DaemonSet, from an
	// image built here and loaded into the worker: works offline.
	CSISkewtest = "skewtest"
	// CSIHostpath is the upstream CSI hostpath driver with its sidecars,
	// pulled from registry.k8s.io, provisioning through a StorageClass.
	CSIHostpath = "hostpath"
)

// CheckCSI checks a KIND_CSI setting.
func CheckCSI(setting string) error {
	switch setting {
	case "", CSISkewtest, CSIHostpath:
		return nil
	}
	return fmt.Errorf("kind provider: unknown CSI driver KIND_CSI=%q: want %s (skewtest's own node plugin, works offline) or %s (the upstream CSI hostpath driver from registry.k8s.io)", setting, CSISkewtest, CSIHostpath)
}

// checkCSIWorkers refuses a CSI driver that cannot serve workers
// workers: the upstream hostpath driver runs as one StatefulSet pinned to
// one node, and provisions there only.
func checkCSIWorkers(setting string, workers int) error {
	if setting == CSIHostpath && workers > 1 {
		return fmt.Errorf("kind provider: KIND_CSI=%s serves one worker (its driver is a StatefulSet pinned to one node), and %d were asked for: use KIND_CSI=%s, or one node (BATCH_NODES=1, MATRIX_NODES=1)", CSIHostpath, workers, CSISkewtest)
	}
	return nil
}

// chooseCSI picks the CSI driver: by default the upstream hostpath driver
// where the node image is pulled (the host is online, so its images can be
// too) and the cluster has one worker, and skewtest's own where the node
// image is built offline or there are several workers (the hostpath driver
// serves one: checkCSIWorkers).
func chooseCSI(setting string, offlineImage bool, workers int) string {
	if setting != "" {
		return setting
	}
	if offlineImage || workers > 1 {
		return CSISkewtest
	}
	return CSIHostpath
}

func (p *Provider) csiDriver() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.csi
}

// CSIDriver describes the CSI driver the cluster runs, for the report.
func (p *Provider) CSIDriver() string {
	switch p.csiDriver() {
	case CSIHostpath:
		return fmt.Sprintf("%s (csi-driver-host-path %s, dynamic provisioning)", hostpath.DriverName, hostpath.HostPathPluginImage)
	case CSISkewtest:
		return fmt.Sprintf("%s (skewtest's CSI node plugin, DaemonSet, pre-bound PVs)", csidriver.Name)
	}
	return ""
}

// deployCSI deploys the chosen CSI driver on the workers.
func (p *Provider) deployCSI(ctx context.Context) error {
	workers := p.workerNames()
	if p.csiDriver() != CSIHostpath {
		return p.deployCSIDriver(ctx, workers)
	}
	if err := checkCSIWorkers(CSIHostpath, len(workers)); err != nil {
		return err
	}
	cfg, err := p.RESTConfig()
	if err != nil {
		return err
	}
	p.logger.Info("deploying the CSI hostpath driver (images from registry.k8s.io)", "images", hostpath.Images())
	if _, err := hostpath.Deploy(ctx, cfg, workers[0], 5*time.Minute, p.logger); err != nil {
		return fmt.Errorf("kind provider: %w", err)
	}
	return nil
}

// deployCSIDriver runs skewtest's CSI node plugin on the workers as a
// DaemonSet: privileged, with the kubelet root mounted Bidirectional so its
// mounts reach the node, registering itself through plugins_registry. It
// returns once the driver is registered with every worker's kubelet.
func (p *Provider) deployCSIDriver(ctx context.Context, workers []string) error {
	cfg, err := p.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := cs.StorageV1().CSIDrivers().Create(ctx, csidriver.Object(csidriver.ModeTmpfs), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kind provider: create CSIDriver: %w", err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: csiNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ds := csiDaemonSet(workers)
	if _, err := cs.AppsV1().DaemonSets(csiNamespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kind provider: create the CSI driver DaemonSet: %w", err)
	}
	res, err := resources.New(cfg)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := wait.For(conditions.New(res).DaemonSetReady(ds), wait.WithContext(ctx), wait.WithTimeout(2*time.Minute), wait.WithInterval(250*time.Millisecond)); err != nil {
		return fmt.Errorf("kind provider: the CSI driver DaemonSet is not ready on %s: %w", strings.Join(workers, ", "), err)
	}
	readyAfter := time.Since(start)
	// Ready means running; the kubelet lists the driver in CSINode once it
	// has registered.
	for _, w := range workers {
		if err := wait.For(skewconditions.CSIDriverRegistered(res, w, csidriver.Name), wait.WithContext(ctx), wait.WithTimeout(time.Minute), wait.WithInterval(250*time.Millisecond), wait.WithImmediate()); err != nil {
			return fmt.Errorf("kind provider: CSI driver %s did not register with the kubelet on %s: %w", csidriver.Name, w, err)
		}
	}
	// Its pods wait for the workers Ready (their network), which is most
	// of this step's time after a quick join.
	p.logger.Info("CSI driver running and registered", "workers", len(workers),
		"daemonSetReady", readyAfter.Round(10*time.Millisecond), "registered", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// csiDaemonSet runs the driver on workers, and nowhere else (the control
// plane runs no test pod).
func csiDaemonSet(workers []string) *appsv1.DaemonSet {
	labels := map[string]string{"app": "skewtest-csi-driver"}
	bidi := corev1.MountPropagationBidirectional
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "skewtest-csi-driver", Namespace: csiNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
							{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: workers},
						}}},
					}}},
					Containers: []corev1.Container{{
						Name:            "driver",
						Image:           images.CSIDriver,
						ImagePullPolicy: corev1.PullNever,
						Args:            []string{"--driver=" + csidriver.Name, "--kubelet-root=/var/lib/kubelet"},
						Env:             []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						VolumeMounts:    []corev1.VolumeMount{{Name: "kubelet", MountPath: "/var/lib/kubelet", MountPropagation: &bidi}},
					}},
					Volumes: []corev1.Volume{{Name: "kubelet", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet", Type: ptr.To(corev1.HostPathDirectory)}}}},
				},
			},
		},
	}
}

// ProvisionVolumes makes pre-bound CSI PVs of skewtest's driver, or local
// PVs backed by tmpfs mounts inside the worker req.Node; with the hostpath
// driver, CSI volumes are provisioned dynamically through its
// StorageClass. PV names carry the worker's number (pvPrefix), so that
// every worker has its own.
func (p *Provider) ProvisionVolumes(ctx context.Context, req storage.Request) (storage.Volumes, error) {
	if req.Kind == storage.CSI && p.csiDriver() == CSIHostpath {
		// The StorageClass belongs to the driver's deployment, not to the
		// run; its NodeStageVolume mounts nothing at the global path.
		return storage.Volumes{StorageClass: hostpath.StorageClassName, NoStagingMount: true}, nil
	}
	w, err := p.workerNamed(req.Node)
	if err != nil {
		return storage.Volumes{}, err
	}
	prefix, err := pvPrefix(p.name, string(req.Kind), req.Node)
	if err != nil {
		return storage.Volumes{}, err
	}
	cfg, err := p.RESTConfig()
	if err != nil {
		return storage.Volumes{}, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return storage.Volumes{}, err
	}
	vols, err := storage.ProvisionPrebound(ctx, cs, req, storage.Prebound{
		NamePrefix:  prefix,
		CSIDriver:   csidriver.Name,
		CapacityKey: csidriver.VolumeContextCapacity,
		LocalPath: func(ctx context.Context, pv string, bytes int64) (string, error) {
			path := "/mnt/skewtest/" + pv
			_, err := exec.Output(ctx, w, "sh", "-c", fmt.Sprintf(`mkdir -p "$1" && mount -t tmpfs -o size=%d,mode=0777 skewtest-local-volume "$1"`, bytes), "sh", path)
			return path, err
		},
	})
	// The StorageClass is shared by every worker's volumes: with several
	// workers one worker's scenario must not delete it under another's; it
	// goes with the cluster.
	vols.DeleteStorageClass = vols.DeleteStorageClass && len(p.workerNames()) == 1
	// kind runs skewtest's driver in its tmpfs mode only (clusters.New).
	vols.UnstageLosesData = req.Kind == storage.CSI && csidriver.ModeTmpfs.UnstageLosesData()
	return vols, err
}

// workerNames are the workers' names, in the order of cfg.Kubelets.
func (p *Provider) workerNames() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, len(p.workers))
	for i, w := range p.workers {
		names[i] = w.String()
	}
	return names
}

// workerNamed is the worker called name, or an error listing the workers.
func (p *Provider) workerNamed(name string) (*Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	for _, w := range p.workers {
		if w.String() == name {
			return w, nil
		}
		names = append(names, w.String())
	}
	return nil, fmt.Errorf("kind provider: no worker %q in cluster %s (workers: %s)", name, p.name, strings.Join(names, ", "))
}

// Workload implements the scenario's workload source: images loaded into
// the workers, never pulled.
func (p *Provider) Workload() storage.Workload {
	return storage.Workload{Image: images.Workload, PullPolicy: string(corev1.PullNever)}
}
