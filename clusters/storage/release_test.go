package storage

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"sigs.k8s.io/skewtest/clusters/internal/kubefake"
)

// pvWith is a PV bound to claim in namespace ns (the scenario's).
func pvWith(name string, policy corev1.PersistentVolumeReclaimPolicy, claim string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy,
		ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: claim}}}
}

func claim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
}

func TestRelease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		vols    Volumes
		// provisioner deletes the Delete-policy PVs once their claims are
		// gone, as external-provisioner does.
		provisioner bool
		wantErr     string
		// wantLeft are the objects that must still exist afterwards.
		wantLeft      []string
		wantDeletedPV []string // PVs Release itself must delete
	}{
		{
			name:          "pre-created volumes and their class are removed",
			objects:       []runtime.Object{claim("c0"), claim("c1"), pvWith("pv0", corev1.PersistentVolumeReclaimRetain, "c0"), pvWith("pv1", corev1.PersistentVolumeReclaimRetain, "c1"), &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "skewtest-csi", UID: "sc-uid"}}},
			vols:          Volumes{StorageClass: "skewtest-csi", DeleteStorageClass: true, StorageClassUID: "sc-uid", PVs: []PV{{Name: "pv0", Claim: "c0"}, {Name: "pv1", Claim: "c1"}}},
			wantDeletedPV: []string{"pv0", "pv1"},
		},
		{
			name: "a PV of the name bound to another namespace's claim stays",
			objects: []runtime.Object{claim("c0"), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv0"}, Spec: corev1.PersistentVolumeSpec{
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain, ClaimRef: &corev1.ObjectReference{Namespace: "owners", Name: "c0"}}}},
			vols:     Volumes{PVs: []PV{{Name: "pv0", Claim: "c0"}}},
			wantLeft: []string{"pv/pv0"},
		},
		{
			name:        "a cluster's own class stays; dynamic PVs are left to their provisioner",
			objects:     []runtime.Object{claim("c0"), pvWith("pvc-0", corev1.PersistentVolumeReclaimDelete, "c0"), &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "ebs-sc"}}},
			vols:        Volumes{StorageClass: "ebs-sc", PVs: []PV{{Name: "pvc-0", Claim: "c0"}}},
			provisioner: true,
			wantLeft:    []string{"storageclass/ebs-sc"},
		},
		{
			name:     "a provisioner that does not delete its PV is reported",
			objects:  []runtime.Object{claim("c0"), pvWith("pvc-0", corev1.PersistentVolumeReclaimDelete, "c0")},
			vols:     Volumes{StorageClass: "ebs-sc", PVs: []PV{{Name: "pvc-0", Claim: "c0"}}},
			wantErr:  "dynamically provisioned PVs [pvc-0] still exist",
			wantLeft: []string{"pv/pvc-0"},
		},
		{
			name:    "already gone is fine",
			objects: nil,
			vols:    Volumes{StorageClass: "skewtest-local", DeleteStorageClass: true, PVs: []PV{{Name: "pv0", Claim: "c0"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := kubefake.New(tc.objects...)
			var deletedPVs []string
			cs.PrependReactor("delete", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
				deletedPVs = append(deletedPVs, a.(k8stesting.DeleteAction).GetName())
				return false, nil, nil
			})
			if tc.provisioner {
				cs.PrependReactor("delete", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
					// The provisioner removes the PV a little later, from its own client.
					go func() {
						time.Sleep(50 * time.Millisecond)
						for _, pv := range tc.vols.PVs {
							if pv.Claim == a.(k8stesting.DeleteAction).GetName() {
								_ = cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("persistentvolumes"), "", pv.Name)
							}
						}
					}()
					return false, nil, nil
				})
			}
			err := Release(context.Background(), cs, "ns", tc.vols, 2*time.Second, 10*time.Millisecond)
			if tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("got %v; want an error containing %q", err, tc.wantErr)
			}
			slices.Sort(deletedPVs)
			if !slices.Equal(deletedPVs, tc.wantDeletedPV) {
				t.Errorf("Release deleted PVs %v; want %v", deletedPVs, tc.wantDeletedPV)
			}
			ctx := context.Background()
			for _, pv := range tc.vols.PVs {
				if _, err := cs.CoreV1().PersistentVolumeClaims("ns").Get(ctx, pv.Claim, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("claim %s still there (%v)", pv.Claim, err)
				}
				_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
				if left := slices.Contains(tc.wantLeft, "pv/"+pv.Name); left != (err == nil) {
					t.Errorf("PV %s: get err %v; want left=%v", pv.Name, err, left)
				}
			}
			_, err = cs.StorageV1().StorageClasses().Get(ctx, tc.vols.StorageClass, metav1.GetOptions{})
			if left := slices.Contains(tc.wantLeft, "storageclass/"+tc.vols.StorageClass); left != (err == nil) {
				t.Errorf("StorageClass %s: get err %v; want left=%v", tc.vols.StorageClass, err, left)
			}
		})
	}
}
