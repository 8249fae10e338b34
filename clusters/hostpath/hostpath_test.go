package hostpath

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient/k8s"
)

const testNode = "skewtest-worker"

func statefulSet(t *testing.T, objs []k8s.Object) *appsv1.StatefulSet {
	t.Helper()
	var found *appsv1.StatefulSet
	for _, o := range objs {
		if s, ok := o.(*appsv1.StatefulSet); ok {
			if found != nil {
				t.Fatalf("more than one StatefulSet: %s and %s", found.Name, s.Name)
			}
			found = s
		}
	}
	if found == nil {
		t.Fatal("no StatefulSet among the objects")
	}
	return found
}

func container(t *testing.T, sts *appsv1.StatefulSet, name string) *corev1.Container {
	t.Helper()
	for i := range sts.Spec.Template.Spec.Containers {
		if c := &sts.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q in StatefulSet %s", name, sts.Name)
	return nil
}

func volume(t *testing.T, sts *appsv1.StatefulSet, name string) *corev1.Volume {
	t.Helper()
	for i := range sts.Spec.Template.Spec.Volumes {
		if v := &sts.Spec.Template.Spec.Volumes[i]; v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %q in StatefulSet %s", name, sts.Name)
	return nil
}

func mount(t *testing.T, c *corev1.Container, volumeName string) *corev1.VolumeMount {
	t.Helper()
	for i := range c.VolumeMounts {
		if m := &c.VolumeMounts[i]; m.Name == volumeName {
			return m
		}
	}
	t.Fatalf("container %s does not mount %q", c.Name, volumeName)
	return nil
}

// flag returns the value of --name=value (or -name=value) in args.
func flag(t *testing.T, c *corev1.Container, name string) string {
	t.Helper()
	for _, a := range c.Args {
		for _, p := range []string{"--" + name + "=", "-" + name + "="} {
			if v, ok := strings.CutPrefix(a, p); ok {
				return v
			}
		}
	}
	t.Fatalf("container %s has no --%s in %q", c.Name, name, c.Args)
	return ""
}

func env(t *testing.T, c *corev1.Container, name string) string {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	t.Fatalf("container %s has no env %s", c.Name, name)
	return ""
}

var pinnedTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)

// TestImagesPinned: every image the pod runs, and every one Images lists,
// is a strict reference under registry.k8s.io/sig-storage/ with a vX.Y.Z
// tag, and the two sets are the same.
func TestImagesPinned(t *testing.T) {
	sts := statefulSet(t, Objects(testNode))
	var used []string
	for _, c := range sts.Spec.Template.Spec.Containers {
		used = append(used, c.Image)
	}
	for _, c := range sts.Spec.Template.Spec.InitContainers {
		used = append(used, c.Image)
	}
	for _, img := range append(slices.Clone(used), Images()...) {
		t.Run(img, func(t *testing.T) {
			tag, err := name.NewTag(img, name.StrictValidation)
			if err != nil {
				t.Fatalf("not a strict tagged reference: %v", err)
			}
			if got := tag.RegistryStr(); got != "registry.k8s.io" {
				t.Errorf("registry %q, want registry.k8s.io", got)
			}
			if !strings.HasPrefix(tag.RepositoryStr(), "sig-storage/") {
				t.Errorf("repository %q is not under sig-storage/", tag.RepositoryStr())
			}
			if !pinnedTag.MatchString(tag.TagStr()) {
				t.Errorf("tag %q is not vX.Y.Z", tag.TagStr())
			}
		})
	}
	slices.Sort(used)
	listed := slices.Sorted(slices.Values(Images()))
	if !slices.Equal(used, listed) {
		t.Errorf("images run %q, Images() lists %q", used, listed)
	}
}

// TestPinnedToNode: the one replica runs on the node asked for, whatever
// it is called.
func TestPinnedToNode(t *testing.T) {
	for _, node := range []string{"skewtest-worker", "kind-worker2", "n"} {
		t.Run(node, func(t *testing.T) {
			sts := statefulSet(t, Objects(node))
			if got := sts.Spec.Template.Spec.NodeSelector; len(got) != 1 || got[corev1.LabelHostname] != node {
				t.Errorf("nodeSelector %v, want only %s=%s", got, corev1.LabelHostname, node)
			}
			if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
				t.Errorf("replicas %v, want 1: the hostpath driver works on one node only", sts.Spec.Replicas)
			}
		})
	}
}

