// Package workloads records what a scenario made in a cluster's API and
// removes it through the API alone. A run on a cluster it does not own (an
// existing one) must leave the owner's cluster as it found it: the run
// removes what its scenarios left once the node's own kubelet is back, and
// `skewtest clean` does the same from the record after the harness was
// killed. The scenario and the provider's clean share this one removal,
// which touches only what the record proves the run's (identity.go).
package workloads

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/storage"
)

// Record is what one scenario (a run, a batch job, a matrix trail's
// workload) made in the API and has not removed yet. It is written (by the
// provider that keeps it, in its run's state) before the things it names
// are made, and again with their UIDs once they exist.
type Record struct {
	// Run is the run's ID: the value of RunLabel on what the scenario
	// made.
	Run string `json:"run"`
	// Namespace holds the scenario's workload; it is the scenario's own
	// (Namespace) and keys the record among a run's others.
	Namespace string `json:"namespace"`
	// OwnsNamespace is set just before the scenario creates its namespace
	// and kept until the namespace is gone, so that a kill right after the
	// create leaves it to be found by its name and the run's label.
	// NamespaceUID is its UID once made.
	OwnsNamespace bool      `json:"ownsNamespace,omitempty"`
	NamespaceUID  types.UID `json:"namespaceUID,omitempty"`
	// StatefulSet is the workload's StatefulSet in the namespace, with its
	// UID once made; empty once the scenario deleted it itself.
	StatefulSet    string    `json:"statefulSet,omitempty"`
	StatefulSetUID types.UID `json:"statefulSetUID,omitempty"`
	// Volumes are the PVs made for, or bound to, the workload's claims and
	// the StorageClass made for the run, each with its UID once known,
	// released as storage.Release does.
	Volumes storage.Volumes `json:"volumes,omitzero"`
}

// Empty reports whether nothing is left to remove.
func (r Record) Empty() bool {
	return !r.OwnsNamespace && !r.HasWorkload()
}

// HasWorkload reports whether the workload (objects or volumes) is left.
func (r Record) HasWorkload() bool {
	return r.StatefulSet != "" || len(r.Volumes.PVs) > 0 || r.Volumes.DeleteStorageClass
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
	if r.OwnsNamespace {
		what = append(what, "namespace "+r.Namespace)
	}
	if len(what) == 0 && r.HasWorkload() {
		what = append(what, "the workload's volumes")
	}
	return strings.Join(what, ", ")
}

// Owns tells whether obj is what the record made: it carries the run's
// label and, when uid is known, that UID. The error says why not.
func (r Record) Owns(obj metav1.Object, uid types.UID) error {
	switch got := obj.GetLabels()[RunLabel]; {
	case r.Run == "":
		return errors.New("the record names no run, so nothing proves it the run's")
	case got != r.Run:
		return fmt.Errorf("it carries %s=%q, not this run's %q", RunLabel, got, r.Run)
	case uid != "" && obj.GetUID() != uid:
		return fmt.Errorf("its UID is %s, not the recorded %s: it was made again since", obj.GetUID(), uid)
	}
	return nil
}

// Remove deletes what r names and the record proves the run's: its
// namespace, when it carries the run's label and recorded UID (the
// StatefulSet, its pods and claims go with it), deleted with that UID as
// precondition; then its volumes as storage.Release does, each PV by its
// UID. A namespace of that name that is not the run's (another run's,
// the owner's, one made again since) is left alone and logged, with
// everything in it. It waits up to timeout for the namespace to go, which
// needs a running kubelet on the node to finish the pods: call it once
// the node's own kubelet is back. The error names what is still there.
func Remove(ctx context.Context, cs storage.Client, r Record, timeout, interval time.Duration, log *slog.Logger) error {
	if r.Empty() {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns := r.Namespace
	var errs []error
	var deleting types.UID // the UID of the run's namespace being deleted
	ours := false
	if r.OwnsNamespace {
		switch got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); {
		case apierrors.IsNotFound(err):
			ours = true // gone, or never made: nothing of a stranger's is there
		case err != nil:
			return fmt.Errorf("get namespace %s to tell whether it is the run's: %w", ns, err)
		default:
			if why := r.Owns(got, r.NamespaceUID); why != nil {
				log.Warn("left alone: not the run's", "namespace", ns, "why", why)
				break
			}
			ours = true
			deleting = got.UID
			err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(got.UID))})
			switch {
			case apierrors.IsConflict(err):
				log.Warn("left alone: made again since it was read", "namespace", ns, "err", err)
				deleting = ""
			case err != nil && !apierrors.IsNotFound(err):
				errs = append(errs, fmt.Errorf("delete namespace %s (uid %s): %w", ns, got.UID, err))
			}
		}
	}
	if deleting != "" {
		var phase string
		gone := func(ctx context.Context) (bool, error) {
			got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return true, nil
			case err != nil:
				phase = err.Error()
				return false, nil
			}
			phase = string(got.Status.Phase)
			return got.UID != deleting, nil
		}
		if err := wait.For(gone, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(interval), wait.WithImmediate()); err != nil {
			return errors.Join(append(errs, fmt.Errorf("still in the cluster %s after it was deleted: namespace %s (%s) (its pods need the node's kubelet to finish; kubectl get pods -n %s -o wide shows them)",
				timeout, ns, phase, ns))...)
		}
	}
	if len(r.Volumes.PVs) > 0 || r.Volumes.DeleteStorageClass {
		vols := r.Volumes
		if !ours {
			// Claims of a namespace that is not the run's are not deleted
			// by name; only by the UID the run recorded.
			vols.PVs = slices.Clone(vols.PVs)
			for i := range vols.PVs {
				if vols.PVs[i].ClaimUID == "" {
					vols.PVs[i].Claim = ""
				}
			}
		}
		if err := storage.Release(ctx, cs, ns, vols, timeout, interval); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
