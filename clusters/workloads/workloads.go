// Package workloads records what a scenario made in a cluster's API and
// removes it through the API alone. A run on a cluster it does not own (an
// existing one) must leave the owner's cluster as it found it: the run
// removes what its scenarios left once the node's own kubelet is back, and
// `skewtest clean` does the same from the record after the harness was
// killed. The scenario and the provider's clean share this one removal.
package workloads

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/storage"
)

// Record is what a scenario made in the API and has not removed yet. It is
// written (by the provider that keeps it, in its run's state) before the
// things it names are made.
type Record struct {
	// Namespace holds everything below; MadeNamespace says the scenario
	// made it, so that removing it takes the rest along.
	Namespace     string `json:"namespace"`
	MadeNamespace bool   `json:"madeNamespace,omitempty"`
	// StatefulSet, PodSelectors and Claims are the workload: its
	// StatefulSet, the label selectors of its pods (the StatefulSet's and
	// any a fault made beside them) and its claims. Empty once the
	// scenario deleted them itself.
	StatefulSet  string   `json:"statefulSet,omitempty"`
	PodSelectors []string `json:"podSelectors,omitempty"`
	Claims       []string `json:"claims,omitempty"`
	// Volumes are the PVs made for, or bound to, the claims and the
	// StorageClass made for the run, released as storage.Release does.
	Volumes storage.Volumes `json:"volumes,omitzero"`
}

// Empty reports whether nothing is left to remove.
func (r Record) Empty() bool {
	return !r.MadeNamespace && !r.HasWorkload()
}

// HasWorkload reports whether the workload (objects or volumes) is left.
func (r Record) HasWorkload() bool {
	return r.StatefulSet != "" || len(r.PodSelectors) > 0 || len(r.Claims) > 0 || len(r.Volumes.PVs) > 0 || r.Volumes.DeleteStorageClass
}

// String names what is left, for messages.
func (r Record) String() string {
	var what []string
	if r.StatefulSet != "" {
		what = append(what, fmt.Sprintf("StatefulSet %s/%s", r.Namespace, r.StatefulSet))
	}
	if n := len(r.Volumes.PVs); n > 0 {
		what = append(what, fmt.Sprintf("%d PVs", n))
	}
	if r.MadeNamespace {
		what = append(what, "namespace "+r.Namespace)
	}
	if len(what) == 0 && r.HasWorkload() {
		what = append(what, "the workload's objects in namespace "+r.Namespace)
	}
	return strings.Join(what, ", ")
}

// Remove deletes what r names: its namespace when the scenario made it
// (the StatefulSet, its pods and claims go with it), else the StatefulSet,
// the selected pods and the claims alone; then its volumes as
// storage.Release does. It waits up to timeout for the pods, claims and
// namespace to go, which needs a running kubelet on the node to finish the
// pods: call it once the node's own kubelet is back. The error names what
// is still there.
func Remove(ctx context.Context, cs kubernetes.Interface, r Record, timeout, interval time.Duration) error {
	if r.Empty() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns := r.Namespace
	var errs []error
	if r.MadeNamespace {
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete namespace %s: %w", ns, err))
		}
	} else {
		errs = append(errs, deleteObjects(ctx, cs, r)...)
	}
	var left []string
	gone := func(ctx context.Context) (bool, error) {
		left = stillThere(ctx, cs, r)
		return len(left) == 0, nil
	}
	if err := wait.For(gone, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(interval), wait.WithImmediate()); err != nil {
		return errors.Join(append(errs, fmt.Errorf("still in the cluster %s after they were deleted: %s (their pods need the node's kubelet to finish; kubectl get pods -n %s -o wide shows them)",
			timeout, strings.Join(left, ", "), ns))...)
	}
	if len(r.Volumes.PVs) > 0 || r.Volumes.DeleteStorageClass {
		if err := storage.Release(ctx, cs, ns, r.Volumes, timeout, interval); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteObjects deletes the StatefulSet, the selected pods and the claims
// in a namespace the scenario found (and so leaves in place).
func deleteObjects(ctx context.Context, cs kubernetes.Interface, r Record) []error {
	ns := r.Namespace
	var errs []error
	if r.StatefulSet != "" {
		bg := metav1.DeletePropagationBackground
		if err := cs.AppsV1().StatefulSets(ns).Delete(ctx, r.StatefulSet, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete StatefulSet %s/%s: %w", ns, r.StatefulSet, err))
		}
	}
	for _, sel := range r.PodSelectors {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			errs = append(errs, fmt.Errorf("list pods %s in %s: %w", sel, ns, err))
			continue
		}
		for _, p := range pods.Items {
			if err := cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete pod %s/%s: %w", ns, p.Name, err))
			}
		}
	}
	for _, claim := range r.Claims {
		if err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete PVC %s/%s: %w", ns, claim, err))
		}
	}
	return errs
}

// stillThere names what Remove waits for: the namespace when it deletes
// it, else the selected pods and the claims.
func stillThere(ctx context.Context, cs kubernetes.Interface, r Record) []string {
	ns := r.Namespace
	if r.MadeNamespace {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return []string{fmt.Sprintf("namespace %s (%v)", ns, err)}
		}
		return []string{fmt.Sprintf("namespace %s (%s)", ns, n.Status.Phase)}
	}
	var left []string
	for _, sel := range r.PodSelectors {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return []string{fmt.Sprintf("pods %s (%v)", sel, err)}
		}
		for _, p := range pods.Items {
			left = append(left, "pod "+ns+"/"+p.Name)
		}
	}
	for _, claim := range r.Claims {
		if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "PVC "+ns+"/"+claim)
		}
	}
	return left
}

// Claims sorts and de-duplicates claim names, without empty ones.
func Claims(names ...string) []string {
	out := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "" })
	slices.Sort(out)
	return slices.Compact(out)
}