// TestSocketPaths: the plugin listens where every sidecar dials, and the
// registrar tells the kubelet the node path of that same socket.
func TestSocketPaths(t *testing.T) {
	sts := statefulSet(t, Objects(testNode))
	sock := volume(t, sts, "socket-dir")
	if sock.HostPath == nil {
		t.Fatal("socket-dir is not a hostPath volume")
	}
	plugin := container(t, sts, "hostpath")
	endpoint := env(t, plugin, "CSI_ENDPOINT")
	listen, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		t.Fatalf("CSI_ENDPOINT %q is not a unix socket", endpoint)
	}
	if flag(t, plugin, "endpoint") != "$(CSI_ENDPOINT)" {
		t.Errorf("plugin --endpoint does not use CSI_ENDPOINT")
	}
	if got := path.Join(mount(t, plugin, "socket-dir").MountPath, "csi.sock"); listen != got {
		t.Errorf("plugin listens on %s, not in socket-dir (%s)", listen, got)
	}

	registrar := container(t, sts, "node-driver-registrar")
	reg := flag(t, registrar, "kubelet-registration-path")
	if reg != "/var/lib/kubelet/plugins/csi-hostpath/csi.sock" {
		t.Errorf("--kubelet-registration-path=%s, want /var/lib/kubelet/plugins/csi-hostpath/csi.sock", reg)
	}
	if want := path.Join(sock.HostPath.Path, path.Base(listen)); reg != want {
		t.Errorf("--kubelet-registration-path=%s, but the plugin's socket is %s on the node", reg, want)
	}
	if reg != RegistrationPath {
		t.Errorf("RegistrationPath %s, registrar says %s", RegistrationPath, reg)
	}

	for _, name := range []string{"node-driver-registrar", "liveness-probe", "csi-attacher", "csi-provisioner"} {
		t.Run(name, func(t *testing.T) {
			c := container(t, sts, name)
			if got, want := flag(t, c, "csi-address"), path.Join(mount(t, c, "socket-dir").MountPath, path.Base(listen)); got != want {
				t.Errorf("--csi-address=%s, the plugin's socket is %s in this container", got, want)
			}
		})
	}
}

// TestMountPropagation pins upstream's mounts: Bidirectional exactly
// where the plugin mounts for the kubelet, at the kubelet's own paths.
func TestMountPropagation(t *testing.T) {
	sts := statefulSet(t, Objects(testNode))
	bidi := corev1.MountPropagationBidirectional
	tests := []struct {
		container, volume string
		want              *corev1.MountPropagationMode
		samePathAsNode    bool
	}{
		{"hostpath", "socket-dir", nil, false},
		{"hostpath", "mountpoint-dir", &bidi, true},
		{"hostpath", "plugins-dir", &bidi, true},
		{"hostpath", "csi-data-dir", nil, false},
		{"hostpath", "dev-dir", nil, true},
		{"node-driver-registrar", "socket-dir", nil, false},
		{"node-driver-registrar", "registration-dir", nil, false},
		{"node-driver-registrar", "csi-data-dir", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.container+"/"+tc.volume, func(t *testing.T) {
			c := container(t, sts, tc.container)
			m := mount(t, c, tc.volume)
			if !ptrEq(m.MountPropagation, tc.want) {
				t.Errorf("propagation %v, want %v", deref(m.MountPropagation), deref(tc.want))
			}
			if tc.samePathAsNode {
				if v := volume(t, sts, tc.volume); v.HostPath == nil || path.Clean(v.HostPath.Path) != path.Clean(m.MountPath) {
					t.Errorf("mounted at %s, but the node path is %v: the kubelet would not find the plugin's mounts", m.MountPath, v.HostPath)
				}
			}
		})
	}
	// The API refuses Bidirectional for unprivileged containers.
	for _, c := range sts.Spec.Template.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.MountPropagation != nil && *m.MountPropagation == bidi && (c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged) {
				t.Errorf("container %s mounts %s Bidirectional without being privileged", c.Name, m.Name)
			}
		}
	}
}

func ptrEq[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func only[T any](t *testing.T, objs []k8s.Object) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of type %T, want 1", len(found), *new(T))
	}
	return found[0]
}

// TestDriverName: the StorageClass provisions from the driver the CSIDriver
// describes and the plugin registers.
func TestDriverName(t *testing.T) {
	objs := Objects(testNode)
	sc := only[*storagev1.StorageClass](t, objs)
	drv := only[*storagev1.CSIDriver](t, objs)
	plugin := container(t, statefulSet(t, objs), "hostpath")
	got := map[string]string{
		"StorageClass provisioner": sc.Provisioner,
		"CSIDriver name":           drv.Name,
		"plugin --drivername":      flag(t, plugin, "drivername"),
	}
	for what, v := range got {
		if v != DriverName {
			t.Errorf("%s is %q, want %q", what, v, DriverName)
		}
	}
	if sc.Name != StorageClassName {
		t.Errorf("StorageClass %q, want %q", sc.Name, StorageClassName)
	}
}

