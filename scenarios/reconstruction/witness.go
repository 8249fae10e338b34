package reconstruction

// This file tells the kubelet's metrics registration race from a
// reconstruction counter that never moves. Both read a race-prone counter
// (reconstruct_volume_operations_total, or its errors counter) below what
// the kubelet's log shows; the race drops a start's increments now and
// then (5 of 198 catalogue runs of kubelets whose metric code was
// untouched), and may drop one counter's and not the other's; a counter
// that never moves reads 0 on every start. So a hop that looks like the
// race restarts the same kubelet with the hop's running pods and reads
// the counters again: the new start reconstructs the running pods'
// volumes, fails again on what a known bug left unreconstructable, and
// logs each (kubeletmetrics.JudgeRace and RaceLoss decide). One start
// serves both counters. Hops that do not look like the race restart
// nothing.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/conditions"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
)

// explainRace cross-checks a reconstruct_volume_operations_total lower
// than the volume dirs the kubelet found against the kubelet's own log;
// when the log shows the reconstructions, witness starts of the same
// kubelet decide between the metrics registration race (an expected
// deviation) and a counter that never moves (a failure). Without the
// node's log the counter stays failed, and a note says why. The error is
// a witness start that failed.
func (s *Scenario) explainRace(ctx context.Context, sc *scenarios.StepContext, results []kubeletmetrics.Result) ([]kubeletmetrics.Result, error) {
	text, err := s.hopKubeletLog(ctx)
	if errors.Is(err, errNoKubeletLog) {
		sc.Note("reconstruct_volume_operations_total is low and node %s cannot show its kubelet's log, so the metrics registration race cannot be told from a kubelet that did not reconstruct", s.node)
		return results, nil
	}
	if err != nil {
		sc.Note("reconstruct_volume_operations_total is low and the kubelet's log could not be read to cross-check it: %v", err)
		return results, nil
	}
	log := kubeletmetrics.ParseReconstructionLog(text)
	if log.Attempts() == 0 {
		sc.Note("the kubelet's log since its start names no reconstructed volume: either it reconstructed none, or it logs below level 2 (--v=2, or logging.verbosity: 2 in its configuration), where it names each one")
	}
	s.logEvidence(sc, log)
	if !kubeletmetrics.LooksLikeRace(results, log, s.volsAtStart) {
		return results, nil
	}
	ws, noWitness, err := s.witnesses(ctx, sc, kubeletmetrics.ReconstructVolumeOperations, log)
	if err != nil {
		return results, err
	}
	return kubeletmetrics.JudgeRace(results, log, s.volsAtStart, ws, noWitness), nil
}

// hopRace is what a hop's witness starts showed: taken for whichever
// race-prone counter first read below the kubelet's log, and read again
// for the others, so that no counter restarts the kubelet for what a
// start already shows.
type hopRace struct {
	starts []kubeletmetrics.WitnessStart
	// asked: whether the hop can take a witness start was asked;
	// noWitness says why it cannot ("" when it can).
	asked     bool
	noWitness string
	// logged: the hop's log's lines went into the step's evidence.
	logged bool
	// lost and why are, for each race-prone counter a known bug of the
	// hop's kubelet names, what the race dropped of it and what the
	// witness starts showed (kubeletmetrics.RaceLoss), for the
	// catalogue's judge.
	lost map[string]float64
	why  map[string]string
}

// witnesses are the hop's witness starts once they decide metric, read
// below what the hop's log shows: the starts taken so far (for any
// counter), and more while they do not decide it
// (kubeletmetrics.NeedsWitness); noWitness says why the hop can take
// none. The node's kubelet log must be readable. The error is a witness
// start that failed.
func (s *Scenario) witnesses(ctx context.Context, sc *scenarios.StepContext, metric string, log kubeletmetrics.ReconstructionLog) ([]kubeletmetrics.WitnessStart, string, error) {
	if !s.race.asked {
		s.race.asked = true
		if s.race.noWitness = s.noWitness(ctx); s.race.noWitness != "" {
			sc.Note("%s is below the %d the kubelet's log shows, as the metrics registration race and a counter that never moves both make it; the hop cannot take a witness start of the same kubelet to tell them apart: %s", metric, log.Logged(metric), s.race.noWitness)
		}
	}
	for s.race.noWitness == "" && kubeletmetrics.NeedsWitness(s.race.starts, metric) {
		w, err := s.witnessStart(ctx, sc, len(s.race.starts)+1)
		if err != nil {
			return nil, "", err
		}
		s.race.starts = append(s.race.starts, w)
	}
	return s.race.starts, s.race.noWitness, nil
}

// logEvidence puts the hop's log's reconstruction lines into the step's
// evidence, once a hop.
func (s *Scenario) logEvidence(sc *scenarios.StepContext, log kubeletmetrics.ReconstructionLog) {
	if s.race.logged {
		return
	}
	s.race.logged = true
	sc.Evidence(reports.Evidence{Name: "the kubelet's reconstruction log lines since its start", Kind: "log",
		Text: fmt.Sprintf("%d reconstructed, %d could not be constructed\n%s", log.Reconstructed, log.Failed, strings.Join(log.Lines, "\n"))})
}

