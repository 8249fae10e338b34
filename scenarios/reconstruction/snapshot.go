package reconstruction

// This file reads the node's state for the scenario's steps and records it
// as evidence.

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

func (s *Scenario) reader0() nodestate.Reader {
	return nodestate.Reader{Node: s.node, KubeletRoot: s.node.KubeletRootDir()}
}

func (s *Scenario) snapshot(ctx context.Context, node exec.Cmder) (*nodestate.Snapshot, error) {
	r := s.reader0()
	r.Node = node
	snap, err := r.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot node %s: %w", s.node, err)
	}
	return snap, nil
}

func (s *Scenario) snapshotEvidence(sc *scenarios.StepContext, name string, snap *nodestate.Snapshot) {
	path, _ := sc.Artifact(slugName(name)+"-mountinfo.txt", []byte(snap.Mountinfo))
	sc.Evidence(reports.Evidence{Name: name, Kind: "snapshot", Text: snap.String(), Path: path})
}

func slugName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
}