// TestUpstreamSpecs pins the CSIDriver, the StorageClass and the
// containers to upstream's (and to this package's deliberate changes).
func TestUpstreamSpecs(t *testing.T) {
	objs := Objects(testNode)
	drv := only[*storagev1.CSIDriver](t, objs)
	sts := statefulSet(t, objs)
	if drv.Spec.AttachRequired == nil || !*drv.Spec.AttachRequired {
		t.Errorf("attachRequired %v, want true (upstream leaves it to the API default)", deref(drv.Spec.AttachRequired))
	}
	if drv.Spec.PodInfoOnMount == nil || !*drv.Spec.PodInfoOnMount {
		t.Errorf("podInfoOnMount %v, want true", deref(drv.Spec.PodInfoOnMount))
	}
	if want := []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}; !slices.Equal(drv.Spec.VolumeLifecycleModes, want) {
		t.Errorf("volumeLifecycleModes %v, want %v", drv.Spec.VolumeLifecycleModes, want)
	}
	if drv.Spec.FSGroupPolicy == nil || *drv.Spec.FSGroupPolicy != storagev1.FileFSGroupPolicy {
		t.Errorf("fsGroupPolicy %v, want File", deref(drv.Spec.FSGroupPolicy))
	}

	var names []string
	for _, c := range sts.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	want := []string{"hostpath", "node-driver-registrar", "liveness-probe", "csi-provisioner"}
	if *drv.Spec.AttachRequired {
		// Without an attacher no VolumeAttachment is ever marked attached
		// and every mount waits forever.
		want = append(want, "csi-attacher")
	}
	if !sameSet(names, want) {
		t.Errorf("containers %q, want %q", names, want)
	}

	plugin := container(t, sts, "hostpath")
	if sc := plugin.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Error("the plugin container is not privileged")
	}
	if got := flag(t, plugin, "nodeid"); got != "$(KUBE_NODE_NAME)" {
		t.Errorf("--nodeid=%s, want $(KUBE_NODE_NAME)", got)
	}
	var nodeEnv *corev1.EnvVar
	for i := range plugin.Env {
		if plugin.Env[i].Name == "KUBE_NODE_NAME" {
			nodeEnv = &plugin.Env[i]
		}
	}
	if nodeEnv == nil || nodeEnv.ValueFrom == nil || nodeEnv.ValueFrom.FieldRef == nil || nodeEnv.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("KUBE_NODE_NAME is %+v, want the downward API's spec.nodeName", nodeEnv)
	}
	if got := flag(t, container(t, sts, "csi-provisioner"), "feature-gates"); got != "Topology=true" {
		t.Errorf("provisioner --feature-gates=%s, want Topology=true", got)
	}
	if got, want := flag(t, container(t, sts, "liveness-probe"), "health-port"), fmt.Sprint(plugin.Ports[0].ContainerPort); got != want {
		t.Errorf("livenessprobe serves on %s, the plugin's probe asks port %s", got, want)
	}

	vols := map[string]struct {
		path string
		typ  corev1.HostPathType
	}{
		"socket-dir":       {"/var/lib/kubelet/plugins/csi-hostpath", corev1.HostPathDirectoryOrCreate},
		"mountpoint-dir":   {"/var/lib/kubelet/pods", corev1.HostPathDirectoryOrCreate},
		"registration-dir": {"/var/lib/kubelet/plugins_registry", corev1.HostPathDirectory},
		"plugins-dir":      {"/var/lib/kubelet/plugins", corev1.HostPathDirectory},
		"csi-data-dir":     {"/var/lib/csi-hostpath-data/", corev1.HostPathDirectoryOrCreate},
		"dev-dir":          {"/dev", corev1.HostPathDirectory},
	}
	if len(sts.Spec.Template.Spec.Volumes) != len(vols) {
		t.Errorf("%d volumes, want %d", len(sts.Spec.Template.Spec.Volumes), len(vols))
	}
	for n, w := range vols {
		v := volume(t, sts, n)
		if v.HostPath == nil || v.HostPath.Path != w.path || v.HostPath.Type == nil || *v.HostPath.Type != w.typ {
			t.Errorf("volume %s is %+v, want hostPath %s (%s)", n, v.HostPath, w.path, w.typ)
		}
	}

	sc := only[*storagev1.StorageClass](t, objs)
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("volumeBindingMode %v, want WaitForFirstConsumer", deref(sc.VolumeBindingMode))
	}
	if sc.ReclaimPolicy == nil || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("reclaimPolicy %v, want Delete", deref(sc.ReclaimPolicy))
	}
	if sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion {
		t.Error("allowVolumeExpansion is on but no resizer runs")
	}
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

type objKey struct{ kind, namespace, name string }

func keyOf(t *testing.T, o k8s.Object) objKey {
	t.Helper()
	gvks, _, err := scheme.Scheme.ObjectKinds(o)
	if err != nil {
		t.Fatalf("%T is not in the client-go scheme: %v", o, err)
	}
	return objKey{gvks[0].Kind, o.GetNamespace(), o.GetName()}
}

