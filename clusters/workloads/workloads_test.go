package workloads_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/clusters/workloads/workloadstest"
)

// made puts into api what run's scenario deploys in its namespace ns (the
// namespace, a StatefulSet, its claim, the Retain PV bound to the claim),
// marked with the run's label, and returns its record with every UID.
func made(t *testing.T, api *workloadstest.Cluster, run, ns string) workloads.Record {
	t.Helper()
	l := workloads.Labels(run)
	r := workloads.Record{Run: run, Namespace: ns, OwnsNamespace: true, StatefulSet: "web"}
	r.NamespaceUID = api.Add(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: l}})
	r.StatefulSetUID = api.Add(t, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: l}})
	claim := api.Add(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-web-0", Namespace: ns, Labels: l}})
	pv := "pv-" + ns
	uid := api.Add(t, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv, Labels: l}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "data-web-0", UID: claim}}})
	r.Volumes = storage.Volumes{StorageClass: "owners-sc", PVs: []storage.PV{{Name: pv, Claim: "data-web-0", UID: uid, ClaimUID: claim}}}
	return r
}

// owners puts the cluster owner's objects into api under the names a
// run of an older skewtest took (namespace skewtest, StatefulSet web,
// claim data-web-0) and a PV, and returns their UIDs.
func owners(t *testing.T, api *workloadstest.Cluster) map[workloadstest.Key]types.UID {
	t.Helper()
	return map[workloadstest.Key]types.UID{
		{Resource: "namespaces", Name: "skewtest"}:                                      api.Add(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "skewtest"}}),
		{Resource: "statefulsets", Namespace: "skewtest", Name: "web"}:                  api.Add(t, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "skewtest"}}),
		{Resource: "persistentvolumeclaims", Namespace: "skewtest", Name: "data-web-0"}: api.Add(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-web-0", Namespace: "skewtest"}}),
		{Resource: "persistentvolumes", Name: "pv-owners"}:                              api.Add(t, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-owners"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain}}),
	}
}

// untouched fails the test unless every object of want is there with the
// same UID.
func untouched(t *testing.T, api *workloadstest.Cluster, want map[workloadstest.Key]types.UID) {
	t.Helper()
	for k, uid := range want {
		got := api.Get(k)
		switch {
		case got == nil:
			t.Errorf("%s was deleted", k)
		case got.GetUID() != uid:
			t.Errorf("%s has UID %s, want %s: it was deleted and made again", k, got.GetUID(), uid)
		}
	}
}

func remove(t *testing.T, api *workloadstest.Cluster, r workloads.Record) error {
	t.Helper()
	return workloads.Remove(context.Background(), api, r, 5*time.Second, 10*time.Millisecond, nil)
}

// Two runs on one cluster beside its owner's objects: each run's Remove
// deletes its own namespace, the workload in it and its PV, and nothing of
// the other run's or of the owner's.
func TestRemoveDeletesOnlyTheRunsOwn(t *testing.T) {
	api := workloadstest.New()
	keep := owners(t, api)
	a := made(t, api, "run-a", workloads.Namespace("run-a"))
	b := made(t, api, "run-b", workloads.Namespace("run-b"))
	for _, k := range api.Keys() {
		if strings.Contains(k.String(), "run-a") {
			keep[k] = api.Get(k).GetUID()
		}
	}
	if err := remove(t, api, b); err != nil {
		t.Fatalf("Remove run B: %v", err)
	}
	untouched(t, api, keep)
	for _, k := range api.Keys() {
		if strings.Contains(k.String(), "run-b") {
			t.Errorf("run B's %s is left", k)
		}
	}
	if err := remove(t, api, a); err != nil {
		t.Fatalf("Remove run A: %v", err)
	}
	for k := range keep {
		if strings.Contains(k.String(), "run-a") {
			delete(keep, k)
		}
	}
	untouched(t, api, keep)
	if got := len(api.Keys()); got != len(keep) {
		t.Errorf("objects left %v, want only the owner's %d", api.Keys(), len(keep))
	}
}

