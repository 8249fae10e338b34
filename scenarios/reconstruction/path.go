package reconstruction

// This file reads which reconstruction each kubelet of the plan ran from
// its own log since its start (kubeletmetrics.ClassifyReconstructionPath),
// not from its version or gates: the report shows "new → old → new" for a
// replay of KEP-3756's sign-off only when the kubelets said so.

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// errNoKubeletLog is a node that cannot show its kubelet's log.
var errNoKubeletLog = errors.New("the node cannot show its kubelet's log")

// hopKubeletLog is the hop's kubelet's log since its start, read once a
// hop after its cleanup: the reconstruction path and the metrics race are
// both read from the lines the kubelet logs as it starts. A failed read is
// tried again next time.
func (s *Scenario) hopKubeletLog(ctx context.Context) (string, error) {
	if s.hopLog != nil {
		return *s.hopLog, nil
	}
	ln, ok := s.node.(nodes.WithKubeletLog)
	if !ok {
		return "", errNoKubeletLog
	}
	text, err := ln.KubeletLog(ctx)
	if err != nil {
		return "", err
	}
	s.hopLog = &text
	return text, nil
}

// startHopPath forgets the previous hop's log, path and witness starts;
// volumes (-1: not known) is set once the hop knows how many volume dirs
// of deleted pods its kubelet finds.
func (s *Scenario) startHopPath() {
	s.hopLog, s.hopStartLog, s.pathTried, s.pathVolumes = nil, nil, false, -1
	s.race = hopRace{}
}

// recordHopPath reads the hop's kubelet's reconstruction path into the
// hop, once a hop; the error is the classification's own (lines of both
// paths), nil when the log could not be read (a note says why).
func (s *Scenario) recordHopPath(ctx context.Context, sc *scenarios.StepContext) error {
	if s.hop == nil || s.pathTried || ctx.Err() != nil {
		return nil
	}
	s.pathTried = true
	who := "kubelet " + s.hop.To + plan.FormatGates(s.hop.ToGates)
	text, err := s.hopKubeletLog(ctx)
	if err != nil {
		sc.Note("which reconstruction %s ran is not known: %v", who, err)
		return nil
	}
	pl := kubeletmetrics.ClassifyReconstructionPath(text, s.pathVolumes)
	s.hop.ReconstructionPath = pl.Cell()
	notePath(sc, who, pl)
	return pl.Err()
}

// recordInitialPath reads the plan's first kubelet's reconstruction path
// into the run, before the first hop. Its start came before the workload,
// so how many volumes it found is not known.
func (s *Scenario) recordInitialPath(ctx context.Context, sc *scenarios.StepContext) error {
	if s.cfg.FirstHop != 1 || len(s.cfg.Plan.Versions) == 0 {
		return nil
	}
	who := "kubelet " + s.cfg.Plan.Entry(0)
	ln, ok := s.node.(nodes.WithKubeletLog)
	if !ok {
		sc.Note("which reconstruction %s ran is not known: %v", who, errNoKubeletLog)
		return nil
	}
	text, err := ln.KubeletLog(ctx)
	if err != nil {
		sc.Note("which reconstruction %s ran is not known: %v", who, err)
		return nil
	}
	pl := kubeletmetrics.ClassifyReconstructionPath(text, -1)
	s.run.InitialReconstructionPath = pl.Cell()
	notePath(sc, who, pl)
	return pl.Err()
}

func notePath(sc *scenarios.StepContext, who string, pl kubeletmetrics.PathLog) {
	sc.Note("%s ran reconstruction path %q, from its log since its start: %s", who, pl.Cell(), pl.Detail)
	sc.Evidence(reports.Evidence{Name: fmt.Sprintf("which reconstruction %s ran (its log since its start)", who), Kind: "log", Text: pl.Evidence()})
}