// TestRBACReferences: the pod's service account exists, every binding
// binds a role and a service account that exist, and every role is bound.
func TestRBACReferences(t *testing.T) {
	objs := Objects(testNode)
	have := map[objKey]bool{}
	for _, o := range objs {
		have[keyOf(t, o)] = true
	}
	sts := statefulSet(t, objs)
	sa := sts.Spec.Template.Spec.ServiceAccountName
	if sa == "" || !have[objKey{"ServiceAccount", sts.Namespace, sa}] {
		t.Errorf("the plugin pod runs as ServiceAccount %s/%q, which is not among the objects", sts.Namespace, sa)
	}
	bound := map[objKey]bool{}
	check := func(binding string, ref rbacv1.RoleRef, ns string, subjects []rbacv1.Subject) {
		if ref.APIGroup != rbacv1.GroupName {
			t.Errorf("%s: roleRef apiGroup %q", binding, ref.APIGroup)
		}
		want := objKey{ref.Kind, "", ref.Name}
		if ref.Kind == "Role" {
			want.namespace = ns
		}
		if !have[want] {
			t.Errorf("%s refers to %s %q, which is not among the objects", binding, ref.Kind, ref.Name)
		}
		bound[want] = true
		if len(subjects) == 0 {
			t.Errorf("%s binds nobody", binding)
		}
		for _, s := range subjects {
			sns := s.Namespace
			if sns == "" {
				sns = ns
			}
			if s.Kind != rbacv1.ServiceAccountKind || !have[objKey{"ServiceAccount", sns, s.Name}] {
				t.Errorf("%s binds %s %s/%s, which is not among the objects", binding, s.Kind, sns, s.Name)
			}
		}
	}
	for _, o := range objs {
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			if b.RoleRef.Kind != "ClusterRole" {
				t.Errorf("ClusterRoleBinding %s refers to a %s", b.Name, b.RoleRef.Kind)
			}
			check("ClusterRoleBinding "+b.Name, b.RoleRef, "", b.Subjects)
		case *rbacv1.RoleBinding:
			check("RoleBinding "+b.Namespace+"/"+b.Name, b.RoleRef, b.Namespace, b.Subjects)
		}
	}
	for k := range have {
		if (k.kind == "Role" || k.kind == "ClusterRole") && !bound[k] {
			t.Errorf("%s %s is bound by nothing", k.kind, k.name)
		}
	}
}

// TestSidecarPermissions: the plugin's service account may do what the
// provisioner and the attacher do on the way to a mounted volume.
func TestSidecarPermissions(t *testing.T) {
	objs := Objects(testNode)
	sa := statefulSet(t, objs).Spec.Template.Spec.ServiceAccountName
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	roles := map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			clusterRoles[r.Name] = r.Rules
		case *rbacv1.Role:
			roles[r.Namespace+"/"+r.Name] = r.Rules
		}
	}
	isPlugin := func(subjects []rbacv1.Subject, ns string) bool {
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && (s.Namespace == Namespace || (s.Namespace == "" && ns == Namespace)) {
				return true
			}
		}
		return false
	}
	var cluster, inNS []rbacv1.PolicyRule
	for _, o := range objs {
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			if isPlugin(b.Subjects, "") {
				cluster = append(cluster, clusterRoles[b.RoleRef.Name]...)
			}
		case *rbacv1.RoleBinding:
			if isPlugin(b.Subjects, b.Namespace) && b.Namespace == Namespace {
				inNS = append(inNS, roles[b.Namespace+"/"+b.RoleRef.Name]...)
			}
		}
	}
	allows := func(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	tests := []struct {
		namespaced             bool
		group, resource, verbs string
	}{
		// external-provisioner
		{false, "", "persistentvolumes", "get list watch create patch delete"},
		{false, "", "persistentvolumeclaims", "get list watch update"},
		{false, "storage.k8s.io", "storageclasses", "get list watch"},
		{false, "", "events", "create patch"},
		{false, "storage.k8s.io", "csinodes", "get list watch"},
		{false, "", "nodes", "get list watch"},
		{false, "storage.k8s.io", "volumeattachments", "get list watch patch"},
		{true, "coordination.k8s.io", "leases", "get list watch create update delete"},
		// external-attacher
		{false, "", "persistentvolumes", "patch"},
		{false, "storage.k8s.io", "volumeattachments/status", "patch"},
	}
	for _, tc := range tests {
		for _, verb := range strings.Fields(tc.verbs) {
			rules := cluster
			if tc.namespaced {
				rules = append(slices.Clone(cluster), inNS...)
			}
			if !allows(rules, tc.group, tc.resource, verb) {
				t.Errorf("ServiceAccount %s/%s may not %s %s.%s", Namespace, sa, verb, tc.resource, tc.group)
			}
		}
	}
	for _, o := range objs {
		if r, ok := o.(*rbacv1.ClusterRole); ok {
			for _, rule := range r.Rules {
				if slices.Contains(rule.Verbs, "*") || slices.Contains(rule.Resources, "*") || slices.Contains(rule.APIGroups, "*") {
					t.Errorf("ClusterRole %s has a wildcard rule %+v", r.Name, rule)
				}
			}
		}
	}
}

