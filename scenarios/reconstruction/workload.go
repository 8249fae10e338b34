package reconstruction

// This file is the scenario's workload: the StatefulSet it deploys, the
// volumes its claims bind and the markers on them, and its deletion at the
// end.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

var _ = addEntry(catalogue.Entry{
	Name:   "csi-filesystem",
	Plants: "a StatefulSet, one filesystem CSI PVC per pod (tmpfs staged at the global mount, bind-published); pods force-deleted while the kubelet is down",
	Checks: "old UIDs' mounts, pod dirs and plugin entries gone; re-created pods on the same PVs with their data; each global mount mounted exactly once; reconstruction metrics",
	Expect: []catalogue.Expectation{{From: "1.30", Outcome: catalogue.Clean, Says: "reconstructed as uncertain, unpublished and cleaned; the global mount is kept once for the re-created pod",
		Refs: []catalogue.Ref{{ID: "KEP-3756", URL: "https://github.com/kubernetes/enhancements/issues/3756"}}}},
})

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

// labelWorkload puts labels on the StatefulSet, its pods' template and its
// claims' templates (the generic ephemeral volumes' among them), so that
// everything its controller and the ephemeral volume controller make from
// them is marked too.
func labelWorkload(sts *appsv1.StatefulSet, labels map[string]string) {
	for _, meta := range []*metav1.ObjectMeta{&sts.ObjectMeta, &sts.Spec.Template.ObjectMeta} {
		meta.Labels = mergeLabels(meta.Labels, labels)
	}
	for i := range sts.Spec.VolumeClaimTemplates {
		t := &sts.Spec.VolumeClaimTemplates[i].ObjectMeta
		t.Labels = mergeLabels(t.Labels, labels)
	}
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if e := v.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
			e.VolumeClaimTemplate.Labels = mergeLabels(e.VolumeClaimTemplate.Labels, labels)
		}
	}
}

// mergeLabels is a copy of a with b's labels added.
func mergeLabels(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// notOurs marks an AlreadyExists error as workloads.ErrNotOurs: in the
// run's own namespace an object of the scenario's name is someone else's.
func notOurs(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%w (it is not removed): %w", workloads.ErrNotOurs, err)
	}
	return err
}

