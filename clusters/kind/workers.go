package kind

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	kindnodes "sigs.k8s.io/kind/pkg/cluster/nodes"
)

// MaxWorkers is how many workers (test nodes) a kind cluster has at most:
// one per initial kubelet. On a 2-core machine the catalogue's batch was
// no faster on six workers than on four: from four its longest run bounds
// it, and each worker more adds to the bring-up and the teardown and
// slows the runs beside it (measurements.md, "kind with several workers").
const MaxWorkers = 4

// workerRole is kind's role of the nodes that are not control planes.
const workerRole = "worker"

// workersOf are the worker nodes among all, in kind's order of them:
// <cluster>-worker, <cluster>-worker2, ... (by number, so worker10 comes
// after worker9), which is the order of the initial kubelets.
func workersOf(cluster string, all []kindnodes.Node) ([]kindnodes.Node, error) {
	var workers []kindnodes.Node
	for _, n := range all {
		role, err := n.Role()
		if err != nil {
			return nil, fmt.Errorf("kind provider: role of node %s: %w", n, err)
		}
		if role == workerRole {
			workers = append(workers, n)
		}
	}
	var bad []string
	for _, w := range workers {
		if _, ok := workerNumber(cluster, w.String()); !ok {
			bad = append(bad, w.String())
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("kind provider: worker nodes %s are not named %s-%s<n>", strings.Join(bad, ", "), cluster, workerRole)
	}
	slices.SortFunc(workers, func(a, b kindnodes.Node) int {
		na, _ := workerNumber(cluster, a.String())
		nb, _ := workerNumber(cluster, b.String())
		return na - nb
	})
	return workers, nil
}

// workerNumber is the number kind gives worker node of cluster: 1 for
// <cluster>-worker, n for <cluster>-worker<n>.
func workerNumber(cluster, node string) (int, bool) {
	rest, ok := strings.CutPrefix(node, cluster+"-"+workerRole)
	if !ok {
		return 0, false
	}
	if rest == "" {
		return 1, true
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 2 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// pvPrefix names the PVs of volume kind kind that a run makes on node of
// cluster: <cluster>-<kind> on the first worker, as before there were
// several, and <cluster>-<kind><n> on worker n, so that every worker has
// its own (the local provider's PVs carry its node's suffix the same way).
func pvPrefix(cluster, kind, node string) (string, error) {
	n, ok := workerNumber(cluster, node)
	if !ok {
		return "", fmt.Errorf("kind provider: %q is not a worker of cluster %s", node, cluster)
	}
	if n == 1 {
		return cluster + "-" + kind, nil
	}
	return fmt.Sprintf("%s-%s%d", cluster, kind, n), nil
}