// clusterScoped are the kinds Objects may return that live outside a
// namespace.
var clusterScoped = map[string]bool{"Namespace": true, "CSIDriver": true, "ClusterRole": true, "ClusterRoleBinding": true, "StorageClass": true}

// TestOrder: an object comes after the objects it needs.
func TestOrder(t *testing.T) {
	objs := Objects(testNode)
	index := map[objKey]int{}
	for i, o := range objs {
		k := keyOf(t, o)
		if _, dup := index[k]; dup {
			t.Errorf("%v appears twice", k)
		}
		index[k] = i
	}
	if len(objs) == 0 || keyOf(t, objs[0]) != (objKey{"Namespace", "", Namespace}) {
		t.Fatalf("the first object is not Namespace %s", Namespace)
	}
	sts := statefulSet(t, objs)
	stsAt := index[keyOf(t, sts)]
	for k, i := range index {
		if k.kind == "ServiceAccount" || k.kind == "CSIDriver" || strings.HasSuffix(k.kind, "Role") || strings.HasSuffix(k.kind, "RoleBinding") {
			if i > stsAt {
				t.Errorf("%s %s comes after the StatefulSet that needs it", k.kind, k.name)
			}
		}
	}
	for _, o := range objs {
		var ref objKey
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			ref = objKey{"ClusterRole", "", b.RoleRef.Name}
		case *rbacv1.RoleBinding:
			ref = objKey{"Role", b.Namespace, b.RoleRef.Name}
		default:
			continue
		}
		if i, ok := index[ref]; ok && i > index[keyOf(t, o)] {
			t.Errorf("%s %s comes after its binding %s", ref.kind, ref.name, o.GetName())
		}
	}
}

// TestRoundTrip: every object encodes and decodes through client-go's
// scheme, as JSON and as protobuf (what the client sends), unchanged.
func TestRoundTrip(t *testing.T) {
	for _, o := range Objects(testNode) {
		gvks, _, err := scheme.Scheme.ObjectKinds(o)
		if err != nil {
			t.Fatalf("%T: %v", o, err)
		}
		want := gvks[0]
		for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
			t.Run(want.Kind+"/"+o.GetName()+"/"+mediaType, func(t *testing.T) {
				info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
				if !ok {
					t.Fatalf("no serializer for %s", mediaType)
				}
				orig := o.DeepCopyObject()
				data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, want.GroupVersion()), orig)
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				back, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if *gvk != want {
					t.Errorf("decoded as %v, want %v", gvk, want)
				}
				back.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
				orig.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
				if !apiequality.Semantic.DeepEqual(orig, back) {
					t.Errorf("changed by the round trip:\n got %+v\nwant %+v", back, orig)
				}
			})
		}
	}
}

// TestValid runs the API's own rules that apimachinery offers without
// k8s.io/kubernetes: names, labels, selectors, ports, env, references
// within the pod.
func TestValid(t *testing.T) {
	objs := Objects(testNode)
	var errs field.ErrorList
	add := func(p *field.Path, value any, msgs []string) {
		for _, m := range msgs {
			errs = append(errs, field.Invalid(p, value, m))
		}
	}
	for _, o := range objs {
		k := keyOf(t, o)
		p := field.NewPath(k.kind + " " + o.GetName())
		switch {
		case k.kind == "Namespace":
			add(p.Child("metadata", "name"), o.GetName(), validation.IsDNS1123Label(o.GetName()))
		case strings.Contains(k.kind, "Role"):
			// RBAC names are path segments only.
			if o.GetName() == "" || strings.ContainsAny(o.GetName(), "/%") {
				errs = append(errs, field.Invalid(p.Child("metadata", "name"), o.GetName(), "not a path segment"))
			}
		default:
			add(p.Child("metadata", "name"), o.GetName(), validation.IsDNS1123Subdomain(o.GetName()))
		}
		if clusterScoped[k.kind] != (o.GetNamespace() == "") {
			errs = append(errs, field.Invalid(p.Child("metadata", "namespace"), o.GetNamespace(), "wrong scope"))
		}
		if !clusterScoped[k.kind] && o.GetNamespace() != Namespace {
			errs = append(errs, field.Invalid(p.Child("metadata", "namespace"), o.GetNamespace(), "not in "+Namespace))
		}
		errs = append(errs, metav1validation.ValidateLabels(o.GetLabels(), p.Child("metadata", "labels"))...)

		switch v := o.(type) {
		case *storagev1.CSIDriver:
			if len(v.Name) > 63 {
				errs = append(errs, field.TooLong(p.Child("metadata", "name"), v.Name, 63))
			}
		case *storagev1.StorageClass:
			add(p.Child("provisioner"), v.Provisioner, validation.IsQualifiedName(strings.ToLower(v.Provisioner)))
		case *rbacv1.ClusterRole:
			errs = append(errs, validRules(p, v.Rules)...)
		case *rbacv1.Role:
			errs = append(errs, validRules(p, v.Rules)...)
		case *appsv1.StatefulSet:
			errs = append(errs, validStatefulSet(p, v)...)
		}
	}
	for _, e := range errs {
		t.Error(e)
	}
}

