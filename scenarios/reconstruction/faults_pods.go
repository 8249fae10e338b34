package reconstruction

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

// DataLost: once the replacement is removed no pod uses the volume, so
// the kubelet unstages it and the test driver's tmpfs goes with it;
// the replacement itself is checked against the old pod's marker.
// ReadWriteOncePod as upstream's multi-pod test has it: the scheduler
// would refuse a second pod on the claim, so only a replacement with
// nodeName set while the kubelet is down reaches the node.
var _ = addFault(catalogue.Entry{
	Name: "replacement-pod", Item: 9,
	Plants: "while the kubelet is down: the StatefulSet scaled to 0, a replacement pod on the same claim with nodeName set (no scheduler) created, then the old pod force-deleted; the claims are ReadWriteOncePod, as in upstream's multi-pod test",
	Checks: "the old pod cleaned; the replacement Running with the old pod's data; then it is removed and the StatefulSet scaled back",
	Expect: []catalogue.Expectation{{From: "1.26", Outcome: catalogue.Clean, Says: "the replacement starts once the old pod is cleaned",
		Refs: []catalogue.Ref{catalogue.Issue(113596)}, FixedIn: "1.26 (SELinux label reconstruction)"}},
	Needs: faultNeeds,
}, Fault{AccessMode: corev1.ReadWriteOncePod, NoDelete: true, Plant: plantReplacement, AfterCleanup: checkReplacement, DataLost: true, Observe: observeFault})

var _ = addFault(catalogue.Entry{
	Name: "prestop-emptydir", Item: 11,
	Plants: "a pod of its own with an emptyDir (a marker written there) and a preStop hook that outlasts the hop (grace 40 s) deleted gracefully; the kubelet stopped, swapped and started while it is Terminating; the StatefulSet's pods kept",
	Checks: "for 20 s from the kubelet's start the pod stays and its emptyDir keeps the marker; the StatefulSet's pods keep their containers and mount IDs; then the pod is force-deleted and cleaned",
	Expect: []catalogue.Expectation{{Outcome: catalogue.Clean, Says: "the volume is not unmounted or emptied under the running container", Refs: []catalogue.Ref{catalogue.Issue(113979)}}},
	Needs:  faultNeeds,
}, Fault{KeepPods: true, Stop: deleteInPreStop, AfterStart: watchPreStop, Observe: observeFaultAndUntouched, Holds: preStopGrace})

// The catalogue faults that bring pods of their own beside the
// StatefulSet: a replacement pod on the same claim (fault 9) and a pod in
// a long preStop with an emptyDir (fault 11).

const (
	// preStopGrace is the preStop pod's grace period: its preStop hook
	// outlasts the kubelet's restart and preStopWatch; a force-delete still
	// waits for it, so it is kept short (#113979 used 120 s).
	// It is the fault, not a timeout: it is not scaled.
	preStopGrace = 40 * time.Second
	// preStopWatch is how long, from the kubelet's start, the preStop
	// pod's container and emptyDir are watched for the bug.
	preStopWatch = 20 * time.Second
	// scratchVolume is the preStop pod's emptyDir.
	scratchVolume = "scratch"
	// faultPodLabel marks pods a fault made (not the StatefulSet's).
	faultPodLabel = "skewtest.k8s.io/fault-pod"
)

// observeFaultAndUntouched: what the fault's steps saw, and each change
// to the pods it keeps running.
func observeFaultAndUntouched(ctx context.Context, s *Scenario, sc *scenarios.StepContext) (catalogue.Observation, error) {
	o, err := observeFault(ctx, s, sc)
	if u, _ := observeUntouched(ctx, s, sc); len(u.Traces) > 0 {
		o.Traces = append(o.Traces, u.Traces...)
		o.Detail = strings.TrimPrefix(o.Detail+"; "+u.Detail, "; ")
	}
	return o, err
}

// faultPod is a pod of the workload's image pinned to the node, outside
// the StatefulSet.
func (s *Scenario) faultPod(name string, volumes []corev1.Volume, grace int64) *corev1.Pod {
	w := s.cluster.Workload()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.cfg.Namespace, Labels: mergeLabels(map[string]string{faultPodLabel: s.cfg.Fault.Entry.Name}, s.labels())},
		Spec: corev1.PodSpec{
			NodeName:                      s.node.String(),
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(grace),
			Volumes:                       volumes,
			Containers: []corev1.Container{{
				Name: "workload", Image: w.Image, ImagePullPolicy: corev1.PullPolicy(w.PullPolicy), Command: w.Command,
				Env: []corev1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: volumes[0].Name, MountPath: "/data"}},
			}},
		},
	}
}