// A namespace of the record's name that is not the run's is left alone
// with everything in it: one without the run's label (the run was killed
// before its create, someone else's took the name), one with the label
// but another UID (the run's was deleted and another run of the same ID
// made one since). Its claims are not deleted by name either.
func TestRemoveLeavesANamespaceThatIsNotTheRuns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		label map[string]string
		uid   types.UID
	}{
		{"no run label, no UID recorded", nil, ""},
		{"another run's label", workloads.Labels("run-b"), ""},
		{"the run's label, another UID", workloads.Labels("run-a"), "recorded-uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := workloadstest.New()
			keep := map[workloadstest.Key]types.UID{
				{Resource: "namespaces", Name: "ns"}:                                      api.Add(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: tc.label}}),
				{Resource: "persistentvolumeclaims", Namespace: "ns", Name: "data-web-0"}: api.Add(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-web-0", Namespace: "ns"}}),
			}
			r := workloads.Record{Run: "run-a", Namespace: "ns", OwnsNamespace: true, NamespaceUID: tc.uid, StatefulSet: "web",
				Volumes: storage.Volumes{PVs: []storage.PV{{Name: "pv-gone", Claim: "data-web-0"}}}}
			if err := remove(t, api, r); err != nil {
				t.Fatal(err)
			}
			untouched(t, api, keep)
		})
	}
}

// A run killed between its record and its namespace's UID: the namespace
// that has its label is its own, and goes.
func TestRemoveFindsTheNamespaceByLabelBeforeItsUID(t *testing.T) {
	api := workloadstest.New()
	api.Add(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: workloads.Labels("run-a")}})
	if err := remove(t, api, workloads.Record{Run: "run-a", Namespace: "ns", OwnsNamespace: true}); err != nil {
		t.Fatal(err)
	}
	if got := api.Deleted(); !slices.Equal(got, []workloadstest.Key{{Resource: "namespaces", Name: "ns"}}) {
		t.Errorf("deleted %v, want the run's namespace", got)
	}
}

