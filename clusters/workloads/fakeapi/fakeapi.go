// Package fakeapi is a fake API server over HTTP for tests of code that
// makes and removes objects in a cluster it shares with others: what a
// scenario deploys, what workloads.Remove and `skewtest clean` delete. It
// keeps what a real API server keeps for that question and client-go's
// object tracker does not: a UID for every object, delete preconditions
// on it (409 Conflict when the UID differs), AlreadyExists on a create,
// creates refused in a namespace that does not exist, label selectors,
// and a namespace's delete taking everything in it along (the namespace
// controller's work, done at once). It serves the core, apps and
// storage.k8s.io groups' kinds a scenario uses, in JSON or protobuf, and
// their discovery, so client-go's typed clients and controller-runtime's
// client both work against it. No controller runs: a StatefulSet makes no
// pods.
package fakeapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// resource is one kind the server serves.
type resource struct {
	gv         schema.GroupVersion
	name, kind string
	namespaced bool
}

var served = []resource{
	{schema.GroupVersion{Version: "v1"}, "namespaces", "Namespace", false},
	{schema.GroupVersion{Version: "v1"}, "nodes", "Node", false},
	{schema.GroupVersion{Version: "v1"}, "persistentvolumes", "PersistentVolume", false},
	{schema.GroupVersion{Version: "v1"}, "pods", "Pod", true},
	{schema.GroupVersion{Version: "v1"}, "persistentvolumeclaims", "PersistentVolumeClaim", true},
	{schema.GroupVersion{Version: "v1"}, "configmaps", "ConfigMap", true},
	{schema.GroupVersion{Version: "v1"}, "secrets", "Secret", true},
	{schema.GroupVersion{Version: "v1"}, "events", "Event", true},
	{schema.GroupVersion{Group: "apps", Version: "v1"}, "statefulsets", "StatefulSet", true},
	{schema.GroupVersion{Group: "storage.k8s.io", Version: "v1"}, "storageclasses", "StorageClass", false},
}

// Key names one object: its resource ("statefulsets"), namespace (empty
// for cluster-scoped ones) and name.
type Key struct{ Resource, Namespace, Name string }

func (k Key) String() string {
	if k.Namespace == "" {
		return k.Resource + "/" + k.Name
	}
	return k.Resource + "/" + k.Namespace + "/" + k.Name
}

// Server is the fake API server.
type Server struct {
	// OnCreate, when set, is called after each create the server made,
	// outside its lock (a test stopping a scenario at a given point).
	OnCreate func(Key)
	// Terminating, when set, keeps a deleted namespace and its contents,
	// Terminating, as a real cluster does while its pods wait for a
	// kubelet to finish them.
	Terminating bool

	mu      sync.Mutex
	objects map[Key]runtime.Object
	version int
	deleted []Key
	srv     *httptest.Server
}

// Start serves an empty cluster until the test ends.
func Start(t testing.TB) *Server {
	s := &Server{objects: map[Key]runtime.Object{}}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	return s
}

// Handler serves the fake API without a listener of its own, for a test
// server that answers some paths itself.
func Handler() *Server { return &Server{objects: map[Key]runtime.Object{}} }

// Config is a client config for the server.
func (s *Server) Config() *rest.Config { return &rest.Config{Host: s.srv.URL} }

// Clientset is a typed client of the server.
func (s *Server) Clientset(t testing.TB) kubernetes.Interface {
	cs, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Get returns a copy of the object at k, or nil.
func (s *Server) Get(k Key) metav1.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.objects[k]; ok {
		return o.DeepCopyObject().(metav1.Object)
	}
	return nil
}

// Keys are the objects there, sorted.
func (s *Server) Keys() []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Key
	for k := range s.objects {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Deleted are the objects deleted so far, in order (a namespace's
// contents after it).
func (s *Server) Deleted() []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deleted)
}

// Add stores obj as a create by another client would (UID and all),
// failing the test on a refusal; it returns the stored object's UID.
func (s *Server) Add(t testing.TB, resourceName string, obj runtime.Object) types.UID {
	t.Helper()
	r, ok := lookup(resourceName)
	if !ok {
		t.Fatalf("fakeapi: resource %q is not served", resourceName)
	}
	out, status := s.create(r, obj.(metav1.Object).GetNamespace(), obj.DeepCopyObject())
	if status != nil {
		t.Fatalf("fakeapi: add %s %s: %s", resourceName, obj.(metav1.Object).GetName(), status.Error())
	}
	return out.(metav1.Object).GetUID()
}

func lookup(name string) (resource, bool) {
	for _, r := range served {
		if r.name == name {
			return r, true
		}
	}
	return resource{}, false
}

