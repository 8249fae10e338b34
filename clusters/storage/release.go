package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/klient/wait"
)

// Release removes what a scenario's volumes left in the API once their
// pods are gone: the claims; the PVs, each in the way its reclaim policy
// asks; and the StorageClass if the provider made it for this run.
//
// A PV with reclaim policy Delete was provisioned dynamically: its
// provisioner deletes the backing volume (an EBS volume, a hostpath
// directory) and then the PV. Deleting such a PV ourselves could race the
// provisioner and leak the volume, so Release only waits for it to go. A
// Retain PV (skewtest's pre-created ones) is deleted here.
func Release(ctx context.Context, cs Client, namespace string, vols Volumes, timeout, interval time.Duration) error {
	var errs []error
	for _, pv := range vols.PVs {
		if err := cs.CoreV1().PersistentVolumeClaims(namespace).Delete(ctx, pv.Claim, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
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
		if pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete {
			waitFor = append(waitFor, rec.Name)
			continue
		}
		if err := cs.CoreV1().PersistentVolumes().Delete(ctx, rec.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete PV %s: %w", rec.Name, err))
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
	if vols.DeleteStorageClass && vols.StorageClass != "" {
		if err := cs.StorageV1().StorageClasses().Delete(ctx, vols.StorageClass, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete StorageClass %s: %w", vols.StorageClass, err))
		}
	}
	return errors.Join(errs...)
}