func validRules(p *field.Path, rules []rbacv1.PolicyRule) field.ErrorList {
	var errs field.ErrorList
	for i, r := range rules {
		rp := p.Child("rules").Index(i)
		if len(r.Verbs) == 0 {
			errs = append(errs, field.Required(rp.Child("verbs"), ""))
		}
		if len(r.Resources) == 0 || len(r.APIGroups) == 0 {
			errs = append(errs, field.Required(rp.Child("resources"), "resource rules need apiGroups and resources"))
		}
	}
	return errs
}

func validStatefulSet(p *field.Path, sts *appsv1.StatefulSet) field.ErrorList {
	var errs field.ErrorList
	add := func(p *field.Path, value any, msgs []string) {
		for _, m := range msgs {
			errs = append(errs, field.Invalid(p, value, m))
		}
	}
	spec := p.Child("spec")
	add(spec.Child("serviceName"), sts.Spec.ServiceName, validation.IsDNS1123Label(sts.Spec.ServiceName))
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		errs = append(errs, field.Invalid(spec.Child("selector"), sts.Spec.Selector, err.Error()))
	} else if sel.Empty() || !sel.Matches(labels.Set(sts.Spec.Template.Labels)) {
		errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), sts.Spec.Template.Labels, "does not match the selector"))
	}
	errs = append(errs, metav1validation.ValidateLabels(sts.Spec.Template.Labels, spec.Child("template", "metadata", "labels"))...)

	pod := sts.Spec.Template.Spec
	pp := spec.Child("template", "spec")
	add(pp.Child("serviceAccountName"), pod.ServiceAccountName, validation.IsDNS1123Subdomain(pod.ServiceAccountName))
	for k, v := range pod.NodeSelector {
		add(pp.Child("nodeSelector").Key(k), k, validation.IsQualifiedName(k))
		add(pp.Child("nodeSelector").Key(k), v, validation.IsValidLabelValue(v))
	}
	volumes := map[string]bool{}
	for i, v := range pod.Volumes {
		vp := pp.Child("volumes").Index(i)
		add(vp.Child("name"), v.Name, validation.IsDNS1123Label(v.Name))
		if volumes[v.Name] {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		volumes[v.Name] = true
		if v.HostPath != nil && !path.IsAbs(v.HostPath.Path) {
			errs = append(errs, field.Invalid(vp.Child("hostPath", "path"), v.HostPath.Path, "not absolute"))
		}
	}
	containers := map[string]bool{}
	for i, c := range pod.Containers {
		cp := pp.Child("containers").Index(i)
		add(cp.Child("name"), c.Name, validation.IsDNS1123Label(c.Name))
		if containers[c.Name] {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		}
		containers[c.Name] = true
		ports := map[string]bool{}
		for j, port := range c.Ports {
			add(cp.Child("ports").Index(j).Child("name"), port.Name, validation.IsValidPortName(port.Name))
			add(cp.Child("ports").Index(j).Child("containerPort"), port.ContainerPort, validation.IsValidPortNum(int(port.ContainerPort)))
			if ports[port.Name] {
				errs = append(errs, field.Duplicate(cp.Child("ports").Index(j).Child("name"), port.Name))
			}
			ports[port.Name] = true
		}
		if pr := c.LivenessProbe; pr != nil && pr.HTTPGet != nil && pr.HTTPGet.Port.StrVal != "" && !ports[pr.HTTPGet.Port.StrVal] {
			errs = append(errs, field.NotFound(cp.Child("livenessProbe", "httpGet", "port"), pr.HTTPGet.Port.StrVal))
		}
		for j, e := range c.Env {
			add(cp.Child("env").Index(j).Child("name"), e.Name, validation.IsEnvVarName(e.Name))
		}
		mountPaths := map[string]bool{}
		for j, m := range c.VolumeMounts {
			mp := cp.Child("volumeMounts").Index(j)
			if !volumes[m.Name] {
				errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
			}
			if !path.IsAbs(m.MountPath) || mountPaths[m.MountPath] {
				errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "not absolute, or mounted twice"))
			}
			mountPaths[m.MountPath] = true
		}
	}
	return errs
}

// fakeAPI is just enough of an API server for Deploy: discovery for the
// kinds it creates, create (recorded; the answer is up to the test), and
// get of the StatefulSet, the CSINode and the plugin's pods.
type fakeAPI struct {
	t *testing.T
	// create answers a create: 0 for success, else the status code.
	create func(kind, name string) int
	// ready and registered are what the StatefulSet and CSINode show.
	ready, registered bool
	pods              []corev1.Pod

	mu      sync.Mutex
	created []objKey
	paths   []string
	// dryRuns are the creates with dryRun=All, which store nothing.
	dryRuns []objKey
}

