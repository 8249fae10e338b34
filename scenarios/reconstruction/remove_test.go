package reconstruction

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"sigs.k8s.io/skewtest/clusters/storage"
)

// mustCreate makes what a scenario's deploy made in the API before its
// hop failed (the StatefulSet, its pod and claim, a PV skewtest made),
// beside a pod, a claim and a PV of the cluster's owner.
func mustCreate(t *testing.T, cs *fake.Clientset, ns string) {
	t.Helper()
	ctx := context.Background()
	pv := func(name string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain}}
	}
	var errs []error
	add := func(_ any, err error) { errs = append(errs, err) }
	add(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	add(cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}, metav1.CreateOptions{}))
	for name, labels := range map[string]map[string]string{"web-0": {appLabel: "web"}, "owners-own": {"app": "db"}} {
		add(cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}}, metav1.CreateOptions{}))
	}
	for _, name := range []string{claimName("web", 0), "owners-claim"} {
		add(cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, metav1.CreateOptions{}))
	}
	for _, name := range []string{"pv-made", "pv-owners"} {
		add(cs.CoreV1().PersistentVolumes().Create(ctx, pv(name), metav1.CreateOptions{}))
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestRemoveDeletesOnlyWhatTheScenarioMade(t *testing.T) {
	for _, madeNamespace := range []bool{true, false} {
		ns := "skewtest"
		cs := fake.NewClientset()
		ctx := context.Background()
		mustCreate(t, cs, ns)
		s := &Scenario{cs: cs, cfg: Config{Name: "web", Namespace: ns, Replicas: 1, PollInterval: 10 * time.Millisecond},
			deployStarted: true, madeNamespace: madeNamespace,
			provisioned: storage.Volumes{PVs: []storage.PV{{Name: "pv-made", Claim: claimName("web", 0)}}}}
		if !s.LeftInCluster() {
			t.Fatal("a scenario that deployed and did not delete its workload says it left nothing")
		}
		if err := s.Remove(ctx, 5*time.Second); err != nil {
			t.Fatalf("madeNamespace=%v: Remove: %v", madeNamespace, err)
		}
		if s.LeftInCluster() {
			t.Errorf("madeNamespace=%v: still LeftInCluster after Remove", madeNamespace)
		}
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if gone := err != nil; gone != madeNamespace {
			t.Errorf("madeNamespace=%v: namespace deleted=%v; want it deleted only when the scenario made it", madeNamespace, gone)
		}
		if _, err := cs.CoreV1().PersistentVolumes().Get(ctx, "pv-made", metav1.GetOptions{}); err == nil {
			t.Errorf("madeNamespace=%v: the run's PV pv-made is left", madeNamespace)
		}
		if _, err := cs.CoreV1().PersistentVolumes().Get(ctx, "pv-owners", metav1.GetOptions{}); err != nil {
			t.Errorf("madeNamespace=%v: the owner's PV was deleted: %v", madeNamespace, err)
		}
		if madeNamespace {
			continue
		}
		if _, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{}); err == nil {
			t.Error("the StatefulSet is left in a namespace the scenario found")
		}
		pods, _ := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		if strings.Join(names, ",") != "owners-own" {
			t.Errorf("pods left %v, want only the owner's", names)
		}
		if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "owners-claim", metav1.GetOptions{}); err != nil {
			t.Errorf("the owner's claim was deleted: %v", err)
		}
		if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claimName("web", 0), metav1.GetOptions{}); err == nil {
			t.Error("the scenario's claim is left")
		}
	}
}

// A scenario that passed deleted its workload itself but kept the
// namespace it made: Remove deletes that namespace, and nothing else.
func TestRemoveAfterAPassDeletesTheNamespaceItMade(t *testing.T) {
	cs := fake.NewClientset()
	ctx := context.Background()
	mustCreate(t, cs, "skewtest")
	s := &Scenario{cs: cs, cfg: Config{Name: "web", Namespace: "skewtest", PollInterval: 10 * time.Millisecond}, deployStarted: true, madeNamespace: true, removed: true,
		provisioned: storage.Volumes{PVs: []storage.PV{{Name: "pv-made", Claim: claimName("web", 0)}}}}
	if !s.LeftInCluster() || s.Workload() != "namespace skewtest" {
		t.Fatalf("a passed scenario that made its namespace: LeftInCluster %v, Workload %q; want true, \"namespace skewtest\"", s.LeftInCluster(), s.Workload())
	}
	if err := s.Remove(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "skewtest", metav1.GetOptions{}); err == nil {
		t.Error("the namespace the scenario made is left")
	}
	if _, err := cs.CoreV1().PersistentVolumes().Get(ctx, "pv-made", metav1.GetOptions{}); err != nil {
		t.Errorf("a PV was deleted again after the scenario's own step released its volumes: %v", err)
	}
	if s.LeftInCluster() {
		t.Error("still LeftInCluster after Remove")
	}
}

// A scenario that never deployed, or deleted its workload in a namespace
// it found, removes nothing.
func TestRemoveWithNothingLeftTouchesNothing(t *testing.T) {
	cs := fake.NewClientset()
	mustCreate(t, cs, "skewtest")
	for _, s := range []*Scenario{
		{cs: cs, cfg: Config{Name: "web", Namespace: "skewtest"}},
		{cs: cs, cfg: Config{Name: "web", Namespace: "skewtest"}, deployStarted: true, removed: true},
	} {
		if s.LeftInCluster() {
			t.Errorf("%+v says it left something", s)
		}
		if err := s.Remove(context.Background(), time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "skewtest", metav1.GetOptions{}); err != nil {
			t.Fatalf("the namespace was deleted by a scenario with nothing left: %v", err)
		}
	}
}
