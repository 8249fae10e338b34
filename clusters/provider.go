// Package clusters is the facade over skewtest's cluster providers: local
// (a real control plane and kubelets on this Linux host), kind (kind
// clusters as a library), existing (a kubeconfig plus SSH to the nodes)
// and kops (AWS). Scenarios only see Provider and nodes.Node.
package clusters

import (
	"context"

	"k8s.io/client-go/rest"

	"sigs.k8s.io/skewtest/clusters/nodes"
)

// Provider is one cluster's lifecycle, after kubetest2's deployer (Up, Down,
// IsUp, DumpClusterLogs) and kind's cluster.Provider.
type Provider interface {
	// Name is the provider's name ("local", "existing", ...).
	Name() string
	// Up creates the cluster, or attaches to an existing one, and returns
	// when the API server answers and the nodes are Ready.
	Up(ctx context.Context) error
	// Down deletes everything Up made (processes, mounts, directories,
	// clusters); for an attached cluster it only releases connections. It
	// is safe to call after a failed or partial Up, and more than once.
	Down(ctx context.Context) error
	// IsUp reports whether the API server answers.
	IsUp(ctx context.Context) (bool, error)
	// RESTConfig is the admin client config; valid after Up.
	RESTConfig() (*rest.Config, error)
	// KubeconfigPath is a kubeconfig file a person can use with kubectl.
	KubeconfigPath() string
	// TestNodes are the nodes a scenario may disrupt (workers only).
	TestNodes(ctx context.Context) ([]nodes.Node, error)
	// DumpClusterLogs copies component logs into dir.
	DumpClusterLogs(ctx context.Context, dir string) error
}
