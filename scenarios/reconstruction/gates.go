package reconstruction

// This file gives each plan entry's kubelet the feature gates the entry
// sets (PLAN=v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.15),
// through the node's nodes.WithKubeletFeatureGates.

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"sigs.k8s.io/skewtest/clusters/conditions"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// checkGatesNode refuses, before any step runs, a plan whose entries set
// feature gates on a node that cannot put them into its kubelet's
// configuration (skewrun refuses such a provider earlier still).
func checkGatesNode(p plan.Plan, node nodes.Node) error {
	if !p.HasGates() {
		return nil
	}
	if _, ok := node.(nodes.WithKubeletFeatureGates); ok {
		return nil
	}
	return fmt.Errorf("reconstruction: plan %s sets kubelet feature gates, but node %s cannot put feature gates into its kubelet's configuration (nodes.WithKubeletFeatureGates); run the plan with a PROVIDER whose nodes can, or drop the gates", p, node)
}

// setGates gives the installed (stopped) kubelet gates for its next start;
// nil takes earlier gates out. A plan without gates leaves the node's
// configuration alone.
func (s *Scenario) setGates(ctx context.Context, sc *scenarios.StepContext, entry string, gates map[string]bool) error {
	if !s.cfg.Plan.HasGates() {
		return nil
	}
	g, ok := s.node.(nodes.WithKubeletFeatureGates)
	if !ok {
		return checkGatesNode(s.cfg.Plan, s.node)
	}
	if err := g.SetKubeletFeatureGates(ctx, gates); err != nil {
		return fmt.Errorf("give kubelet %s its feature gates: %w", entry, err)
	}
	if len(gates) == 0 {
		sc.Note("kubelet configuration sets no feature gates (plan entry %s)", entry)
	} else {
		sc.Note("kubelet configuration sets featureGates %s (plan entry %s)", gateList(gates), entry)
	}
	return nil
}

// gateList renders gates as the configuration's map: {A: true, B: false}.
func gateList(gates map[string]bool) string {
	out := "{"
	for i, n := range slices.Sorted(maps.Keys(gates)) {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s: %t", n, gates[n])
	}
	return out + "}"
}

// withGates is gates plus name=value, a new map.
func withGates(gates map[string]bool, name string, value bool) map[string]bool {
	out := maps.Clone(gates)
	if out == nil {
		out = map[string]bool{}
	}
	out[name] = value
	return out
}

// applyInitialGates gives the plan's first kubelet, which the provider
// started without them, its entry's gates: stop it, write them, start it,
// and wait for the node Ready, before the workload is deployed.
func (s *Scenario) applyInitialGates(ctx context.Context, sc *scenarios.StepContext) error {
	entry := s.cfg.Plan.Entry(0)
	if err := s.node.StopKubelet(ctx); err != nil {
		return err
	}
	if err := s.setGates(ctx, sc, entry, s.cfg.Plan.GatesOf(0)); err != nil {
		return err
	}
	if err := s.startKubelet(ctx, sc); err != nil {
		return err
	}
	v := plan.V(s.cfg.Plan.Versions[0])
	if err := conditions.WaitNodeReady(ctx, s.res, s.node.String(), v, s.scaled(nodeReadyTimeout)); err != nil {
		return err
	}
	sc.Note("node %s Ready at kubelet %s", s.node, entry)
	return nil
}
