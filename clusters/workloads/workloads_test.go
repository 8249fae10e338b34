package workloads

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

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
	for name, labels := range map[string]map[string]string{"web-0": {"skewtest.k8s.io/app": "web"}, "owners-own": {"app": "db"}} {
		add(cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}}, metav1.CreateOptions{}))
	}
	for _, name := range []string{"data-web-0", "owners-claim"} {
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

// what a scenario made, as its record says after a failed hop: in the
// namespace it made or in one it found.
func made(madeNamespace bool) Record {
	return Record{Namespace: "skewtest", MadeNamespace: madeNamespace, StatefulSet: "web",
		PodSelectors: []string{"skewtest.k8s.io/app=web"}, Claims: []string{"data-web-0"},
		Volumes: storage.Volumes{PVs: []storage.PV{{Name: "pv-made", Claim: "data-web-0"}}}}
}

func TestRemoveDeletesOnlyWhatTheScenarioMade(t *testing.T) {
	for _, madeNamespace := range []bool{true, false} {
		ns := "skewtest"
		cs := fake.NewClientset()
		ctx := context.Background()
		mustCreate(t, cs, ns)
		r := made(madeNamespace)
		if r.Empty() {
			t.Fatal("a record of a deployed workload says it is empty")
		}
		if err := Remove(ctx, cs, r, 5*time.Second, 10*time.Millisecond); err != nil {
			t.Fatalf("madeNamespace=%v: Remove: %v", madeNamespace, err)
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
		if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-web-0", metav1.GetOptions{}); err == nil {
			t.Error("the scenario's claim is left")
		}
	}
}

// After a pass the scenario deleted its workload itself and kept the
// namespace it made: Remove deletes that namespace and touches no volume.
func TestRemoveAfterAPassDeletesTheNamespaceItMade(t *testing.T) {
	cs := fake.NewClientset()
	ctx := context.Background()
	mustCreate(t, cs, "skewtest")
	r := Record{Namespace: "skewtest", MadeNamespace: true}
	if r.Empty() || r.HasWorkload() || r.String() != "namespace skewtest" {
		t.Fatalf("record %+v: Empty %v, HasWorkload %v, String %q", r, r.Empty(), r.HasWorkload(), r)
	}
	if err := Remove(ctx, cs, r, 5*time.Second, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "skewtest", metav1.GetOptions{}); err == nil {
		t.Error("the namespace the scenario made is left")
	}
	if _, err := cs.CoreV1().PersistentVolumes().Get(ctx, "pv-made", metav1.GetOptions{}); err != nil {
		t.Errorf("a PV the record does not name was deleted: %v", err)
	}
}

// An empty record, or one of a workload deleted from a namespace the
// scenario found, removes nothing.
func TestRemoveWithNothingLeftTouchesNothing(t *testing.T) {
	cs := fake.NewClientset()
	mustCreate(t, cs, "skewtest")
	for _, r := range []Record{{}, {Namespace: "skewtest"}} {
		if !r.Empty() {
			t.Errorf("%+v is not empty", r)
		}
		if err := Remove(context.Background(), cs, r, time.Second, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "skewtest", metav1.GetOptions{}); err != nil {
			t.Fatalf("the namespace was deleted by an empty record %+v: %v", r, err)
		}
	}
}

// A pod that does not go (its kubelet is down) is named in the error.
func TestRemoveNamesWhatDoesNotGo(t *testing.T) {
	cs := fake.NewClientset()
	mustCreate(t, cs, "skewtest")
	// The fake API keeps a namespace it was asked to delete while its
	// finalizer runs, as a real one does while pods are finishing.
	cs.PrependReactor("delete", "namespaces", func(action k8stesting.Action) (bool, runtime.Object, error) { return true, nil, nil })
	err := Remove(context.Background(), cs, made(true), 200*time.Millisecond, 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "namespace skewtest") || !strings.Contains(err.Error(), "kubectl get pods -n skewtest") {
		t.Errorf("Remove with a namespace that stays: %v; want an error naming it and how to look", err)
	}
}
