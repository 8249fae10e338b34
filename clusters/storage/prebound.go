package storage

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Prebound says how a provider backs pre-created PVs.
type Prebound struct {
	// NamePrefix makes PV names unique per run, e.g. skewtest-csi-ab12.
	NamePrefix string
	// CSIDriver is the driver of CSI PVs; CapacityKey is the volume
	// attribute carrying the size (csidriver.VolumeContextCapacity).
	CSIDriver, CapacityKey string
	// CSIVolume, if set, makes the CSI volume with the given handle and
	// size before its PV is created: the driver's CreateVolume, for drivers
	// whose volumes must exist before they are attached (as an admin
	// makes an EBS volume before writing its PV).
	CSIVolume func(ctx context.Context, handle string, bytes int64) error
	// LocalPath returns where a local PV lives on the node and makes a real
	// filesystem there (a tmpfs of the given size).
	LocalPath func(ctx context.Context, pv string, bytes int64) (string, error)
}

// ProvisionPrebound makes a StorageClass and one PV per claim, each bound
// to its claim in advance and pinned to req.Node: CSI PVs of b.CSIDriver or
// local PVs at b.LocalPath, all with req.Labels. A StorageClass that
// exists already is not this request's (another run's, or this run's
// earlier request's): it is used, never deleted by this one.
func ProvisionPrebound(ctx context.Context, cs Client, req Request, b Prebound) (Volumes, error) {
	size := req.Size
	if size == "" {
		size = "16Mi"
	}
	qty, err := resource.ParseQuantity(size)
	if err != nil {
		return Volumes{}, fmt.Errorf("volume size %q: %w", size, err)
	}
	scName := "skewtest-" + string(req.Kind)
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: scName, Labels: req.Labels},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
	}
	out := Volumes{StorageClass: scName}
	switch made, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); {
	case err == nil:
		out.DeleteStorageClass, out.StorageClassUID = true, made.UID
	case !apierrors.IsAlreadyExists(err):
		return Volumes{}, fmt.Errorf("create StorageClass %s: %w", scName, err)
	}
	for i, claim := range req.Claims {
		pvName := fmt.Sprintf("%s-%d", b.NamePrefix, i)
		if req.Group != "" {
			pvName = fmt.Sprintf("%s-%s-%d", b.NamePrefix, req.Group, i)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pvName, Labels: req.Labels},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: qty},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{req.Mode()},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              scName,
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: req.Namespace, Name: claim},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{req.Node}}},
				}}}},
			},
		}
		if req.Block {
			pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
		}
		rec := PV{Name: pvName, Claim: claim}
		switch req.Kind {
		case CSI:
			if b.CSIDriver == "" {
				return Volumes{}, fmt.Errorf("this provider has no CSI driver for %s volumes", req.Kind)
			}
			rec.Driver, rec.VolumeHandle = b.CSIDriver, "vol-"+pvName
			if b.CSIVolume != nil {
				if err := b.CSIVolume(ctx, rec.VolumeHandle, qty.Value()); err != nil {
					return Volumes{}, fmt.Errorf("create CSI volume %s for PV %s: %w", rec.VolumeHandle, pvName, err)
				}
			}
			pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: b.CSIDriver, VolumeHandle: rec.VolumeHandle}
			if b.CapacityKey != "" {
				pv.Spec.CSI.VolumeAttributes = map[string]string{b.CapacityKey: size}
			}
		case Local:
			if b.LocalPath == nil {
				return Volumes{}, fmt.Errorf("this provider cannot make %s volumes", req.Kind)
			}
			if rec.Path, err = b.LocalPath(ctx, pvName, qty.Value()); err != nil {
				return Volumes{}, fmt.Errorf("back local PV %s: %w", pvName, err)
			}
			pv.Spec.Local = &corev1.LocalVolumeSource{Path: rec.Path}
		default:
			return Volumes{}, fmt.Errorf("volume kind %q not supported", req.Kind)
		}
		made, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		if err != nil {
			return Volumes{}, fmt.Errorf("create PV %s for claim %s/%s: %w", pvName, req.Namespace, claim, err)
		}
		rec.UID = made.UID
		out.PVs = append(out.PVs, rec)
	}
	return out, nil
}
