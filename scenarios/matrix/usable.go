package matrix

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"

	"sigs.k8s.io/skewtest/clusters/conditions"
	"sigs.k8s.io/skewtest/clusters/nodes"
)

// UsableTimeout bounds how long a node gets, after a failed hop, to show
// it can go on: the hop itself already waited for it.
const UsableTimeout = 30 * time.Second

// NodeUsable returns a Tour.Usable that asks the API server whether the
// node can go on at a kubelet version: the node is Ready at that version
// (waiting up to timeout) and its kubelet answers /healthz through the
// API server's node proxy now, so a Ready condition the stopped kubelet
// left behind does not count.
func NodeUsable(rc *rest.Config, timeout time.Duration) (func(ctx context.Context, node nodes.Node, version string) error, error) {
	res, err := resources.New(rc)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, node nodes.Node, version string) error {
		if err := conditions.WaitNodeReady(ctx, res, node.String(), version, timeout); err != nil {
			return err
		}
		path := fmt.Sprintf("/api/v1/nodes/%s/proxy/healthz", node)
		body, err := cs.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("kubelet of node %s does not answer (GET %s): %w", node, path, err)
		}
		if got := strings.TrimSpace(string(body)); got != "ok" {
			return fmt.Errorf("kubelet of node %s is not healthy (GET %s): %q", node, path, got)
		}
		return nil
	}, nil
}
