package reconstruction

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"sigs.k8s.io/skewtest/reports"
)

// podsClient serves the two calls the watch makes, List then Watch, from
// a fixed list and a fake watch the test drives; anything else of the
// clientset is nil and would panic.
type podsClient struct {
	kubernetes.Interface
	list []corev1.Pod
	w    *watch.FakeWatcher
}

func (c *podsClient) CoreV1() corev1client.CoreV1Interface { return podsCore{c: c} }

type podsCore struct {
	corev1client.CoreV1Interface
	c *podsClient
}

func (p podsCore) Pods(string) corev1client.PodInterface { return podsAPI{c: p.c} }

type podsAPI struct {
	corev1client.PodInterface
	c *podsClient
}

func (p podsAPI) List(context.Context, metav1.ListOptions) (*corev1.PodList, error) {
	return &corev1.PodList{Items: p.c.list}, nil
}

func (p podsAPI) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return p.c.w, nil
}

func pod(name, uid string, running bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}, Spec: corev1.PodSpec{NodeName: "node-1"}}
	p.Status.Phase = corev1.PodPending
	if running {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

// The phase is when the watch saw every re-created pod run, not when the
// wait after the cleanup looked; old UIDs and pods not yet ready do not
// count.
func TestPodsUpFromTheWatch(t *testing.T) {
	c := &podsClient{list: []corev1.Pod{*pod("web-0", "new-0", false)}, w: watch.NewFake()}
	s := &Scenario{cfg: Config{Replicas: 2, Name: "web", Namespace: "ns"}, cs: c, node: fakeNode{},
		hop: &reports.Hop{OldPodUIDs: []string{"old-0", "old-1"}}}
	s.cfg.defaults()
	s.kubeletUp = time.Now()
	s.watchPodsUp(context.Background())
	c.w.Add(pod("web-1", "old-1", true)) // an old pod's last update
	c.w.Modify(pod("web-0", "new-0", true))
	c.w.Delete(pod("web-1", "old-1", true))
	c.w.Add(pod("web-1", "new-1", false))
	time.Sleep(50 * time.Millisecond)
	seen := time.Since(s.kubeletUp)
	c.w.Modify(pod("web-1", "new-1", true))
	time.Sleep(50 * time.Millisecond)
	at := s.stopPodsUp()
	if at < seen || at > time.Since(s.kubeletUp) {
		t.Errorf("pods up at %s, want when the last one ran (after %s)", at, seen)
	}
	if s.podsUp != nil || s.stopPodsUp() != 0 {
		t.Error("the watch is not forgotten once stopped")
	}

	// Never all up: nothing is noted, and stopping ends the watch.
	c = &podsClient{w: watch.NewFake()}
	s.cs = c
	s.watchPodsUp(context.Background())
	c.w.Add(pod("web-0", "new-0", true))
	if at := s.stopPodsUp(); at != 0 {
		t.Errorf("one of two pods up counted as all up at %s", at)
	}
}

// The kubelet's start with a plan entry's gates, before the first hop,
// watches nothing: it has no hop (make test-history's
// restart-kill-container failed there with a nil pointer).
func TestWatchPodsUpOutsideAHop(t *testing.T) {
	s := &Scenario{kubeletUp: time.Now()}
	s.watchPodsUp(t.Context())
	if s.podsUp != nil {
		t.Errorf("a start outside a hop started a watch")
	}
}
