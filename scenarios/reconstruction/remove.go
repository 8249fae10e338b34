package reconstruction

// This file removes what a scenario put in the API when its own steps
// did not: a run on a cluster it does not own (an existing one, whose
// teardown gives the node back and leaves the cluster) must not leave the
// namespace it made to the cluster's owner, nor, failed or interrupted,
// its StatefulSet, claims and volumes, on which the next run's deploy
// would fail.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/storage"
)

// LeftInCluster reports whether the scenario made something in the API
// that its steps did not remove: a workload it started to deploy and did
// not finish deleting, or the namespace it made (which its last step
// keeps for a next scenario on the same cluster).
func (s *Scenario) LeftInCluster() bool {
	return s.deployStarted && (!s.removed || s.madeNamespace && !s.namespaceGone)
}

// Workload names what Remove deletes, for messages.
func (s *Scenario) Workload() string {
	var what []string
	if !s.removed {
		what = append(what, fmt.Sprintf("StatefulSet %s/%s and its volumes", s.cfg.Namespace, s.cfg.Name))
	}
	if s.madeNamespace {
		what = append(what, "namespace "+s.cfg.Namespace)
	}
	return strings.Join(what, ", ")
}

// Remove deletes, through the API alone, what the scenario made and its
// steps left: its namespace when it made it (the StatefulSet, its pods
// and claims go with it), else the StatefulSet, the faults' pods and the
// claims; then its PVs and StorageClass as storage.Release does. It waits
// up to timeout for the pods and the namespace to go, which needs a
// running kubelet on the node to finalize the pods: call it once the
// node's own kubelet is back. It checks nothing on the node; the hop's
// checks are done.
func (s *Scenario) Remove(ctx context.Context, timeout time.Duration) error {
	if !s.LeftInCluster() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns := s.cfg.Namespace
	var errs []error
	if s.madeNamespace {
		if err := s.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete namespace %s: %w", ns, err))
		}
	} else {
		errs = append(errs, s.deleteOwnObjects(ctx)...)
	}
	var left []string
	gone := func(ctx context.Context) (bool, error) {
		left = s.stillInAPI(ctx)
		return len(left) == 0, nil
	}
	if err := wait.For(gone, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return errors.Join(append(errs, fmt.Errorf("the run's objects are still in the cluster %s after it asked to delete them: %s (their pods need the node's kubelet to finish; kubectl get pods -n %s -o wide shows them)",
			timeout, strings.Join(left, ", "), ns))...)
	}
	s.namespaceGone = s.madeNamespace
	if !s.removed {
		if err := storage.Release(ctx, s.cs, ns, s.allVolumes(), timeout, s.cfg.PollInterval); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		s.removed = true
	}
	return errors.Join(errs...)
}

// deleteOwnObjects deletes the StatefulSet, the faults' pods and the
// claims in a namespace the scenario found (and so leaves in place).
func (s *Scenario) deleteOwnObjects(ctx context.Context) []error {
	ns := s.cfg.Namespace
	var errs []error
	bg := metav1.DeletePropagationBackground
	if err := s.cs.AppsV1().StatefulSets(ns).Delete(ctx, s.cfg.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete StatefulSet %s/%s: %w", ns, s.cfg.Name, err))
	}
	for _, sel := range s.podSelectors() {
		pods, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			errs = append(errs, fmt.Errorf("list pods %s in %s: %w", sel, ns, err))
			continue
		}
		for _, p := range pods.Items {
			if err := s.cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete pod %s/%s: %w", ns, p.Name, err))
			}
		}
	}
	for _, claim := range s.ownClaims() {
		if err := s.cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete PVC %s/%s: %w", ns, claim, err))
		}
	}
	return errs
}

// podSelectors select the scenario's pods: the StatefulSet's and the ones
// a fault made beside them.
func (s *Scenario) podSelectors() []string {
	sels := []string{appLabel + "=" + s.cfg.Name}
	if s.cfg.Fault != nil {
		sels = append(sels, faultPodLabel+"="+s.cfg.Fault.Entry.Name)
	}
	return sels
}

// ownClaims are the claims of the StatefulSet's replicas and of the
// shapes' PVs, sorted.
func (s *Scenario) ownClaims() []string {
	seen := map[string]bool{}
	for i := 0; i < s.cfg.Replicas; i++ {
		seen[claimName(s.cfg.Name, i)] = true
	}
	for claim := range s.intendedPVs() {
		seen[claim] = true
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// stillInAPI names what Remove waits for: the namespace when it deletes
// it, else the scenario's pods and claims.
func (s *Scenario) stillInAPI(ctx context.Context) []string {
	ns := s.cfg.Namespace
	if s.madeNamespace {
		n, err := s.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return []string{fmt.Sprintf("namespace %s (%v)", ns, err)}
		}
		return []string{fmt.Sprintf("namespace %s (%s)", ns, n.Status.Phase)}
	}
	var left []string
	for _, sel := range s.podSelectors() {
		pods, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return []string{fmt.Sprintf("pods %s (%v)", sel, err)}
		}
		for _, p := range pods.Items {
			left = append(left, "pod "+ns+"/"+p.Name)
		}
	}
	for _, claim := range s.ownClaims() {
		if _, err := s.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "PVC "+ns+"/"+claim)
		}
	}
	return left
}

// allVolumes are the PVs the scenario made or its claims bound, the
// shapes' included, with the StorageClass the provider made for the run.
func (s *Scenario) allVolumes() storage.Volumes {
	v := s.volumes
	if v.StorageClass == "" {
		v.StorageClass, v.DeleteStorageClass = s.provisioned.StorageClass, s.provisioned.DeleteStorageClass
	}
	seen := map[string]bool{}
	var pvs []storage.PV
	add := func(list []storage.PV) {
		for _, pv := range list {
			if !seen[pv.Name] {
				seen[pv.Name] = true
				pvs = append(pvs, pv)
			}
		}
	}
	add(s.volumes.PVs)
	add(s.provisioned.PVs)
	if s.shapes != nil {
		add(s.shapes.block.PVs)
		add(s.shapes.gen.PVs)
	}
	v.PVs = pvs
	return v
}
