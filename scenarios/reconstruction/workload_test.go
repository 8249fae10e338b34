package reconstruction

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/skewtest/clusters/storage"
)

func TestStatefulSet(t *testing.T) {
	tests := []struct {
		name string
		mode corev1.PersistentVolumeAccessMode
		w    storage.Workload
	}{
		{"registry-free image", corev1.ReadWriteOnce, storage.Workload{Image: "localhost/skewtest/workload:v1", PullPolicy: "Never"}},
		{"stock image with the marker command", corev1.ReadWriteOnce, storage.Workload{Image: "busybox", PullPolicy: "IfNotPresent", Command: storage.BusyboxCommand}},
		{"ReadWriteOncePod claims (the replacement-pod fault)", corev1.ReadWriteOncePod, storage.Workload{Image: "busybox"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sts := statefulSet("web", "ns", "node-1", 3, "sc", "16Mi", tt.mode, tt.w)
			if *sts.Spec.Replicas != 3 {
				t.Errorf("replicas = %d", *sts.Spec.Replicas)
			}
			pod := sts.Spec.Template.Spec
			if pod.NodeSelector[corev1.LabelHostname] != "node-1" {
				t.Errorf("pods are not pinned to the test node: %v", pod.NodeSelector)
			}
			c := pod.Containers[0]
			if c.Image != tt.w.Image || string(c.ImagePullPolicy) != tt.w.PullPolicy || !reflect.DeepEqual(c.Command, tt.w.Command) {
				t.Errorf("container = %s %s %v, want %+v", c.Image, c.ImagePullPolicy, c.Command, tt.w)
			}
			if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/data" || c.VolumeMounts[0].Name != volumeName {
				t.Errorf("volume mounts = %+v, want the claim at /data", c.VolumeMounts)
			}
			tmpl := sts.Spec.VolumeClaimTemplates[0]
			if tmpl.Name != volumeName || *tmpl.Spec.StorageClassName != "sc" || tmpl.Spec.Resources.Requests.Storage().String() != "16Mi" {
				t.Errorf("claim template = %+v", tmpl)
			}
			if !reflect.DeepEqual(tmpl.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{tt.mode}) {
				t.Errorf("claim access modes %v, want [%s]", tmpl.Spec.AccessModes, tt.mode)
			}
			if !reflect.DeepEqual(sts.Spec.Selector.MatchLabels, sts.Spec.Template.Labels) {
				t.Errorf("selector %v does not match the pod labels %v", sts.Spec.Selector.MatchLabels, sts.Spec.Template.Labels)
			}
		})
	}
	// The claims the StatefulSet controller makes are what providers pre-bind.
	if got := claimName("web", 2); got != "data-web-2" {
		t.Errorf("claimName = %q", got)
	}
}

func TestPodVolumeDir(t *testing.T) {
	tests := []struct {
		kind storage.Kind
		want string
	}{
		{storage.CSI, "pods/u1/volumes/kubernetes.io~csi/pv1/mount"},
		{storage.Local, "pods/u1/volumes/kubernetes.io~local-volume/pv1"},
	}
	for _, tt := range tests {
		if got := podVolumeDir(tt.kind, "u1", "pv1"); got != tt.want {
			t.Errorf("podVolumeDir(%s) = %q, want %q", tt.kind, got, tt.want)
		}
	}
}

func TestTimeoutFactorStretchesTheCleanupWait(t *testing.T) {
	c := Config{TimeoutFactor: 10}
	c.defaults()
	if c.CleanupTimeout != 10*defaultCleanupTimeout {
		t.Errorf("CleanupTimeout with factor 10 = %s, want %s", c.CleanupTimeout, 10*defaultCleanupTimeout)
	}
	c = Config{TimeoutFactor: 10, CleanupTimeout: time.Minute}
	c.defaults()
	if c.CleanupTimeout != time.Minute {
		t.Errorf("an explicit CLEANUP_TIMEOUT was stretched to %s", c.CleanupTimeout)
	}
}

