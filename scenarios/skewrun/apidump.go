package skewrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/reports"
)

// apiDumpTimeout bounds reading the API objects for a run's evidence; it
// runs after the run, and maybe after its deadline.
const apiDumpTimeout = 30 * time.Second

// apiScope is what of a cluster the run shares with its owner goes into
// the dump: the run's namespaces (its pods, events, claims and
// StatefulSets), the PVs bound to claims there and their
// VolumeAttachments, and the run's test nodes. The owner's namespaces,
// volumes and nodes are theirs, and the artifacts are uploaded. A nil
// scope is a cluster of the run's own: everything.
type apiScope struct {
	namespaces []string
	nodes      []string
}

// apiScope is nil for a cluster of the run's own, and on a shared cluster
// (capabilities.WithSharedCluster) the namespaces the run's scenarios
// used and its test nodes. Test nodes it cannot name are left out of the
// dump, with a warning.
func (c *runCluster) apiScope(ctx context.Context) *apiScope {
	if _, ok := c.Provider.(capabilities.WithSharedCluster); !ok {
		return nil
	}
	c.leftMu.Lock()
	scope := &apiScope{namespaces: slices.Sorted(slices.Values(c.namespaces))}
	c.leftMu.Unlock()
	ns, err := c.Provider.TestNodes(ctx)
	if err != nil {
		c.v.Options.Logger.Warn("the API dump leaves out the test nodes: they could not be named", "err", err)
	}
	for _, n := range ns {
		scope.nodes = append(scope.nodes, n.String())
	}
	return scope
}

// apiDumps are the objects every provider's run keeps as evidence, one
// YAML file each in the logs' api/ directory: what the control plane
// thought of the pods and their volumes when the run ended. A pod that
// never ran is explained here (its conditions, the scheduler's and the
// controllers' events), not in the node's logs. Secrets are never read.
// A namespaced kind is listed in each of the scope's namespaces (ns is
// NamespaceAll without a scope); a cluster-scoped one is listed whole and
// cut down to the scope (keep).
var apiDumps = []struct {
	file       string
	namespaced bool
	list       func(ctx context.Context, cs kubernetes.Interface, ns string) (runtime.Object, error)
}{
	{"pods.yaml", true, func(ctx context.Context, cs kubernetes.Interface, ns string) (runtime.Object, error) {
		return cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	}},
	{"events.yaml", true, func(ctx context.Context, cs kubernetes.Interface, ns string) (runtime.Object, error) {
		return cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	}},
	{"persistentvolumeclaims.yaml", true, func(ctx context.Context, cs kubernetes.Interface, ns string) (runtime.Object, error) {
		return cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	}},
	{"persistentvolumes.yaml", false, func(ctx context.Context, cs kubernetes.Interface, _ string) (runtime.Object, error) {
		return cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	}},
	{"volumeattachments.yaml", false, func(ctx context.Context, cs kubernetes.Interface, _ string) (runtime.Object, error) {
		return cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	}},
	{"statefulsets.yaml", true, func(ctx context.Context, cs kubernetes.Interface, ns string) (runtime.Object, error) {
		return cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	}},
	{"nodes.yaml", false, func(ctx context.Context, cs kubernetes.Interface, _ string) (runtime.Object, error) {
		return cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	}},
}

// dumpAPIObjects writes apiDumps into dir/api, each file cut at limit
// bytes (saying so), of scope (nil: everything), with no environment
// variable's value. It is called before teardown, so it sees the objects
// the run left.
func dumpAPIObjects(ctx context.Context, cs kubernetes.Interface, dir string, scope *apiScope, limit int64) error {
	ctx, cancel := context.WithTimeout(ctx, apiDumpTimeout)
	defer cancel()
	dir = filepath.Join(dir, "api")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The scope's PVs, by name: their VolumeAttachments are the run's
	// too. PVs come before VolumeAttachments in apiDumps.
	pvs := map[string]bool{}
	var errs []error
	for _, d := range apiDumps {
		if d.namespaced && scope != nil && len(scope.namespaces) == 0 {
			if err := os.WriteFile(filepath.Join(dir, d.file), []byte(noNamespaceDump), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", d.file, err))
			}
			continue
		}
		obj, err := listScoped(ctx, cs, d.namespaced, d.list, scope)
		if err == nil {
			err = keepScoped(obj, scope, pvs)
		}
		if err == nil {
			err = writeDump(filepath.Join(dir, d.file), obj, limit)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.file, err))
		}
	}
	return errors.Join(errs...)
}