func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if s.discovery(w, req) {
		return
	}
	r, ns, name, ok := route(req.URL.Path)
	if !ok {
		writeStatus(w, req, apierrors.NewNotFound(schema.GroupResource{Resource: req.URL.Path}, ""))
		return
	}
	switch {
	case req.Method == http.MethodGet && req.URL.Query().Get("watch") != "":
		writeStatus(w, req, apierrors.NewMethodNotSupported(schema.GroupResource{Group: r.gv.Group, Resource: r.name}, "watch"))
	case req.Method == http.MethodGet && name == "":
		s.list(w, req, r, ns)
	case req.Method == http.MethodGet:
		s.mu.Lock()
		obj, ok := s.objects[Key{r.name, ns, name}]
		s.mu.Unlock()
		if !ok {
			writeStatus(w, req, apierrors.NewNotFound(schema.GroupResource{Group: r.gv.Group, Resource: r.name}, name))
			return
		}
		writeObject(w, req, http.StatusOK, obj, r.gv)
	case req.Method == http.MethodPost && name == "":
		body, _ := io.ReadAll(req.Body)
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			writeStatus(w, req, apierrors.NewBadRequest(err.Error()))
			return
		}
		out, status := s.create(r, ns, obj)
		if status != nil {
			writeStatus(w, req, status)
			return
		}
		if s.OnCreate != nil {
			s.OnCreate(Key{r.name, ns, out.(metav1.Object).GetName()})
		}
		writeObject(w, req, http.StatusCreated, out, r.gv)
	case req.Method == http.MethodDelete && name != "":
		var opts metav1.DeleteOptions
		if body, _ := io.ReadAll(req.Body); len(body) > 0 {
			if err := decodeDeleteOptions(body, &opts); err != nil {
				writeStatus(w, req, apierrors.NewBadRequest(err.Error()))
				return
			}
		}
		out, status := s.delete(r, ns, name, opts)
		if status != nil {
			writeStatus(w, req, status)
			return
		}
		writeObject(w, req, http.StatusOK, out, r.gv)
	default:
		writeStatus(w, req, apierrors.NewMethodNotSupported(schema.GroupResource{Group: r.gv.Group, Resource: r.name}, req.Method))
	}
}

// create stores obj as r in namespace ns, as the API server would.
func (s *Server) create(r resource, ns string, obj runtime.Object) (runtime.Object, *apierrors.StatusError) {
	mo := obj.(metav1.Object)
	gr := schema.GroupResource{Group: r.gv.Group, Resource: r.name}
	if !r.namespaced {
		ns = ""
	}
	mo.SetNamespace(ns)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.namespaced {
		n, ok := s.objects[Key{"namespaces", "", ns}]
		if !ok {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, ns)
		}
		if n.(metav1.Object).GetDeletionTimestamp() != nil {
			return nil, apierrors.NewForbidden(gr, mo.GetName(), fmt.Errorf("namespace %s is being terminated", ns))
		}
	}
	k := Key{r.name, ns, mo.GetName()}
	if _, ok := s.objects[k]; ok {
		return nil, apierrors.NewAlreadyExists(gr, mo.GetName())
	}
	s.version++
	mo.SetUID(uuid.NewUUID())
	mo.SetResourceVersion(fmt.Sprint(s.version))
	mo.SetCreationTimestamp(metav1.NewTime(time.Now()))
	s.objects[k] = obj
	return obj.DeepCopyObject(), nil
}

// delete removes the object, refusing when a UID precondition does not
// match; a namespace takes its contents along.
func (s *Server) delete(r resource, ns, name string, opts metav1.DeleteOptions) (runtime.Object, *apierrors.StatusError) {
	gr := schema.GroupResource{Group: r.gv.Group, Resource: r.name}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := Key{r.name, ns, name}
	obj, ok := s.objects[k]
	if !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	uid := obj.(metav1.Object).GetUID()
	if p := opts.Preconditions; p != nil && p.UID != nil && *p.UID != uid {
		return nil, apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, uid))
	}
	if r.name == "namespaces" && s.Terminating {
		n := obj.(*corev1.Namespace)
		now := metav1.Now()
		n.DeletionTimestamp, n.Status.Phase = &now, corev1.NamespaceTerminating
		return obj.DeepCopyObject(), nil
	}
	delete(s.objects, k)
	s.deleted = append(s.deleted, k)
	if r.name == "namespaces" {
		var inside []Key
		for ik := range s.objects {
			if ik.Namespace == name {
				inside = append(inside, ik)
			}
		}
		slices.SortFunc(inside, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
		for _, ik := range inside {
			delete(s.objects, ik)
			s.deleted = append(s.deleted, ik)
		}
	}
	return obj, nil
}

