// Package conditions holds the wait conditions skewtest polls on besides
// those sigs.k8s.io/e2e-framework/klient/wait/conditions already has: a
// node Ready at a given kubelet version, and a CSI driver registered with a
// node's kubelet. Use them with wait.For.
package conditions

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apimachinerywait "k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/e2e-framework/klient/k8s"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/klient/wait/conditions"
)

// NodeStatus describes a node for progress output and errors.
func NodeStatus(n *corev1.Node) string {
	ready := "unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = fmt.Sprintf("%s (%s: %s)", c.Status, c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("node %s kubelet %s Ready=%s", n.Name, n.Status.NodeInfo.KubeletVersion, ready)
}

// NodeGetter reads a node by name: through e2e-framework's resources
// (NodeReadyAt) or a typed client (a provider's own).
type NodeGetter func(ctx context.Context, name string) (*corev1.Node, error)

// ResourcesNodes is the NodeGetter of res.
func ResourcesNodes(res *resources.Resources) NodeGetter {
	return func(ctx context.Context, name string) (*corev1.Node, error) {
		var n corev1.Node
		if err := res.Get(ctx, name, "", &n); err != nil {
			return nil, err
		}
		return &n, nil
	}
}

// NodeReadyAt is true once node reports Ready and, when kubeletVersion is
// not empty, that kubelet version. last, if not nil, receives the latest
// status for error messages.
func NodeReadyAt(res *resources.Resources, node, kubeletVersion string, last *string) apimachinerywait.ConditionWithContextFunc {
	return NodeReadyAtWith(ResourcesNodes(res), node, kubeletVersion, last)
}

// NodeReadyAtWith is NodeReadyAt reading the node through get.
func NodeReadyAtWith(get NodeGetter, node, kubeletVersion string, last *string) apimachinerywait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		n, err := get(ctx, node)
		if err != nil {
			if apierrors.IsNotFound(err) {
				if last != nil {
					*last = fmt.Sprintf("node %s not registered yet", node)
				}
				return false, nil
			}
			if last != nil {
				*last = err.Error()
			}
			return false, nil
		}
		if last != nil {
			*last = NodeStatus(n)
		}
		if kubeletVersion != "" && n.Status.NodeInfo.KubeletVersion != kubeletVersion {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				// A stale Ready from before a kubelet restart carries the
				// old version, which the check above already excluded.
				return true, nil
			}
		}
		return false, nil
	}
}

// nodePoll is how often WaitNodeReady reads the node.
const nodePoll = 100 * time.Millisecond

// WaitNodeReady waits until NodeReadyAt holds, polling every 100 ms.
func WaitNodeReady(ctx context.Context, res *resources.Resources, node, kubeletVersion string, timeout time.Duration) error {
	return WaitNodeReadyWith(ctx, ResourcesNodes(res), node, kubeletVersion, timeout)
}

// WaitNodeReadyWith is WaitNodeReady reading the node through get.
func WaitNodeReadyWith(ctx context.Context, get NodeGetter, node, kubeletVersion string, timeout time.Duration) error {
	var last string
	err := wait.For(NodeReadyAtWith(get, node, kubeletVersion, &last), wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(nodePoll), wait.WithImmediate())
	if err != nil {
		return fmt.Errorf("wait for node %s Ready at kubelet %s: %w (last seen: %s)", node, kubeletVersion, err, last)
	}
	return nil
}

// CSIDriverRegistered is true once node's CSINode lists driver: the
// kubelet has taken the driver's registration (a running plugin pod is not
// enough). A CSINode not there yet counts as not registered.
func CSIDriverRegistered(res *resources.Resources, node, driver string) apimachinerywait.ConditionWithContextFunc {
	return conditions.New(res).ResourceMatch(&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node}}, func(obj k8s.Object) bool {
		for _, d := range obj.(*storagev1.CSINode).Spec.Drivers {
			if d.Name == driver {
				return true
			}
		}
		return false
	})
}
