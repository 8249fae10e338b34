package reconstruction

// This file keeps the record of what the scenario made in the API
// (workloads.Record) and removes what its steps left: a run on a cluster
// it does not own (an existing one, whose teardown gives the node back and
// leaves the cluster) must not leave the namespace it made to the
// cluster's owner, nor, failed or interrupted, its StatefulSet, claims and
// volumes, on which the next run's deploy would fail.

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/scenarios"
)

// LeftInCluster reports whether the scenario made something in the API
// that its steps did not remove: a workload it started to deploy and did
// not finish deleting, or the namespace it made (which its last step
// keeps for a next scenario on the same cluster).
func (s *Scenario) LeftInCluster() bool { return !s.made.Empty() }

// Workload names what Remove deletes, for messages.
func (s *Scenario) Workload() string { return s.made.String() }

// Namespace is the namespace the scenario puts its workload in, known
// before it makes anything.
func (s *Scenario) Namespace() string { return s.cfg.Namespace }

// Remove deletes, through the API alone, what the scenario made and its
// steps left (workloads.Remove), within timeout; call it once the node's
// own kubelet is back to finish the pods.
func (s *Scenario) Remove(ctx context.Context, timeout time.Duration) error {
	if err := workloads.Remove(ctx, s.cs, s.made, timeout, s.cfg.PollInterval, s.cfg.Logger); err != nil {
		return err
	}
	return s.setMade(workloads.Record{Run: s.cfg.RunID, Namespace: s.cfg.Namespace})
}

// setMade records r as what the scenario made and has not removed, and
// hands it to Config.OnMade, which keeps it where `skewtest clean` finds
// it: before the things r adds are made, and after those it drops are
// gone.
func (s *Scenario) setMade(r workloads.Record) error {
	s.made = r
	if s.cfg.OnMade == nil {
		return nil
	}
	if err := s.cfg.OnMade(r); err != nil {
		return fmt.Errorf("%w: record what the run makes in the cluster (%s): %v", scenarios.ErrHarness, r, err)
	}
	return nil
}

// labels mark what the scenario makes as its run's.
func (s *Scenario) labels() map[string]string { return workloads.Labels(s.cfg.RunID) }

// madeWorkload is the record of the deployed workload: the StatefulSet
// and every PV the scenario made or bound, in its namespace.
func (s *Scenario) madeWorkload() workloads.Record {
	r := s.made
	r.Run, r.Namespace, r.StatefulSet, r.Volumes = s.cfg.RunID, s.cfg.Namespace, s.cfg.Name, s.allVolumes()
	return r
}

// namespaceOnly is the record once the workload is gone but for its
// namespace, which the scenario keeps until Remove.
func (s *Scenario) namespaceOnly() workloads.Record {
	return workloads.Record{Run: s.made.Run, Namespace: s.made.Namespace, OwnsNamespace: s.made.OwnsNamespace, NamespaceUID: s.made.NamespaceUID}
}

// allVolumes are the PVs the scenario made or its claims bound, the
// shapes' included, with the StorageClass the provider made for the run.
func (s *Scenario) allVolumes() storage.Volumes {
	v := storage.Volumes{StorageClass: s.provisioned.StorageClass, DeleteStorageClass: s.provisioned.DeleteStorageClass, StorageClassUID: s.provisioned.StorageClassUID}
	seen := map[string]bool{}
	add := func(list []storage.PV) {
		for _, pv := range list {
			if !seen[pv.Name] {
				seen[pv.Name] = true
				v.PVs = append(v.PVs, pv)
			}
		}
	}
	add(s.volumes.PVs)
	add(s.provisioned.PVs)
	if s.shapes != nil {
		add(s.shapes.block.PVs)
		add(s.shapes.gen.PVs)
	}
	return v
}
