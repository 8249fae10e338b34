package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/klient/wait"
)

// Release removes what a scenario's volumes left in the API once their
// pods are gone: the claims; the PVs, each in the way its reclaim policy
// asks; and the StorageClass if the provider made it for this run. Each
// goes only if it is the one the scenario made or bound: a claim (in
// namespace, the scenario's own) by its recorded UID when known; a PV by
// its recorded UID, or, before that was recorded, when it is bound to the
// scenario's claim in namespace; the StorageClass by its recorded UID.
// Every delete has that UID as its precondition, so an object of the same
// name made since by someone else is left alone. A PV without a claim
// name and UID is judged by its recorded UID alone.
//
// A PV with reclaim policy Delete was provisioned dynamically: its
// provisioner deletes the backing volume (an EBS volume, a hostpath
// directory) and then the PV. Deleting such a PV ourselves could race the
// provisioner and leak the volume, so Release only waits for it to go. A
// Retain PV (skewtest's pre-created ones) is deleted here.
func Release(ctx context.Context, cs Client, namespace string, vols Volumes, timeout, interval time.Duration) error {
	var errs []error
	for _, pv := range vols.PVs {
		if pv.Claim == "" {
			continue
		}
		err := cs.CoreV1().PersistentVolumeClaims(namespace).Delete(ctx, pv.Claim, metav1.DeleteOptions{Preconditions: uidPrecondition(pv.ClaimUID)})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete PVC %s/%s: %w", namespace, pv.Claim, err))
		}
	}
	var waitFor []string
	for _, rec := range vols.PVs {
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, rec.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("get PV %s: %w", rec.Name, err))
			continue
		}
		if !rec.madeFor(pv, namespace) {
			continue
		}
		if pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete {
			waitFor = append(waitFor, rec.Name)
			continue
		}
		if err := cs.CoreV1().PersistentVolumes().Delete(ctx, rec.Name, metav1.DeleteOptions{Preconditions: uidPrecondition(pv.UID)}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete PV %s (uid %s): %w", rec.Name, pv.UID, err))
		}
	}
	if len(waitFor) > 0 {
		left := waitFor
		gone := func(ctx context.Context) (bool, error) {
			var still []string
			for _, name := range left {
				_, err := cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
				if err == nil || !apierrors.IsNotFound(err) {
					still = append(still, name)
				}
			}
			left = still
			return len(left) == 0, nil
		}
		if err := wait.For(gone, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(interval), wait.WithImmediate()); err != nil {
			errs = append(errs, fmt.Errorf("dynamically provisioned PVs %v still exist %s after their claims were deleted: their provisioner did not delete them (check its logs and the backing volumes, which may have leaked): %w", left, timeout, err))
		}
	}
	if vols.DeleteStorageClass && vols.StorageClass != "" && vols.StorageClassUID != "" {
		err := cs.StorageV1().StorageClasses().Delete(ctx, vols.StorageClass, metav1.DeleteOptions{Preconditions: uidPrecondition(vols.StorageClassUID)})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete StorageClass %s (uid %s): %w", vols.StorageClass, vols.StorageClassUID, err))
		}
	}
	return errors.Join(errs...)
}

// madeFor tells whether pv is the PV rec records: the same UID, or, with
// none recorded, one bound (or pre-bound) to rec's claim in namespace.
func (rec PV) madeFor(pv *corev1.PersistentVolume, namespace string) bool {
	if rec.UID != "" {
		return pv.UID == rec.UID
	}
	ref := pv.Spec.ClaimRef
	return rec.Claim != "" && ref != nil && ref.Namespace == namespace && ref.Name == rec.Claim &&
		(rec.ClaimUID == "" || ref.UID == "" || ref.UID == rec.ClaimUID)
}

// uidPrecondition makes a delete apply to the object of that UID only;
// nil (no precondition) for an empty one.
func uidPrecondition(uid types.UID) *metav1.Preconditions {
	if uid == "" {
		return nil
	}
	return metav1.NewUIDPreconditions(string(uid))
}