// withUID makes a delete apply only to the object of uid (none when
// empty): the one the scenario made, not one made since under its name.
func withUID(uid types.UID) resources.DeleteOption {
	return func(o *metav1.DeleteOptions) {
		if uid != "" {
			o.Preconditions = metav1.NewUIDPreconditions(string(uid))
		}
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

// deploy creates the namespace, the volumes and the StatefulSet, and waits
// until every pod runs with its marker written.
func (s *Scenario) deploy(ctx context.Context, sc *scenarios.StepContext) error {
	// The record goes first: a kill after any create below leaves what
	// clean can find, the namespace by its name and the run's label until
	// its UID is recorded.
	if _, err := workloads.MakeNamespace(ctx, s.cs, s.madeWorkload(), s.setMade); err != nil {
		return err
	}
	claims := s.allClaims()
	req := storage.Request{Kind: s.cfg.Kind, Namespace: s.cfg.Namespace, Claims: claims, Size: s.cfg.Size, Node: s.node.String(), Group: s.volumeGroup(""), Labels: s.labels()}
	if s.cfg.Fault != nil {
		req.AccessMode = s.cfg.Fault.AccessMode
	}
	vols, err := s.cluster.ProvisionVolumes(ctx, req)
	if err != nil {
		return fmt.Errorf("provision %s volumes: %w", s.cfg.Kind, err)
	}
	s.volumes.StorageClass, s.volumes.DeleteStorageClass, s.volumes.StorageClassUID, s.volumes.NoStagingMount = vols.StorageClass, vols.DeleteStorageClass, vols.StorageClassUID, vols.NoStagingMount
	s.volumes.UnstageLosesData = vols.UnstageLosesData
	s.provisioned = vols
	if err := s.setMade(s.madeWorkload()); err != nil {
		return err
	}
	sts := statefulSet(s.cfg.Name, s.cfg.Namespace, s.node.String(), s.cfg.Replicas, vols.StorageClass, s.cfg.Size, req.Mode(), s.cluster.Workload())
	addVolumes(sts, s.cfg.VolumesPerPod)
	if s.shapes != nil {
		if len(vols.PVs) == 0 || vols.PVs[0].Driver == "" {
			return fmt.Errorf("catalogue shapes need pre-created CSI PVs from the provider (its CSI driver serves the inline volumes)")
		}
		s.shapes.driver = vols.PVs[0].Driver
		if err := s.provisionShapes(ctx, sc); err != nil {
			return err
		}
		s.addShapes(sts, vols.StorageClass)
	}
	labelWorkload(sts, s.labels())
	if err := s.setMade(s.madeWorkload()); err != nil {
		return err
	}
	if err := s.res.Create(ctx, sts); err != nil {
		return fmt.Errorf("create StatefulSet %s/%s: %w", s.cfg.Namespace, s.cfg.Name, notOurs(err))
	}
	r := s.made
	r.StatefulSetUID = sts.UID
	if err := s.setMade(r); err != nil {
		return err
	}
	start := time.Now()
	pods, err := s.waitPodsRunning(ctx, sc, nil, s.scaled(podsRunningTimeout))
	if err != nil {
		return err
	}
	sc.Note("%d pods Running after %s", len(pods), time.Since(start).Round(10*time.Millisecond))
	s.run.Timings = append(s.run.Timings, reports.Timing{Phase: "workload Running", Duration: time.Since(start)})
	if err := s.boundVolumes(ctx, sc, claims); err != nil {
		return err
	}
	if err := s.setMade(s.madeWorkload()); err != nil {
		return err
	}
	snap, err := s.snapshot(ctx, sc.QuietNode)
	if err != nil {
		return err
	}
	for _, p := range pods {
		pv := s.pvOf[claimOf(p)]
		marker, err := s.readMarker(ctx, sc.Node, snap, p, pv)
		if err != nil {
			return err
		}
		s.markers[pv] = marker
		sc.Note("pod %s uid %s on PV %s wrote marker %q", p.Name, p.UID, pv, marker)
	}
	if s.shapes != nil {
		return s.recordShapes(ctx, sc)
	}
	return nil
}

// boundVolumes reads the PV bound to each claim: its name, and for CSI the
// driver and volume handle the global mount is named after.
func (s *Scenario) boundVolumes(ctx context.Context, sc *scenarios.StepContext, claims []string) error {
	s.volumes.PVs = nil
	for _, claim := range claims {
		var pvc corev1.PersistentVolumeClaim
		if err := s.res.Get(ctx, claim, s.cfg.Namespace, &pvc); err != nil {
			return fmt.Errorf("get PVC %s/%s: %w", s.cfg.Namespace, claim, err)
		}
		var pv corev1.PersistentVolume
		if err := s.res.Get(ctx, pvc.Spec.VolumeName, "", &pv); err != nil {
			return fmt.Errorf("get PV %q bound to claim %s: %w", pvc.Spec.VolumeName, claim, err)
		}
		rec := storage.PV{Name: pv.Name, Claim: claim, UID: pv.UID, ClaimUID: pvc.UID}
		switch {
		case pv.Spec.CSI != nil && s.cfg.Kind == storage.CSI:
			rec.Driver, rec.VolumeHandle = pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle
			s.volumes.UnstageLosesData = s.volumes.UnstageLosesData || storage.PVUnstageLosesData(&pv)
		case pv.Spec.Local != nil && s.cfg.Kind == storage.Local:
			rec.Path = pv.Spec.Local.Path
		default:
			return fmt.Errorf("PV %s bound to claim %s is not a %s volume; check the storage class %s", pv.Name, claim, s.cfg.Kind, s.volumes.StorageClass)
		}
		s.volumes.PVs = append(s.volumes.PVs, rec)
		s.pvOf[claim] = pv.Name
		sc.Note("claim %s bound to PV %s (%s)", claim, pv.Name, describePV(rec))
	}
	return nil
}

func describePV(pv storage.PV) string {
	if pv.Driver != "" {
		return fmt.Sprintf("CSI driver %s, volume handle %s, global mount %s", pv.Driver, pv.VolumeHandle, nodestate.CSIGlobalMountPath(pv.Driver, pv.VolumeHandle))
	}
	return "local path " + pv.Path
}

func claimOf(p corev1.Pod) string {
	for _, v := range p.Spec.Volumes {
		if v.Name == volumeName && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// readMarker reads the marker through the pod's volume mount on the node,
// which is what the container sees at /data.
func (s *Scenario) readMarker(ctx context.Context, node exec.Cmder, snap *nodestate.Snapshot, p corev1.Pod, pv string) (string, error) {
	dir := snap.Abs(podVolumeDir(s.cfg.Kind, string(p.UID), pv))
	res, err := exec.Output(ctx, node, "cat", dir+"/marker")
	if err != nil {
		return "", fmt.Errorf("read the marker of pod %s (uid %s) on PV %s at %s/marker: %w", p.Name, p.UID, pv, dir, err)
	}
	return strings.TrimSpace(res.Stdout), nil
}

// deleteWorkload deletes the StatefulSet normally and checks that the
// kubelet unmounts its volumes, including the CSI global mounts no pod
// uses any more, then deletes the claims and volumes.
func (s *Scenario) deleteWorkload(ctx context.Context, sc *scenarios.StepContext) error {
	pods, err := s.listPods(ctx)
	if err != nil {
		return err
	}
	var uids []string
	for _, p := range pods {
		uids = append(uids, string(p.UID))
	}
	start := time.Now()
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: s.cfg.Name, Namespace: s.cfg.Namespace}}
	if err := s.res.Delete(ctx, sts, resources.WithDeletePropagation(string(metav1.DeletePropagationForeground)), withUID(s.made.StatefulSetUID)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete StatefulSet %s/%s: %w", s.cfg.Namespace, s.cfg.Name, err)
	}
	var last *nodestate.Snapshot
	cond := func(ctx context.Context) (bool, error) {
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil {
			return false, nil
		}
		last = snap
		if len(snap.Leftovers(uids)) > 0 {
			return false, nil
		}
		if s.cfg.Kind == storage.CSI {
			for _, pv := range s.volumes.PVs {
				if _, n := snap.CSIGlobalMount(pv.Driver, pv.VolumeHandle); n > 0 {
					return false, nil
				}
			}
		}
		return true, nil
	}
	// A fault that left old pods' mounts behind keeps their CSI global
	// mounts in use, so the kubelet never unstages them: a bounded wait,
	// and the leak is judged with the fault's bug.
	timeout := s.cfg.CleanupTimeout
	if len(s.leftEver) > 0 && timeout > mayLeaveBound {
		timeout = mayLeaveBound
	}
	if err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		if len(s.leftEver) > 0 && last != nil && ctx.Err() == nil && len(last.Leftovers(uids)) == 0 {
			if err := s.judgeLeakedGlobalMounts(ctx, sc, last); err != nil {
				return err
			}
			return s.deleteVolumes(ctx)
		}
		msg := fmt.Sprintf("volumes of the deleted StatefulSet still on the node after %s", timeout)
		if last != nil {
			s.snapshotEvidence(sc, "node state after deleting the StatefulSet", last)
			var detail []string
			for _, l := range last.Leftovers(uids) {
				detail = append(detail, l.String())
			}
			for _, pv := range s.volumes.PVs {
				if path, n := last.CSIGlobalMount(pv.Driver, pv.VolumeHandle); n > 0 {
					detail = append(detail, fmt.Sprintf("CSI global mount %s still mounted %d times", path, n))
				}
			}
			msg += ": " + strings.Join(detail, "; ")
		}
		return fmt.Errorf("%s: %w", msg, err)
	}
	sc.Note("StatefulSet deleted; its pods' mounts, directories and global mounts gone after %s", time.Since(start).Round(10*time.Millisecond))
	if len(s.leftEver) > 0 && last != nil {
		// A known bug left old pods' state: what its symptom says of the
		// global mounts then must show.
		if err := s.judgeLeakedGlobalMounts(ctx, sc, last); err != nil {
			return err
		}
	}
	return s.deleteVolumes(ctx)
}

// deleteVolumes releases the claims, PVs and StorageClass of the run (see
// storage.Release for why dynamically provisioned PVs are waited for, not
// deleted).
func (s *Scenario) deleteVolumes(ctx context.Context) error {
	if err := storage.Release(ctx, s.cs, s.cfg.Namespace, s.volumes, s.cfg.CleanupTimeout, s.cfg.PollInterval); err != nil {
		return err
	}
	// The namespace stays for the next scenario on the cluster (a
	// matrix's trails share it); what the run made in it is gone, but
	// for the shapes' volumes, which their own step releases.
	r := s.namespaceOnly()
	if s.shapes != nil {
		r.Volumes = storage.Volumes{PVs: append(slices.Clone(s.shapes.block.PVs), s.shapes.gen.PVs...)}
	}
	return s.setMade(r)
}

// volumeGroup is the storage.Request group of the scenario's volumes of
// group g ("" for the StatefulSet's): g within Config.VolumeGroup.
func (s *Scenario) volumeGroup(g string) string {
	if s.cfg.VolumeGroup == "" {
		return g
	}
	if g == "" {
		return s.cfg.VolumeGroup
	}
	return s.cfg.VolumeGroup + "-" + g
}