var fakeResources = map[string][]metav1.APIResource{
	"v1": {
		{Name: "namespaces", Kind: "Namespace"},
		{Name: "serviceaccounts", Kind: "ServiceAccount", Namespaced: true},
		{Name: "pods", Kind: "Pod", Namespaced: true},
	},
	"apps/v1": {{Name: "statefulsets", Kind: "StatefulSet", Namespaced: true}},
	"rbac.authorization.k8s.io/v1": {
		{Name: "clusterroles", Kind: "ClusterRole"},
		{Name: "clusterrolebindings", Kind: "ClusterRoleBinding"},
		{Name: "roles", Kind: "Role", Namespaced: true},
		{Name: "rolebindings", Kind: "RoleBinding", Namespaced: true},
	},
	"storage.k8s.io/v1": {
		{Name: "csidrivers", Kind: "CSIDriver"},
		{Name: "storageclasses", Kind: "StorageClass"},
		{Name: "csinodes", Kind: "CSINode"},
	},
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/api":
		writeJSON(w, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
		return
	case p == "/apis":
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		for gv := range fakeResources {
			if g, v, ok := strings.Cut(gv, "/"); ok {
				gvd := metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: v}
				list.Groups = append(list.Groups, metav1.APIGroup{Name: g, Versions: []metav1.GroupVersionForDiscovery{gvd}, PreferredVersion: gvd})
			}
		}
		writeJSON(w, list)
		return
	}
	gv := strings.TrimPrefix(strings.TrimPrefix(p, "/api/"), "/apis/")
	if res, ok := fakeResources[gv]; ok {
		res = slices.Clone(res)
		for i := range res {
			res[i].Verbs = metav1.Verbs{"create", "get", "list"}
		}
		writeJSON(w, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv, APIResources: res})
		return
	}

	switch r.Method {
	case http.MethodPost:
		body, _ := io.ReadAll(r.Body)
		obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			f.t.Errorf("fake API: POST %s: %v", p, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mo := obj.(metav1.Object)
		f.mu.Lock()
		if r.URL.Query().Get("dryRun") == metav1.DryRunAll {
			f.dryRuns = append(f.dryRuns, objKey{gvk.Kind, mo.GetNamespace(), mo.GetName()})
		} else {
			f.created = append(f.created, objKey{gvk.Kind, mo.GetNamespace(), mo.GetName()})
			f.paths = append(f.paths, p)
		}
		f.mu.Unlock()
		if code := f.create(gvk.Kind, mo.GetName()); code != 0 {
			status := apierrors.NewForbidden(schema.GroupResource{Resource: path.Base(p)}, mo.GetName(), fmt.Errorf("not allowed"))
			if code == http.StatusConflict {
				status = apierrors.NewAlreadyExists(schema.GroupResource{Resource: path.Base(p)}, mo.GetName())
			}
			writeObject(w, r, code, &status.ErrStatus, schema.GroupVersion{Version: "v1"})
			return
		}
		writeObject(w, r, http.StatusCreated, obj, gvk.GroupVersion())
	case http.MethodGet:
		switch {
		case p == "/apis/apps/v1/namespaces/"+Namespace+"/statefulsets/"+StatefulSetName:
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: StatefulSetName, Namespace: Namespace}}
			if f.ready {
				sts.Status.ReadyReplicas = 1
			}
			writeObject(w, r, http.StatusOK, sts, appsv1.SchemeGroupVersion)
		case p == "/apis/storage.k8s.io/v1/csinodes/"+testNode:
			n := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
			n.Spec.Drivers = []storagev1.CSINodeDriver{{Name: "other.csi.k8s.io", NodeID: testNode}}
			if f.registered {
				n.Spec.Drivers = append(n.Spec.Drivers, storagev1.CSINodeDriver{Name: DriverName, NodeID: testNode})
			}
			writeObject(w, r, http.StatusOK, n, storagev1.SchemeGroupVersion)
		case p == "/api/v1/namespaces/"+Namespace+"/pods":
			if sel := r.URL.Query().Get("labelSelector"); !strings.Contains(sel, "app.kubernetes.io/component=plugin") {
				f.t.Errorf("fake API: pods listed with selector %q", sel)
			}
			writeObject(w, r, http.StatusOK, &corev1.PodList{Items: f.pods}, corev1.SchemeGroupVersion)
		default:
			status := apierrors.NewNotFound(schema.GroupResource{Resource: path.Dir(p)}, path.Base(p))
			writeObject(w, r, http.StatusNotFound, &status.ErrStatus, schema.GroupVersion{Version: "v1"})
		}
	default:
		f.t.Errorf("fake API: unexpected %s %s", r.Method, p)
		http.Error(w, "unexpected", http.StatusMethodNotAllowed)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// writeObject answers in the media type the client asked for, protobuf
