package workloads

// This file is how a run knows what in a cluster is its own: a namespace
// named after the run (unique per run, batch job and matrix trail), the
// run's label on everything it makes, and the UIDs of what it made. A
// cluster may have other tenants and other skewtest runs; a name alone
// proves nothing.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"sigs.k8s.io/skewtest/clusters/storage"
)

// RunLabel is set on every object a run makes (its namespace, the
// StatefulSet and its pods and claims, the PVs and StorageClass made for
// it, the shapes' ConfigMap and Secret), to the run's ID.
const RunLabel = "skewtest.k8s.io/run"

// Labels mark an object as run's own.
func Labels(run string) map[string]string { return map[string]string{RunLabel: run} }

// ErrNotOurs marks a create that found an object of the run's name that
// the run did not make (AlreadyExists): such an object is never recorded
// nor removed, and the run stops as an infrastructure failure, since its
// names are unique to it and a clash means something else claims them.
var ErrNotOurs = errors.New("an object of the run's name exists that the run did not make")

// ErrOtherCluster marks a refusal to act on a cluster other than the
// run's (the kubeconfig points elsewhere now): bad input, exit 2.
var ErrOtherCluster = errors.New("the kubeconfig points at another cluster than the run's")

// namePrefix starts every namespace a run makes.
const namePrefix = "skewtest"

var nonLabel = regexp.MustCompile(`[^a-z0-9]+`)

// Namespace is the namespace of a run's workload: skewtest-<run>, then
// parts (a batch job's number and name, a matrix trail), lowered and
// joined by '-', as a DNS label. The run's ID is never cut, so that no two
// runs share a namespace; parts are cut to fit 63 characters.
func Namespace(run string, parts ...string) string {
	head := label(namePrefix + "-" + run)
	tail := label(strings.Join(parts, "-"))
	if tail == "" {
		return head
	}
	room := validation.DNS1123LabelMaxLength - len(head) - 1
	if room <= 0 {
		return head
	}
	if len(tail) > room {
		tail = strings.TrimRight(tail[:room], "-")
	}
	return head + "-" + tail
}

// label lowers s and turns every run of characters a DNS label cannot hold
// into one '-'.
func label(s string) string {
	s = nonLabel.ReplaceAllString(strings.ToLower(s), "-")
	s = strings.Trim(s, "-")
	if len(s) > validation.DNS1123LabelMaxLength {
		s = strings.TrimRight(s[:validation.DNS1123LabelMaxLength], "-")
	}
	return s
}

// MakeNamespace makes r's namespace, with r.Run's label, as the
// scenario's own. record keeps what the run made where clean finds it: it
// is called with the namespace owned before the create (so that a kill
// right after it leaves the namespace to be found by name and label), and
// with its UID once made. A namespace of that name that exists is not the
// run's: the record drops it (nothing to remove) and the error wraps
// ErrNotOurs. On any other failure the record keeps the namespace, which
// Remove deletes only if it carries the run's label.
func MakeNamespace(ctx context.Context, cs storage.Client, r Record, record func(Record) error) (Record, error) {
	r.OwnsNamespace, r.NamespaceUID = true, ""
	if err := record(r); err != nil {
		return r, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Namespace, Labels: Labels(r.Run)}}
	made, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		mine := Record{Run: r.Run, Namespace: r.Namespace}
		if rerr := record(mine); rerr != nil {
			return mine, rerr
		}
		return mine, fmt.Errorf("%w: namespace %s exists, and this run (%s=%s) did not make it; nothing was made in it or removed from it: %v",
			ErrNotOurs, r.Namespace, RunLabel, r.Run, err)
	case err != nil:
		return r, fmt.Errorf("create namespace %s: %w", r.Namespace, err)
	}
	r.NamespaceUID = made.UID
	return r, record(r)
}
