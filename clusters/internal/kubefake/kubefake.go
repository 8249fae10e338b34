// Package kubefake is a fake API server for unit tests of code that
// speaks to the core/v1 and storage/v1 groups and to discovery: client-go's
// typed fakes of those groups over one object tracker.
//
// It stands in for k8s.io/client-go/kubernetes/fake, which holds a fake of
// every API group: compiling those is about 40 CPU-seconds of a cold
// make test, for two groups our tests use. Code under test takes the small
// interface it needs (storage.Client, the kops provider's kubeAPI), which
// both this fake and a real clientset satisfy.
package kubefake

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	fakecorev1 "k8s.io/client-go/kubernetes/typed/core/v1/fake"
	storagev1client "k8s.io/client-go/kubernetes/typed/storage/v1"
	fakestoragev1 "k8s.io/client-go/kubernetes/typed/storage/v1/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Clientset answers from an object tracker, as client-go's fake clientset
// does: reactors added with PrependReactor run first.
type Clientset struct {
	k8stesting.Fake
	tracker k8stesting.ObjectTracker
}

// New returns a clientset holding objects. It panics on an object the
// scheme does not know, as client-go's NewClientset does: a test's own
// mistake.
func New(objects ...runtime.Object) *Clientset {
	o := k8stesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
	for _, obj := range objects {
		if err := o.Add(obj); err != nil {
			panic(err)
		}
	}
	cs := &Clientset{tracker: o}
	cs.AddReactor("*", "*", k8stesting.ObjectReaction(o))
	cs.AddWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := o.Watch(a.GetResource(), a.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		return true, w, nil
	})
	return cs
}

// Tracker is the store behind the clientset, for changes a test makes as
// another client would (a provisioner deleting a PV).
func (c *Clientset) Tracker() k8stesting.ObjectTracker { return c.tracker }

// CoreV1 is the core/v1 group.
func (c *Clientset) CoreV1() corev1client.CoreV1Interface {
	return &fakecorev1.FakeCoreV1{Fake: &c.Fake}
}

// StorageV1 is the storage.k8s.io/v1 group.
func (c *Clientset) StorageV1() storagev1client.StorageV1Interface {
	return &fakestoragev1.FakeStorageV1{Fake: &c.Fake}
}

// Discovery answers ServerVersion with client-go's fake version.
func (c *Clientset) Discovery() discovery.DiscoveryInterfaces {
	return &fakediscovery.FakeDiscovery{Fake: &c.Fake}
}
