package workloads

// This file is how a run knows what in a cluster is its own: a namespace
// named after the run (unique per run, batch job and matrix trail), the
// run's label on everything it makes, and the UIDs of what it made. A
// cluster may have other tenants and other skewtest runs; a name alone
// proves nothing.

import (
	"errors"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// RunLabel is set on every object a run makes (its namespace, the
// StatefulSet and its pods and claims, the PVs and StorageClass made for
// it, the shapes' ConfigMap and Secret), to the run's ID.
const RunLabel = "skewtest.k8s.io/run"

// Labels are the labels that mark an object as run's.
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