// noWitness says why the hop cannot take a witness start, "" when it can:
// the start needs pods of the hop running, not being deleted, whose
// volumes it reconstructs.
// What the old pods left may stay: the catalogue judges what the hop's
// cleanup wait recorded, and the same kubelet meets it again.
func (s *Scenario) noWitness(ctx context.Context) string {
	if s.stuck != "" {
		return "the re-created pods did not run (" + s.stuck + "), so a restart would reconstruct volumes of pods the kubelet never set up, before the catalogue judges the hop"
	}
	pods, err := s.listPods(ctx)
	if err != nil {
		return "the workload's pods could not be listed: " + err.Error()
	}
	for _, p := range pods {
		if p.Spec.NodeName == s.node.String() && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return ""
		}
	}
	return fmt.Sprintf("no pod of the workload runs on node %s but pods being deleted, so a restart would find no volume of a running pod to reconstruct, or restart the kubelet in the middle of a graceful deletion", s.node)
}

// witnessStart restarts the hop's kubelet (the same binary and
// configuration) as witness start n, waits until the node is Ready with a
// heartbeat of the new kubelet, its log shows the reconstruction finished
// and its counter can be scraped, and reads the start. The node's kubelet
// log must be readable (explainRace checked it). The start's notes,
// scrape and log lines go into the step's record.
func (s *Scenario) witnessStart(ctx context.Context, sc *scenarios.StepContext, n int) (kubeletmetrics.WitnessStart, error) {
	fail := func(err error) (kubeletmetrics.WitnessStart, error) {
		return kubeletmetrics.WitnessStart{}, fmt.Errorf("witness start %d of kubelet %s: %w", n, s.hop.To, err)
	}
	ln, ok := s.node.(nodes.WithKubeletLog)
	if !ok {
		return fail(errNoKubeletLog)
	}
	// The hop's own start's log, whole, before a witness start replaces
	// it: the catalogue's judge reads a known bug's log lines there.
	if s.hopStartLog == nil {
		text, err := ln.KubeletLog(ctx)
		if err != nil {
			return fail(err)
		}
		s.hopStartLog = &text
	}
	began := time.Now()
	if err := s.node.StopKubelet(ctx); err != nil {
		return fail(err)
	}
	// The stopped kubelet renews nothing more: a later renewal of the
	// node's lease is the new one's. (Not the Ready condition's
	// heartbeat: a kubelet that finds the node's status as it would
	// write it posts none until its status changes, as v1.32's does
	// after a restart of the same version seconds later.)
	getNode := conditions.ResourcesNodes(s.res)
	before, err := leaseRenewed(ctx, s.cs, s.node.String())
	if err != nil {
		return fail(err)
	}
	if err := s.node.StartKubelet(ctx); err != nil {
		return fail(err)
	}
	if wn, ok := s.node.(nodes.WithNotes); ok {
		for _, note := range wn.Notes() {
			sc.Note("witness start %d: %s", n, note)
		}
	}
	var w kubeletmetrics.WitnessStart
	var scrape *kubeletmetrics.Scrape
	var text, last string
	readyAt := conditions.NodeReadyAtWith(getNode, s.node.String(), s.hop.To, &last)
	cond := func(ctx context.Context) (bool, error) {
		if ready, _ := readyAt(ctx); !ready {
			return false, nil
		}
		renewed, err := leaseRenewed(ctx, s.cs, s.node.String())
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if !renewed.After(before) {
			last = fmt.Sprintf("node %s Ready, its lease last renewed %s, not after the stopped kubelet's last renewal", s.node, renewed.UTC().Format(time.RFC3339Nano))
			return false, nil
		}
		if text, err = ln.KubeletLog(ctx); err != nil {
			last = "the kubelet's log: " + err.Error()
			return false, nil
		}
		if !kubeletmetrics.ParseReconstructionLog(text).Finished {
			last = `the kubelet's log since its start has no "Volume reconstruction finished" yet`
			return false, nil
		}
		if scrape, err = kubeletmetrics.Fetch(ctx, s.cs, s.node.String()); err != nil {
			last = err.Error()
			return false, nil
		}
		if w, err = kubeletmetrics.ReadWitnessStart(n, scrape, s.hop.To, text); err != nil {
			last = err.Error()
			return false, nil
		}
		return true, nil
	}
	if err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(s.scaled(nodeReadyTimeout)), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return fail(fmt.Errorf("%w (last seen: %s)", err, last))
	}
	if path, err := sc.Artifact(fmt.Sprintf("metrics-witness-%d.txt", n), scrape.Raw); err == nil {
		sc.Evidence(reports.Evidence{Name: fmt.Sprintf("kubelet metrics after witness start %d", n), Kind: "metrics", Path: path})
	}
	sc.Evidence(reports.Evidence{Name: fmt.Sprintf("the kubelet's reconstruction log lines since witness start %d", n), Kind: "log",
		Text: fmt.Sprintf("%d reconstructed, %d could not be constructed\n%s", w.Log.Reconstructed, w.Log.Failed, strings.Join(w.Log.Lines, "\n"))})
	sc.Note("restarted kubelet %s with the hop's running pods to tell the metrics registration race from a counter that never moves; %s, %s after the stop",
		s.hop.To, w, time.Since(began).Round(10*time.Millisecond))
	return w, nil
}

// leaseRenewed is when node's kubelet last renewed the node's lease
// (kube-node-lease/<node>), which a running kubelet does every 10 s
// whatever its status.
func leaseRenewed(ctx context.Context, cs kubernetes.Interface, node string) (time.Time, error) {
	l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("read node %s's lease: %w", node, err)
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}, nil
	}
	return l.Spec.RenewTime.Time, nil
}
