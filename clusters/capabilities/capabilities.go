// Package capabilities names the optional things a cluster provider can do
// beyond clusters.Provider, one method each, after kubetest2's pkg/types
// (WithKubeconfig, ...). A caller asks for a capability with an interface
// assertion and does without it when a provider lacks it; a provider
// declares each capability it has with a compile-time check:
//
//	var _ capabilities.WithRunDir = &Provider{}
//
// The package is a leaf (it imports no provider), so providers can import
// it although package clusters imports them.
package capabilities

import (
	"context"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/reports"
)

// WithBinaries is a provider that knows the binaries its cluster runs
// besides the test kubelets (control plane, container runtime), for the
// report.
type WithBinaries interface {
	Binaries() []binaries.Binary
}

// WithRunDir is a provider whose cluster lives in a directory on this
// host, which `skewtest clean <dir>` removes should the harness be killed
// or the cluster be kept after a failure.
type WithRunDir interface {
	RunDir() string
}

// WithCSIDriver is a provider that runs a CSI driver of its own; the
// description (name, where it runs, how volumes are provisioned) goes into
// the report's environment.
type WithCSIDriver interface {
	CSIDriver() string
}

// WithCSICalls is a provider that runs skewtest's CSI driver itself (the
// local provider's driver processes) and keeps a record of every call, in
// the order served.
type WithCSICalls interface {
	CSICalls() []csidriver.Call
}

// WithTeardownTimeout is a provider whose Down takes longer than a local
// cluster's (deleting cloud resources and waiting until they are gone);
// the run bounds its Down by this instead of its default.
type WithTeardownTimeout interface {
	TeardownTimeout() time.Duration
}

// WithSharedCluster is a provider whose cluster is not the run's own (an
// existing cluster): its Down gives the node back and leaves the cluster,
// so the run itself removes the workload a failed or interrupted scenario
// left there, once Down has put the node's own kubelet back. SharedCluster
// names the cluster for the messages (its API server).
type WithSharedCluster interface {
	SharedCluster() string
}

// WithWorkloadRecord is a provider of a shared cluster that keeps, in its
// run's state, the record of what the run's scenario made in the API and
// has not removed, so that `skewtest clean` after a killed harness removes
// it too. The scenario hands it each new record before making what the
// record adds.
type WithWorkloadRecord interface {
	RecordWorkload(workloads.Record) error
}

// WithRunFacts is a provider that knows facts for the report's
// environment only once its cluster is gone (instance types, wall time,
// an estimate of the cost, what the post-run sweep found); the run adds
// them after Down.
type WithRunFacts interface {
	RunFacts() []reports.KeyValue
}

// WithVolumes is a provider that makes the workload's volumes itself (PVs
// of its own CSI driver, or local volumes) rather than through a
// StorageClass of the cluster's.
type WithVolumes interface {
	ProvisionVolumes(ctx context.Context, req storage.Request) (storage.Volumes, error)
}

// WithWorkload is a provider that says how the workload's pods run on its
// nodes (the image it imported, its pull policy), beside WithVolumes.
type WithWorkload interface {
	Workload() storage.Workload
}

// WithOwnWorkload is a provider that makes the workload's volumes and
// says how its pods run (WithVolumes and WithWorkload): the run hands it
// to the scenario as it is, where another provider's workload gets a
// StorageClass of the cluster's (WithStorageClass) and a stock image.
type WithOwnWorkload interface {
	WithVolumes
	WithWorkload
}

// WithStorageClass is a provider whose workload's volumes come from a
// StorageClass of the cluster's rather than skewtest's CSI driver: its
// own setting STORAGE_CLASS, or kops's default EBS CSI class.
type WithStorageClass interface {
	StorageClass() string
}

// WithWorkloadImage is a provider whose workload pulls a stock image (its
// own setting IMAGE, default storage.StockImage) in place of skewtest's
// registry-free one.
type WithWorkloadImage interface {
	WorkloadImage() string
}

// WithPrefetch is a provider that builds what its Up would build (control
// plane, container runtime, node image) into the cache, making nothing
// else: a suite calls it once before its first spec, so that no spec's
// deadline pays for a cold build.
type WithPrefetch interface {
	Prefetch(ctx context.Context) error
}
