package local

import (
	"context"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/images"
	"sigs.k8s.io/skewtest/clusters/storage"
)

// startCSIDriver runs skewtest's CSI node plugin inside this process; like
// a DaemonSet pod it keeps running while the kubelet is stopped and swapped.
func (p *Provider) startCSIDriver(ctx context.Context) error {
	d, err := csidriver.New(csidriver.Config{DriverName: CSIDriverName, NodeID: NodeName, KubeletRoot: p.kubeletRoot(), Logger: p.logger})
	if err != nil {
		return err
	}
	if err := d.Start(ctx); err != nil {
		return fmt.Errorf("local provider: start CSI node plugin: %w", err)
	}
	p.mu.Lock()
	p.driver = d
	p.mu.Unlock()
	return nil
}

// CSICalls is the record of every CSI call the driver served.
func (p *Provider) CSICalls() []csidriver.Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.driver == nil {
		return nil
	}
	return p.driver.Calls()
}

func (p *Provider) createCSIDriverObject(ctx context.Context) error {
	cs, err := p.client()
	if err != nil {
		return err
	}
	obj := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: CSIDriverName},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:       ptr.To(false),
			PodInfoOnMount:       ptr.To(false),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		},
	}
	if _, err := cs.StorageV1().CSIDrivers().Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("local provider: create CSIDriver %s: %w", CSIDriverName, err)
	}
	return nil
}

// Workload implements the scenario's workload source: images imported
// into containerd, never pulled.
func (p *Provider) Workload() storage.Workload {
	return storage.Workload{Image: images.Workload, PullPolicy: string(corev1.PullNever)}
}

// ProvisionVolumes makes a StorageClass and one PV per claim, pre-bound to
// it: CSI PVs of skewtest's driver, or local PVs each backed by a tmpfs
// mounted under the run directory.
func (p *Provider) ProvisionVolumes(ctx context.Context, req storage.Request) (storage.Volumes, error) {
	cs, err := p.client()
	if err != nil {
		return storage.Volumes{}, err
	}
	size := req.Size
	if size == "" {
		size = "16Mi"
	}
	qty, err := resource.ParseQuantity(size)
	if err != nil {
		return storage.Volumes{}, fmt.Errorf("volume size %q: %w", size, err)
	}
	scName := "skewtest-" + string(req.Kind)
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: scName},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return storage.Volumes{}, fmt.Errorf("create StorageClass %s: %w", scName, err)
	}
	out := storage.Volumes{StorageClass: scName}
	for i, claim := range req.Claims {
		pvName := fmt.Sprintf("skewtest-%s-%s-%d", req.Kind, shortID(p.cfg.RunID), i)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pvName},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: qty},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              scName,
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: req.Namespace, Name: claim},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{NodeName}}},
				}}}},
			},
		}
		rec := storage.PV{Name: pvName, Claim: claim}
		switch req.Kind {
		case storage.CSI:
			rec.Driver, rec.VolumeHandle = CSIDriverName, "vol-"+pvName
			pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{
				Driver:           CSIDriverName,
				VolumeHandle:     rec.VolumeHandle,
				VolumeAttributes: map[string]string{csidriver.VolumeContextCapacity: size},
			}
		case storage.Local:
			rec.Path = p.path("volumes", pvName)
			if err := mountTmpfs(rec.Path, qty.Value()); err != nil {
				return storage.Volumes{}, err
			}
			pv.Spec.Local = &corev1.LocalVolumeSource{Path: rec.Path}
		default:
			return storage.Volumes{}, fmt.Errorf("local provider: volume kind %q not supported", req.Kind)
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return storage.Volumes{}, fmt.Errorf("create PV %s for claim %s/%s: %w", pvName, req.Namespace, claim, err)
		}
		out.PVs = append(out.PVs, rec)
	}
	return out, nil
}

// mountTmpfs backs a local volume with a real mount, as a local disk
// would be.
func mountTmpfs(path string, bytes int64) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("skewtest-local-volume", path, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0777", bytes)); err != nil {
		return fmt.Errorf("mount tmpfs for local volume at %s: %w", path, err)
	}
	return nil
}