// waitPod waits until the pod runs and is ready on the node.
func (s *Scenario) waitPod(ctx context.Context, name string, timeout time.Duration) (corev1.Pod, error) {
	var p corev1.Pod
	last := "not found"
	cond := func(ctx context.Context) (bool, error) {
		if err := s.res.Get(ctx, name, s.cfg.Namespace, &p); err != nil {
			last = err.Error()
			return false, nil
		}
		last = string(p.Status.Phase)
		if r := waitingReason(p); r != "" {
			last += "/" + r
		}
		return p.Status.Phase == corev1.PodRunning && podReady(p), nil
	}
	if err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return p, fmt.Errorf("pod %s/%s not Running within %s (last: %s): %w", s.cfg.Namespace, name, timeout, last, err)
	}
	return p, nil
}

// removeFaultPod force-deletes a pod a fault made and waits until the API
// and the node are rid of it.
func (s *Scenario) removeFaultPod(ctx context.Context, sc *scenarios.StepContext, p corev1.Pod) error {
	if err := s.res.Delete(ctx, &p, resources.WithGracePeriod(0)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s (uid %s): %w", p.Name, p.UID, err)
	}
	deleted := time.Now()
	var left string
	cond := func(ctx context.Context) (bool, error) {
		var got corev1.Pod
		if err := s.res.Get(ctx, p.Name, p.Namespace, &got); err == nil && got.UID == p.UID {
			left = "still in the API"
			return false, nil
		}
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil {
			return false, nil
		}
		if l := snap.Leftovers([]string{string(p.UID)}); len(l) > 0 {
			left = l[0].String()
			return false, nil
		}
		return true, nil
	}
	if err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(s.cfg.CleanupTimeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		// err says whether the wait timed out or was stopped.
		return fmt.Errorf("pod %s (uid %s) a fault made not gone %s after its force-delete (%w): %s", p.Name, p.UID, time.Since(deleted).Round(time.Second), err, left)
	}
	return nil
}

// plantReplacement (fault 9), with the kubelet down: the StatefulSet is
// scaled to 0 (its pods stay Terminating, nobody runs their deletion), a
// replacement pod per old pod is created on the same claim with nodeName
// set (no scheduler), and only then the old pods are force-deleted, as
// upstream's disruptive multi-pod test does.
func plantReplacement(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	pods, err := s.listPods(ctx)
	if err != nil {
		return err
	}
	if err := s.scale(ctx, 0); err != nil {
		return err
	}
	s.replacements = nil
	for _, p := range pods {
		claim := claimOf(p)
		if claim == "" {
			return fmt.Errorf("pod %s has no claim for a replacement", p.Name)
		}
		r := s.faultPod(p.Name+"-replacement", []corev1.Volume{{Name: volumeName, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}, 5)
		if err := s.res.Create(ctx, r); err != nil {
			return fmt.Errorf("create replacement pod %s on claim %s: %w", r.Name, claim, err)
		}
		s.replacements = append(s.replacements, r.Name)
	}
	for i := range pods {
		if err := s.res.Delete(ctx, &pods[i], resources.WithGracePeriod(0)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("force-delete pod %s (uid %s): %w", pods[i].Name, pods[i].UID, err)
		}
	}
	sc.Note("StatefulSet scaled to 0; replacement pods %s created on the same claims with nodeName %s; then the old pods %s force-deleted",
		strings.Join(s.replacements, ", "), s.node, strings.Join(s.oldUIDs, ", "))
	return nil
}

// checkReplacement: each replacement runs with the old pod's data; then it
// is removed and the StatefulSet scaled back for the hop's checks.
func checkReplacement(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	for _, name := range s.replacements {
		p, err := s.waitPod(ctx, name, s.scaled(podsRunningTimeout))
		if err != nil {
			s.faultSeen = append(s.faultSeen, "replacement "+err.Error())
			continue
		}
		claim := ""
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claim = v.PersistentVolumeClaim.ClaimName
			}
		}
		pv := s.pvOf[claim]
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil {
			return err
		}
		marker, err := s.readMarker(ctx, sc.Node, snap, p, pv)
		switch {
		case err != nil:
			s.faultSeen = append(s.faultSeen, fmt.Sprintf("replacement pod %s (uid %s): %v", name, p.UID, err))
		case marker != s.markers[pv]:
			s.faultSeen = append(s.faultSeen, fmt.Sprintf("replacement pod %s (uid %s) on PV %s reads marker %q, want %q", name, p.UID, pv, marker, s.markers[pv]))
		default:
			sc.Note("replacement pod %s uid %s Running %s after the kubelet started, on PV %s with the old pod's data", name, p.UID, time.Since(s.kubeletUp).Round(10*time.Millisecond), pv)
		}
		if err := s.removeFaultPod(ctx, sc, p); err != nil {
			return err
		}
	}
	if len(s.faultSeen) == 0 {
		s.faultDetail = fmt.Sprintf("replacement pods %s ran on the old pods' claims with their data once the old pods %s were cleaned", strings.Join(s.replacements, ", "), strings.Join(s.oldUIDs, ", "))
	}
	if err := s.scale(ctx, s.cfg.Replicas); err != nil {
		return err
	}
	sc.Note("replacement pods removed; StatefulSet scaled back to %d", s.cfg.Replicas)
	return nil
}