// list answers a list of r in ns (every namespace when empty), filtered
// by the request's label selector.
func (s *Server) list(w http.ResponseWriter, req *http.Request, r resource, ns string) {
	sel, err := labels.Parse(req.URL.Query().Get("labelSelector"))
	if err != nil {
		writeStatus(w, req, apierrors.NewBadRequest(err.Error()))
		return
	}
	list, err := scheme.Scheme.New(r.gv.WithKind(r.kind + "List"))
	if err != nil {
		writeStatus(w, req, apierrors.NewInternalError(err))
		return
	}
	s.mu.Lock()
	var items []runtime.Object
	for k, o := range s.objects {
		if k.Resource == r.name && (ns == "" || k.Namespace == ns) && sel.Matches(labels.Set(o.(metav1.Object).GetLabels())) {
			items = append(items, o.DeepCopyObject())
		}
	}
	s.mu.Unlock()
	slices.SortFunc(items, func(a, b runtime.Object) int {
		return strings.Compare(a.(metav1.Object).GetName(), b.(metav1.Object).GetName())
	})
	if err := meta.SetList(list, items); err != nil {
		writeStatus(w, req, apierrors.NewInternalError(err))
		return
	}
	writeObject(w, req, http.StatusOK, list, r.gv)
}

// route reads /api/v1/... and /apis/<group>/<version>/... paths.
func route(path string) (r resource, ns, name string, ok bool) {
	var gv schema.GroupVersion
	var rest []string
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api" && parts[1] == "v1":
		gv, rest = schema.GroupVersion{Version: "v1"}, parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gv, rest = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		return resource{}, "", "", false
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		ns, rest = rest[1], rest[2:]
	}
	if len(rest) > 2 {
		return resource{}, "", "", false // subresources are not served
	}
	r, ok = lookup(rest[0])
	switch {
	case !ok || r.gv != gv:
		return resource{}, "", "", false
	case !r.namespaced && ns != "", r.namespaced && ns == "" && len(rest) == 2:
		return resource{}, "", "", false
	}
	if len(rest) == 2 {
		name = rest[1]
	}
	return r, ns, name, true
}

// discovery answers /version, /api, /apis and each group version's
// resource list.
func (s *Server) discovery(w http.ResponseWriter, req *http.Request) bool {
	p := strings.TrimSuffix(req.URL.Path, "/")
	switch p {
	case "/version":
		writeJSON(w, map[string]string{"major": "1", "minor": "37", "gitVersion": "v1.37.2"})
		return true
	case "/api":
		writeJSON(w, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
		return true
	case "/apis":
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		seen := map[string]bool{}
		for _, r := range served {
			if r.gv.Group == "" || seen[r.gv.Group] {
				continue
			}
			seen[r.gv.Group] = true
			gvd := metav1.GroupVersionForDiscovery{GroupVersion: r.gv.String(), Version: r.gv.Version}
			list.Groups = append(list.Groups, metav1.APIGroup{Name: r.gv.Group, Versions: []metav1.GroupVersionForDiscovery{gvd}, PreferredVersion: gvd})
		}
		writeJSON(w, list)
		return true
	}
	gv := strings.TrimPrefix(strings.TrimPrefix(p, "/api/"), "/apis/")
	var res []metav1.APIResource
	for _, r := range served {
		if r.gv.String() == gv {
			res = append(res, metav1.APIResource{Name: r.name, Kind: r.kind, Namespaced: r.namespaced, Verbs: metav1.Verbs{"create", "delete", "get", "list"}})
		}
	}
	if len(res) == 0 || (p != "/api/"+gv && p != "/apis/"+gv) {
		return false
	}
	writeJSON(w, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv, APIResources: res})
	return true
}

func decodeDeleteOptions(body []byte, opts *metav1.DeleteOptions) error {
	if body[0] == '{' {
		return json.Unmarshal(body, opts)
	}
	_, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, opts)
	return err
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, req *http.Request, err *apierrors.StatusError) {
	st := err.ErrStatus
	writeObject(w, req, int(st.Code), &st, schema.GroupVersion{Version: "v1"})
}

// writeObject answers in the media type the client asked for, protobuf
// for built-in kinds when it asks so.
func writeObject(w http.ResponseWriter, req *http.Request, code int, obj runtime.Object, gv schema.GroupVersion) {
	mediaType := runtime.ContentTypeJSON
	if strings.Contains(req.Header.Get("Accept"), runtime.ContentTypeProtobuf) {
		mediaType = runtime.ContentTypeProtobuf
	}
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, gv), obj)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(code)
	_, _ = w.Write(data)
}
