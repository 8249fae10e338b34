// Package workloadstest is a fake clientset for tests of what a run makes
// in a cluster it shares with others and of what it removes there
// (workloads.Remove, workloads.MakeNamespace, storage.Release). It adds to
// the core and storage groups' fake clientset (kubefake) what a real API
// server does and its object tracker does not, for the question "whose is this object": a UID on
// every create, a delete refused (409 Conflict) when its UID precondition
// names another object, creates refused in a namespace that does not
// exist or is terminating, and a namespace's delete taking everything in
// it along (the namespace controller's work, done at once). No controller
// runs: a StatefulSet makes no pods.
package workloadstest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"

	"sigs.k8s.io/skewtest/clusters/internal/kubefake"
)

// kinds are the kinds a run makes, by resource; the cascade of a
// namespace's delete and Keys look through these.
var kinds = map[string]schema.GroupVersionKind{
	"namespaces":             corev1.SchemeGroupVersion.WithKind("Namespace"),
	"pods":                   corev1.SchemeGroupVersion.WithKind("Pod"),
	"persistentvolumeclaims": corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
	"persistentvolumes":      corev1.SchemeGroupVersion.WithKind("PersistentVolume"),
	"configmaps":             corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	"secrets":                corev1.SchemeGroupVersion.WithKind("Secret"),
	"statefulsets":           appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
	"storageclasses":         storagev1.SchemeGroupVersion.WithKind("StorageClass"),
}

// clusterScoped are the kinds above that live in no namespace.
var clusterScoped = map[string]bool{"namespaces": true, "persistentvolumes": true, "storageclasses": true}

// Key names one object: its resource ("statefulsets"), namespace (empty
// for cluster-scoped ones) and name.
type Key struct{ Resource, Namespace, Name string }

func (k Key) String() string {
	if k.Namespace == "" {
		return k.Resource + "/" + k.Name
	}
	return k.Resource + "/" + k.Namespace + "/" + k.Name
}

func (k Key) gvr() schema.GroupVersionResource {
	gvk := kinds[k.Resource]
	return gvk.GroupVersion().WithResource(k.Resource)
}

// Cluster is the fake clientset with its reactors.
type Cluster struct {
	*kubefake.Clientset
	// Terminating, when set, keeps a deleted namespace and its contents,
	// Terminating, as a real cluster does while its pods wait for a
	// kubelet to finish them.
	Terminating bool

	mu      sync.Mutex
	deleted []Key
}

// New is an empty cluster.
func New() *Cluster {
	c := &Cluster{Clientset: kubefake.New()}
	c.PrependReactor("create", "*", c.create)
	c.PrependReactor("delete", "*", c.delete)
	return c
}

// Add stores obj as a create by another client would (UID and all),
// failing the test on a refusal, and returns the UID.
func (c *Cluster) Add(t testing.TB, obj runtime.Object) types.UID {
	t.Helper()
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatalf("workloadstest: add %T: %v", obj, err)
	}
	obj = obj.DeepCopyObject()
	mo := obj.(metav1.Object)
	gvr, _ := meta.UnsafeGuessKindToResource(gvks[0])
	action := k8stesting.NewCreateAction(gvr, mo.GetNamespace(), obj)
	out, err := c.Invokes(action, nil)
	if err != nil {
		t.Fatalf("workloadstest: add %s %s: %v", gvr.Resource, mo.GetName(), err)
	}
	return out.(metav1.Object).GetUID()
}

// Get is the object at k, or nil.
func (c *Cluster) Get(k Key) metav1.Object {
	o, err := c.Tracker().Get(k.gvr(), k.Namespace, k.Name)
	if err != nil {
		return nil
	}
	return o.(metav1.Object)
}

// Keys are the objects there, sorted.
func (c *Cluster) Keys() []Key {
	var out []Key
	for res, gvk := range kinds {
		k := Key{Resource: res}
		list, err := c.Tracker().List(k.gvr(), gvk, "")
		if err != nil {
			continue
		}
		items, _ := meta.ExtractList(list)
		for _, o := range items {
			mo := o.(metav1.Object)
			out = append(out, Key{res, mo.GetNamespace(), mo.GetName()})
		}
	}
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Deleted are the objects deleted so far, in order (a namespace's
// contents after it).
func (c *Cluster) Deleted() []Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.deleted)
}

// create gives the object a UID, as the API server does, and refuses it
// in a namespace that is missing or terminating; the tracker stores it.
func (c *Cluster) create(action k8stesting.Action) (bool, runtime.Object, error) {
	ca := action.(k8stesting.CreateAction)
	mo, ok := ca.GetObject().(metav1.Object)
	if !ok {
		return false, nil, nil
	}
	res := action.GetResource().Resource
	if ns := action.GetNamespace(); ns != "" && !clusterScoped[res] {
		n := c.Get(Key{Resource: "namespaces", Name: ns})
		switch {
		case n == nil:
			return true, nil, apierrors.NewNotFound(corev1.Resource("namespaces"), ns)
		case n.GetDeletionTimestamp() != nil:
			return true, nil, apierrors.NewForbidden(action.GetResource().GroupResource(), mo.GetName(), fmt.Errorf("namespace %s is being terminated", ns))
		}
	}
	mo.SetUID(uuid.NewUUID())
	return false, nil, nil
}

// delete refuses a delete whose UID precondition names another object,
// and deletes a namespace with what is in it (or marks it terminating).
func (c *Cluster) delete(action k8stesting.Action) (bool, runtime.Object, error) {
	da := action.(k8stesting.DeleteAction)
	k := Key{Resource: action.GetResource().Resource, Namespace: action.GetNamespace(), Name: da.GetName()}
	if _, served := kinds[k.Resource]; !served {
		return false, nil, nil
	}
	obj := c.Get(k)
	if obj == nil {
		return false, nil, nil // the tracker answers NotFound
	}
	if p := da.GetDeleteOptions().Preconditions; p != nil && p.UID != nil && *p.UID != obj.GetUID() {
		return true, nil, apierrors.NewConflict(action.GetResource().GroupResource(), k.Name,
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, obj.GetUID()))
	}
	if k.Resource == "namespaces" && c.Terminating {
		n := obj.(*corev1.Namespace).DeepCopy()
		now := metav1.Now()
		n.DeletionTimestamp, n.Status.Phase = &now, corev1.NamespaceTerminating
		return true, n, c.Tracker().Update(k.gvr(), n, "")
	}
	gone := []Key{k}
	if k.Resource == "namespaces" {
		for _, in := range c.Keys() {
			if in.Namespace == k.Name {
				gone = append(gone, in)
			}
		}
	}
	for _, g := range gone {
		if err := c.Tracker().Delete(g.gvr(), g.Namespace, g.Name); err != nil {
			return true, nil, err
		}
	}
	c.mu.Lock()
	c.deleted = append(c.deleted, gone...)
	c.mu.Unlock()
	return true, obj.(runtime.Object), nil
}