// noNamespaceDump is a namespaced kind's dump from a shared cluster where
// the run made no namespace: nothing of it is the run's.
const noNamespaceDump = "# The run made no namespace in this shared cluster: none of its objects are the run's.\n"

// listScoped lists a kind in each of the scope's namespaces (at least
// one), as one list; everywhere without a scope or for a cluster-scoped
// kind.
func listScoped(ctx context.Context, cs kubernetes.Interface, namespaced bool, list func(context.Context, kubernetes.Interface, string) (runtime.Object, error), scope *apiScope) (runtime.Object, error) {
	if scope == nil || !namespaced {
		return list(ctx, cs, metav1.NamespaceAll)
	}
	var out runtime.Object
	var items []runtime.Object
	for _, ns := range scope.namespaces {
		l, err := list(ctx, cs, ns)
		if err != nil {
			return nil, err
		}
		more, err := meta.ExtractList(l)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = l
		}
		items = append(items, more...)
	}
	return out, meta.SetList(out, items)
}

// keepScoped cuts a cluster-scoped list down to the scope (PVs bound to
// its namespaces, recorded in pvs; their VolumeAttachments; its nodes),
// and blanks what the dump must not carry whatever the scope: every
// environment variable's value (a password or token set inline) and the
// last-applied annotation that repeats them.
func keepScoped(obj runtime.Object, scope *apiScope, pvs map[string]bool) error {
	switch l := obj.(type) {
	case *corev1.PersistentVolumeList:
		if scope != nil {
			l.Items = slices.DeleteFunc(l.Items, func(pv corev1.PersistentVolume) bool {
				return pv.Spec.ClaimRef == nil || !slices.Contains(scope.namespaces, pv.Spec.ClaimRef.Namespace)
			})
		}
		for _, pv := range l.Items {
			pvs[pv.Name] = true
		}
	case *storagev1.VolumeAttachmentList:
		if scope != nil {
			l.Items = slices.DeleteFunc(l.Items, func(va storagev1.VolumeAttachment) bool {
				return va.Spec.Source.PersistentVolumeName == nil || !pvs[*va.Spec.Source.PersistentVolumeName]
			})
		}
	case *corev1.NodeList:
		if scope != nil {
			l.Items = slices.DeleteFunc(l.Items, func(n corev1.Node) bool { return !slices.Contains(scope.nodes, n.Name) })
		}
	case *corev1.PodList:
		for i := range l.Items {
			blankEnv(&l.Items[i].Spec)
		}
	case *appsv1.StatefulSetList:
		for i := range l.Items {
			blankEnv(&l.Items[i].Spec.Template.Spec)
		}
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return err
	}
	for _, it := range items {
		if m, err := meta.Accessor(it); err == nil {
			if a := m.GetAnnotations(); a != nil {
				delete(a, corev1.LastAppliedConfigAnnotation)
				m.SetAnnotations(a)
			}
		}
	}
	return meta.SetList(obj, items)
}

// envValueNotKept stands for an environment variable's value in the dump.
const envValueNotKept = "(value not kept by skewtest)"

// blankEnv replaces the value of every environment variable set inline in
// spec's containers; references (valueFrom) name a Secret or ConfigMap and
// are kept.
func blankEnv(spec *corev1.PodSpec) {
	blank := func(env []corev1.EnvVar) {
		for i := range env {
			if env[i].Value != "" {
				env[i].Value = envValueNotKept
			}
		}
	}
	for i := range spec.InitContainers {
		blank(spec.InitContainers[i].Env)
	}
	for i := range spec.Containers {
		blank(spec.Containers[i].Env)
	}
	for i := range spec.EphemeralContainers {
		blank(spec.EphemeralContainers[i].Env)
	}
}

// writeDump writes obj as YAML to path, cut at limit bytes with a line
// that says so.
func writeDump(path string, obj runtime.Object, limit int64) error {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := reports.NewCapWriter(f, limit)
	_, err = w.Write(b)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
