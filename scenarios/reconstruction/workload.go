package reconstruction

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/skewtest/clusters/storage"
)

const (
	volumeName = "data"
	appLabel   = "skewtest.k8s.io/app"
)

// claimName is the PVC the StatefulSet controller creates for ordinal i.
func claimName(sts string, i int) string { return fmt.Sprintf("%s-%s-%d", volumeName, sts, i) }

// statefulSet is the manual sign-off's workload: replicas pods pinned to
// one node, one PVC each, each pod writing a marker into its volume.
// Its claims have the one access mode mode (ReadWriteOnce but for faults
// that need another).
func statefulSet(name, namespace, node string, replicas int, sc, size string, mode corev1.PersistentVolumeAccessMode, w storage.Workload) *appsv1.StatefulSet {
	labels := map[string]string{appLabel: name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(replicas)),
			ServiceName:         name,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{corev1.LabelHostname: node},
					TerminationGracePeriodSeconds: ptr.To(int64(5)),
					Containers: []corev1.Container{{
						Name:            "workload",
						Image:           w.Image,
						ImagePullPolicy: corev1.PullPolicy(w.PullPolicy),
						Env: []corev1.EnvVar{
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
						},
						Command:      w.Command,
						VolumeMounts: []corev1.VolumeMount{{Name: volumeName, MountPath: "/data"}},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: volumeName},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
					StorageClassName: ptr.To(sc),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
				},
			}},
		},
	}
}

// podVolumeDir is where the kubelet mounts a pod's PV, relative to its root.
func podVolumeDir(kind storage.Kind, uid, pv string) string {
	switch kind {
	case storage.Local:
		return fmt.Sprintf("pods/%s/volumes/kubernetes.io~local-volume/%s", uid, pv)
	default:
		return fmt.Sprintf("pods/%s/volumes/kubernetes.io~csi/%s/mount", uid, pv)
	}
}