// deleteInPreStop (fault 11), with the kubelet up: a pod with an emptyDir
// (its marker written there) and a preStop hook that outlasts the hop is
// deleted gracefully; once it is Terminating the kubelet is stopped, as
// #113979 did (kubectl delete, then pkill kubelet).
func deleteInPreStop(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	name := s.cfg.Name + "-prestop"
	p := s.faultPod(name, []corev1.Volume{{Name: scratchVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, int64(preStopGrace/time.Second))
	hook := []string{"/podbin", "pause"} // waits for a signal nobody sends
	if len(p.Spec.Containers[0].Command) > 0 {
		hook = []string{"sleep", fmt.Sprint(int(preStopGrace / time.Second))}
	}
	p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: hook}}}
	if err := s.res.Create(ctx, p); err != nil {
		return fmt.Errorf("create preStop pod %s: %w", name, err)
	}
	got, err := s.waitPod(ctx, name, s.scaled(podsRunningTimeout))
	if err != nil {
		return err
	}
	s.preStopPod = got
	// Ready comes with the container's start, the marker a moment later.
	written := func(ctx context.Context) (bool, error) {
		_, err := exec.Output(ctx, sc.QuietNode, "cat", s.scratchMarker())
		return err == nil, nil
	}
	if err := wait.For(written, wait.WithContext(ctx), wait.WithTimeout(s.scaled(podsRunningTimeout)), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return fmt.Errorf("preStop pod %s (uid %s) wrote no marker at %s: %w", name, got.UID, s.scratchMarker(), err)
	}
	if err := s.res.Delete(ctx, &got); err != nil {
		return fmt.Errorf("delete preStop pod %s: %w", name, err)
	}
	if err := s.node.StopKubelet(ctx); err != nil {
		return err
	}
	sc.Note("pod %s uid %s (emptyDir %s with its marker, preStop %v, grace %s) deleted gracefully; kubelet stopped while it was Terminating", name, got.UID, scratchVolume, hook, preStopGrace)
	return nil
}

// scratchMarker is the preStop pod's marker in its emptyDir, on the node.
func (s *Scenario) scratchMarker() string {
	return s.reader0().KubeletRoot + fmt.Sprintf("/pods/%s/volumes/kubernetes.io~empty-dir/%s/marker", s.preStopPod.UID, scratchVolume)
}

// watchPreStop watches, from the kubelet's start for preStopWatch, that
// the preStop pod's container still runs and its emptyDir keeps its
// marker; then force-deletes the pod and waits until it is gone.
func watchPreStop(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	p := s.preStopPod
	var broken string
	checks := 0
	deadline := s.kubeletUp.Add(preStopWatch)
	for time.Now().Before(deadline) && broken == "" {
		checks++
		var got corev1.Pod
		if err := s.res.Get(ctx, p.Name, p.Namespace, &got); err != nil || got.UID != p.UID {
			broken = fmt.Sprintf("pod %s uid %s gone from the API before its grace period ended (%v)", p.Name, p.UID, err)
			break
		}
		if _, err := exec.Output(ctx, sc.QuietNode, "cat", s.scratchMarker()); err != nil {
			running := "unknown"
			for _, c := range got.Status.ContainerStatuses {
				running = fmt.Sprintf("running=%t", c.State.Running != nil)
			}
			broken = fmt.Sprintf("pod %s uid %s: the emptyDir's marker %s is gone %s after the kubelet started, while the pod is Terminating (container %s)", p.Name, p.UID, s.scratchMarker(), time.Since(s.kubeletUp).Round(10*time.Millisecond), running)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.cfg.PollInterval):
		}
	}
	if broken != "" {
		s.faultSeen = append(s.faultSeen, broken)
	} else {
		s.faultDetail = fmt.Sprintf("pod %s uid %s kept its emptyDir's marker in its preStop for the first %s after the kubelet started (%d checks)", p.Name, p.UID, preStopWatch, checks)
	}
	sc.Note("%s", strings.Join(append(append([]string(nil), s.faultSeen...), s.faultDetail), "; "))
	if err := s.removeFaultPod(ctx, sc, p); err != nil {
		return err
	}
	sc.Note("preStop pod %s force-deleted and gone", p.Name)
	return nil
}

// replacement-pod and prestop-emptydir state.
type podFaultState struct {
	replacements []string
	preStopPod   corev1.Pod
}