// A wait for pods that ends on a stuck pod quotes the newest Warning
// events about that pod (the scheduler's and the controllers' reasons),
// oldest first, and only those.
func TestWarningEvents(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Date(2026, 12, 1, 16, 17, s, 0, time.UTC)) }
	ev := func(pod, uid, typ, reason, by string, s int, msg string) corev1.Event {
		return corev1.Event{
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: pod, UID: types.UID(uid)},
			Type:           typ, Reason: reason, Message: msg, LastTimestamp: at(s), Source: corev1.EventSource{Component: by},
		}
	}
	events := []corev1.Event{
		ev("web-0", "new-0", corev1.EventTypeWarning, "FailedScheduling", "default-scheduler", 30, "0/2 nodes are available: 1 node(s) unbound immediate PersistentVolumeClaims"),
		ev("web-0", "new-0", corev1.EventTypeWarning, "FailedBinding", "ephemeral_volume", 10, "ephemeral volume gen: PVC skewtest/web-0-gen was not created for pod skewtest/web-0 (pod is not owner)"),
		ev("web-0", "new-0", corev1.EventTypeNormal, "Scheduled", "default-scheduler", 40, "assigned"),
		ev("web-1", "new-1", corev1.EventTypeWarning, "FailedMount", "kubelet", 20, "not this pod"),
		ev("web-0", "new-0", corev1.EventTypeWarning, "Oldest", "kubelet", 1, "dropped: only the newest two are quoted"),
		ev("web-0", "old-0", corev1.EventTypeWarning, "FailedMount", "kubelet", 50, "the old pod of the same name: not this one"),
	}
	pod := func(name, uid string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
	}
	got := warningEvents(events, []corev1.Pod{pod("web-0", "new-0")}, 2)
	want := "; Warning events: 16:17:10 web-0 FailedBinding by ephemeral_volume (x1): ephemeral volume gen: PVC skewtest/web-0-gen was not created for pod skewtest/web-0 (pod is not owner); " +
		"16:17:30 web-0 FailedScheduling by default-scheduler (x1): 0/2 nodes are available: 1 node(s) unbound immediate PersistentVolumeClaims"
	if got != want {
		t.Errorf("warningEvents =\n%s\nwant\n%s", got, want)
	}
	if got := warningEvents(events, []corev1.Pod{pod("web-2", "new-2")}, 2); got != "; no Warning events for web-2 (uid new-2)" {
		t.Errorf("warningEvents for a pod without events = %q", got)
	}
}

// A wait for re-created pods that times out blames the control plane only
// when the kubelet was never asked: a pod without a node, or a pod never
// created while no old pod holds it up.
func TestControlPlaneFault(t *testing.T) {
	pod := func(name, uid, node string, phase corev1.PodPhase, ready bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	unschedulable := pod("web-0", "new-0", "", corev1.PodPending, false)
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/2 nodes are available"}}
	old := map[types.UID]bool{"old-0": true, "old-1": true}
	tests := []struct {
		name       string
		pods       []corev1.Pod
		want       string
		wantStatus string
	}{
		{"a re-created pod the scheduler never placed", []corev1.Pod{unschedulable, pod("web-1", "new-1", "node-1", corev1.PodRunning, true)},
			"web-0 never scheduled onto a node", "web-0(new-0)=Pending/0/2 nodes are available, web-1(new-1)=Running"},
		{"a pod never re-created, no old pod left", []corev1.Pod{pod("web-1", "new-1", "node-1", corev1.PodRunning, true)},
			"the StatefulSet controller created 1 of 2 pods", "web-1(new-1)=Running"},
		{"no pods at all", nil, "the StatefulSet controller created 0 of 2 pods", "no pods yet (is the StatefulSet controller running?)"},
		{"an old pod still in the API holds its replacement up: maybe the kubelet's", []corev1.Pod{pod("web-0", "old-0", "node-1", corev1.PodRunning, true), pod("web-1", "new-1", "node-1", corev1.PodRunning, true)},
			"", "web-0(old-0)=old uid, web-1(new-1)=Running"},
		{"a pod on the node that does not run: the kubelet's", []corev1.Pod{pod("web-0", "new-0", "node-1", corev1.PodPending, false), pod("web-1", "new-1", "node-1", corev1.PodRunning, true)},
			"", "web-0(new-0)=Pending, web-1(new-1)=Running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := observePods(tt.pods, old, "node-1")
			if got := seen.controlPlaneFault(2); got != tt.want {
				t.Errorf("controlPlaneFault = %q, want %q", got, tt.want)
			}
			if seen.status != tt.wantStatus {
				t.Errorf("status = %q, want %q", seen.status, tt.wantStatus)
			}
		})
	}
}
