package skewrun

import (
	"context"
	"testing"

	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/storage"
)

// ownVolumes is a provider with volumes and a workload of its own that
// also keeps its CSI driver's call record, as the local provider does
// (the record itself is never read here).
type ownVolumes struct {
	borrowed
	capabilities.WithCSICalls
}

func (*ownVolumes) ProvisionVolumes(context.Context, storage.Request) (storage.Volumes, error) {
	return storage.Volumes{}, nil
}
func (*ownVolumes) Workload() storage.Workload { return storage.Workload{} }

// The scenario's cluster is the provider itself, not a wrapper that hides
// its other capabilities: the *-fails-final faults judge the CSI driver's
// call record through it (a wrapper made every one of them fail with
// "this provider keeps none").
func TestWorkloadsKeepTheProvidersCapabilities(t *testing.T) {
	c := &runCluster{Provider: &ownVolumes{}}
	rc, err := c.workloads()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rc.(capabilities.WithCSICalls); !ok {
		t.Errorf("the scenario's cluster %T hides the provider's CSI call record (capabilities.WithCSICalls)", rc)
	}
}