// for built-in kinds by default.
func writeObject(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object, gv schema.GroupVersion) {
	mediaType := runtime.ContentTypeJSON
	if strings.Contains(r.Header.Get("Accept"), runtime.ContentTypeProtobuf) {
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

func (f *fakeAPI) start(t *testing.T) *rest.Config {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// TestDeploy runs Deploy against the fake API server: what it creates, in
// which order and where, what it tolerates, and what its errors say.
func TestDeploy(t *testing.T) {
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 200 * time.Millisecond
	imagePull := []corev1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: StatefulSetName + "-0", Namespace: Namespace},
		Spec:       corev1.PodSpec{NodeName: testNode},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "hostpath", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}},
			{Name: "csi-provisioner", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}},
	}}
	tests := []struct {
		name              string
		create            func(kind, name string) int
		ready, registered bool
		pods              []corev1.Pod
		wantErr           []string // substrings; none means success
		notErr            []string // substrings the error must not have
		// onlyCreated, when set, are the kinds of all objects really
		// created: a rejected dry run must leave the driver unbuilt.
		onlyCreated []string
		// wantLog is a substring of the progress logged while waiting.
		wantLog string
	}{
		{name: "fresh cluster", ready: true, registered: true},
		{
			name:   "everything exists already",
			create: func(string, string) int { return http.StatusConflict },
			ready:  true, registered: true,
		},
		{
			name: "create refused",
			create: func(kind, _ string) int {
				if kind == "ClusterRole" {
					return http.StatusForbidden
				}
				return 0
			},
			ready: true, registered: true,
			wantErr:     []string{"the API server rejects 2 of its objects (server-side dry run)", "ClusterRole " + provisionerClusterRole + ":", "forbidden"},
			onlyCreated: []string{"Namespace"},
		},
		{
			name:    "images cannot be pulled",
			pods:    imagePull,
			wantErr: []string{"StatefulSet " + Namespace + "/" + StatefulSetName, testNode, "hostpath: ImagePullBackOff", "registry.k8s.io", "KIND_CSI=skewtest"},
			wantLog: `msg="waiting for the CSI hostpath driver's pod"`,
		},
		{
			name:    "never registers",
			ready:   true,
			wantErr: []string{"CSINode " + testNode + " does not list " + DriverName, "node-driver-registrar"},
			notErr:  []string{"KIND_CSI"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			f := &fakeAPI{t: t, create: tc.create, ready: tc.ready, registered: tc.registered, pods: tc.pods}
			if f.create == nil {
				f.create = func(string, string) int { return 0 }
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sc, err := Deploy(ctx, f.start(t), testNode, 800*time.Millisecond, logger)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Deploy: %v", err)
				}
				if sc != StorageClassName {
					t.Errorf("Deploy returned StorageClass %q, want %q", sc, StorageClassName)
				}
				var want []objKey
				for _, o := range Objects(testNode) {
					want = append(want, keyOf(t, o))
				}
				if !slices.Equal(f.created, want) {
					t.Errorf("created, in order:\n%v\nwant\n%v", f.created, want)
				}
				if !slices.Equal(f.dryRuns, want[1:]) {
					t.Errorf("dry-run before creating, in order:\n%v\nwant every object but the namespace\n%v", f.dryRuns, want[1:])
				}
				for i, p := range f.paths {
					if clusterScoped[f.created[i].kind] == strings.Contains(p, "/namespaces/"+Namespace+"/") {
						t.Errorf("%v created at %s", f.created[i], p)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("Deploy succeeded, want an error with %q", tc.wantErr)
			}
			t.Logf("Deploy: %v", err)
			if tc.wantLog != "" && !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("progress log %q does not say %q", logs.String(), tc.wantLog)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if tc.onlyCreated != nil {
				var kinds []string
				for _, k := range f.created {
					kinds = append(kinds, k.kind)
				}
				if !slices.Equal(kinds, tc.onlyCreated) {
					t.Errorf("created %v after a failure; want only %v", f.created, tc.onlyCreated)
				}
			}
			for _, s := range tc.notErr {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q says %q", err, s)
				}
			}
		})
	}
}

// TestDeployCanceled: when the caller gives up, the error is the caller's,
// not advice about registries.
func TestDeployCanceled(t *testing.T) {
	f := &fakeAPI{t: t, create: func(string, string) int { return 0 }}
	cfg := f.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	_, err := Deploy(ctx, cfg, testNode, time.Minute, nil)
	if err == nil {
		t.Fatal("Deploy succeeded with a StatefulSet that never gets ready")
	}
	if strings.Contains(err.Error(), "KIND_CSI") {
		t.Errorf("error %q blames the registry for a canceled context", err)
	}
	if !strings.Contains(err.Error(), "deploy CSI hostpath driver: StatefulSet") {
		t.Errorf("error %q does not say what was awaited", err)
	}
}

// syncBuffer is a bytes.Buffer the waiting goroutine and the test may
// share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