// The API server refuses a delete whose UID precondition names an object
// deleted and made again under the same name, and Release leaves a PV
// made again since it was recorded.
func TestUIDPreconditionRefusesAnObjectMadeAgain(t *testing.T) {
	api := workloadstest.New()
	cs := api
	ctx := context.Background()
	pv := func() *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-0"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain}}
	}
	old := api.Add(t, pv())
	if err := cs.CoreV1().PersistentVolumes().Delete(ctx, "pv-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := api.Add(t, pv())
	err := cs.CoreV1().PersistentVolumes().Delete(ctx, "pv-0", metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(old))})
	if err == nil || !strings.Contains(err.Error(), "Precondition failed") {
		t.Errorf("delete with the old UID: %v; want a failed precondition", err)
	}
	// The run's StorageClass, deleted and made again by another run.
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "skewtest-csi"}, Provisioner: "kubernetes.io/no-provisioner"}
	oldSC := api.Add(t, sc)
	if err := cs.StorageV1().StorageClasses().Delete(ctx, "skewtest-csi", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	againSC := api.Add(t, sc)
	vols := storage.Volumes{StorageClass: "skewtest-csi", DeleteStorageClass: true, StorageClassUID: oldSC, PVs: []storage.PV{{Name: "pv-0", UID: old}}}
	if err := storage.Release(ctx, cs, "ns", vols, time.Second, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	untouched(t, api, map[workloadstest.Key]types.UID{
		{Resource: "persistentvolumes", Name: "pv-0"}:      again,
		{Resource: "storageclasses", Name: "skewtest-csi"}: againSC,
	})
}

// A namespace that does not go (its pods wait for a kubelet) is named in
// the error, with how to look.
func TestRemoveNamesWhatDoesNotGo(t *testing.T) {
	api := workloadstest.New()
	r := made(t, api, "run-a", "ns")
	cs := api
	api.Terminating = true
	err := workloads.Remove(context.Background(), cs, r, 200*time.Millisecond, 10*time.Millisecond, nil)
	if err == nil || !strings.Contains(err.Error(), "namespace ns") || !strings.Contains(err.Error(), "kubectl get pods -n ns") {
		t.Errorf("Remove with a namespace that stays: %v; want an error naming it and how to look", err)
	}
}

func TestNamespace(t *testing.T) {
	for _, tc := range []struct {
		run   string
		parts []string
		want  string
	}{
		{"20261205-234126-ab12", nil, "skewtest-20261205-234126-ab12"},
		{"20261205-234126-ab12", []string{"trail", "2"}, "skewtest-20261205-234126-ab12-trail-2"},
		{"20261205-234126-ab12", []string{"3", strings.Repeat("x", 80)}, "skewtest-20261205-234126-ab12-3-" + strings.Repeat("x", 31)},
		{"Run_ID", []string{"Fault vol.data"}, "skewtest-run-id-fault-vol-data"},
	} {
		got := workloads.Namespace(tc.run, tc.parts...)
		if got != tc.want || len(got) > 63 {
			t.Errorf("Namespace(%q, %q) = %q, want %q", tc.run, tc.parts, got, tc.want)
		}
	}
}

// A run's namespace is made with its label, and recorded as owned before
// the create and with its UID after.
func TestMakeNamespaceRecordsItsUID(t *testing.T) {
	api := workloadstest.New()
	var records []workloads.Record
	record := func(r workloads.Record) error { records = append(records, r); return nil }
	r, err := workloads.MakeNamespace(context.Background(), api, workloads.Record{Run: "run-a", Namespace: "skewtest-run-a"}, record)
	if err != nil {
		t.Fatal(err)
	}
	got := api.Get(workloadstest.Key{Resource: "namespaces", Name: "skewtest-run-a"})
	switch {
	case got == nil:
		t.Fatal("no namespace made")
	case got.GetLabels()[workloads.RunLabel] != "run-a":
		t.Errorf("namespace labels %v, want %s=run-a", got.GetLabels(), workloads.RunLabel)
	case r.NamespaceUID == "" || r.NamespaceUID != got.GetUID():
		t.Errorf("recorded UID %q, the namespace's %q", r.NamespaceUID, got.GetUID())
	}
	if len(records) != 2 || !records[0].OwnsNamespace || records[0].NamespaceUID != "" || !reflect.DeepEqual(records[1], r) {
		t.Errorf("records %+v; want the owned namespace before the create, then with its UID", records)
	}
}

// A namespace of the run's name that exists is not the run's, whatever
// its labels say: the create's AlreadyExists is ErrNotOurs, the record
// drops it, and Remove of that record leaves it with what is in it.
func TestMakeNamespaceFindsOneThatIsNotOurs(t *testing.T) {
	for name, labels := range map[string]map[string]string{"the owner's": nil, "labelled as the run's": workloads.Labels("run-a")} {
		t.Run(name, func(t *testing.T) {
			api := workloadstest.New()
			keep := map[workloadstest.Key]types.UID{
				{Resource: "namespaces", Name: "skewtest-run-a"}: api.Add(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "skewtest-run-a", Labels: labels}}),
				{Resource: "statefulsets", Namespace: "skewtest-run-a", Name: "web"}: api.Add(t,
					&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "skewtest-run-a"}}),
			}
			var last workloads.Record
			record := func(r workloads.Record) error { last = r; return nil }
			r, err := workloads.MakeNamespace(context.Background(), api, workloads.Record{Run: "run-a", Namespace: "skewtest-run-a", StatefulSet: "web"}, record)
			if !errors.Is(err, workloads.ErrNotOurs) {
				t.Fatalf("MakeNamespace = %v, want ErrNotOurs", err)
			}
			if !last.Empty() || !r.Empty() {
				t.Errorf("the record after AlreadyExists is %+v (returned %+v), want nothing to remove", last, r)
			}
			if err := remove(t, api, r); err != nil {
				t.Fatal(err)
			}
			untouched(t, api, keep)
			if d := api.Deleted(); len(d) > 0 {
				t.Errorf("deleted %v", d)
			}
		})
	}
}
