package reconstruction

// This file watches the StatefulSet's pods: it lists them, waits for them
// to run, and says, from their status and Warning events, why they did not.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/scenarios"
)

// maxQuotedEvents is how many of a stuck pod's Warning events its wait's
// error quotes: enough for a controller's and the scheduler's reasons.
const maxQuotedEvents = 4

// listPods returns the StatefulSet's pods by ordinal name.
func (s *Scenario) listPods(ctx context.Context) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := s.res.WithNamespace(s.cfg.Namespace).List(ctx, &list, resources.WithLabelSelector(appLabel+"="+s.cfg.Name)); err != nil {
		return nil, err
	}
	pods := list.Items
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, nil
}

// waitPodsRunning waits until Replicas pods run and are ready on the test
// node, none of them with a UID in exclude.
func (s *Scenario) waitPodsRunning(ctx context.Context, sc *scenarios.StepContext, exclude map[types.UID]bool, timeout time.Duration) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	var seen podsSeen
	var last string
	cond := func(ctx context.Context) (bool, error) {
		s.bindNewClaims(ctx, sc)
		got, err := s.listPods(ctx)
		if err != nil {
			// The list the deadline cut short would only say so: keep
			// what the last list saw.
			if ctx.Err() == nil || last == "" {
				last = err.Error()
			}
			return false, nil
		}
		pods, seen = got, observePods(got, exclude, s.node.String())
		last = seen.status
		return seen.ready == s.cfg.Replicas && len(got) == s.cfg.Replicas, nil
	}
	if err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		err = fmt.Errorf("wait for %d pods of %s/%s Running on %s: %w (last seen: %s)%s", s.cfg.Replicas, s.cfg.Namespace, s.cfg.Name, s.node, err, last, s.podWarnings(ctx, seen.waiting))
		// Skewtest's own PVs first: a claim they failed holds its pod
		// Pending (unscheduled) as a control plane fault would.
		if why := s.harnessFault(ctx, seen.waiting); why != "" {
			return nil, fmt.Errorf("%w: %s: %w", scenarios.ErrHarness, why, err)
		}
		if why := seen.controlPlaneFault(s.cfg.Replicas); why != "" {
			err = fmt.Errorf("%w: %s: %w", scenarios.ErrControlPlane, why, err)
		}
		return nil, err
	}
	return pods, nil
}

// podsSeen is one look at the StatefulSet's pods while waiting for them.
type podsSeen struct {
	// ready run and are ready on the node; created are the pods that
	// are not old ones.
	ready, created int
	// oldPresent: a pod with an old UID is still in the API.
	oldPresent bool
	// waiting are new pods not ready yet; unscheduled, the names of
	// those without a node.
	waiting     []corev1.Pod
	unscheduled []string
	status      string
}

func observePods(got []corev1.Pod, exclude map[types.UID]bool, node string) podsSeen {
	var ps podsSeen
	var status []string
	for _, p := range got {
		st := string(p.Status.Phase)
		switch {
		case exclude[p.UID]:
			st, ps.oldPresent = "old uid", true
		case p.Status.Phase == corev1.PodRunning && podReady(p) && p.Spec.NodeName == node:
			ps.created++
			ps.ready++
			st = "Running"
		default:
			ps.created++
			if reason := waitingReason(p); reason != "" {
				st += "/" + reason
			}
			ps.waiting = append(ps.waiting, p)
			if p.Spec.NodeName == "" {
				ps.unscheduled = append(ps.unscheduled, p.Name)
			}
		}
		status = append(status, fmt.Sprintf("%s(%s)=%s", p.Name, p.UID, st))
	}
	ps.status = strings.Join(status, ", ")
	if len(got) == 0 {
		ps.status = "no pods yet (is the StatefulSet controller running?)"
	}
	return ps
}

// controlPlaneFault says why pods that never came up are the control
// plane's failure, or "" when they may be the kubelet's. Creating and
// scheduling the pods is the controllers' and the scheduler's job, and
// the node was Ready: a pod never created, or never placed on the node,
// never reached the kubelet. Not while an old pod is still in the API,
// though: a kubelet that does not finish a deleted pod holds up its
// replacement.
func (ps podsSeen) controlPlaneFault(replicas int) string {
	switch {
	case len(ps.unscheduled) > 0:
		return strings.Join(ps.unscheduled, ", ") + " never scheduled onto a node"
	case ps.created < replicas && !ps.oldPresent:
		return fmt.Sprintf("the StatefulSet controller created %d of %d pods", ps.created, replicas)
	}
	return ""
}

// podWarnings quotes the newest Warning events of the pods a wait ended
// on (the scheduler's and the controllers' reasons, which the pods' own
// status may not carry), for the step's error. It reads them after the
// wait's deadline, so it has a short deadline of its own.
func (s *Scenario) podWarnings(ctx context.Context, pods []corev1.Pod) string {
	if len(pods) == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventsTimeout)
	defer cancel()
	var list corev1.EventList
	if err := s.res.WithNamespace(s.cfg.Namespace).List(ctx, &list); err != nil {
		return fmt.Sprintf("; events of %s not read: %v", podNames(pods), err)
	}
	return warningEvents(list.Items, pods, maxQuotedEvents)
}

// warningEvents formats the newest n Warning events about pods, oldest
// first. Events are matched by UID: an old pod of the same name is
// another pod.
func warningEvents(events []corev1.Event, pods []corev1.Pod, n int) string {
	want := map[types.UID]bool{}
	for _, p := range pods {
		want[p.UID] = true
	}
	var ws []corev1.Event
	for _, e := range events {
		if e.Type == corev1.EventTypeWarning && e.InvolvedObject.Kind == "Pod" && want[e.InvolvedObject.UID] {
			ws = append(ws, e)
		}
	}
	if len(ws) == 0 {
		return "; no Warning events for " + podNames(pods)
	}
	sort.SliceStable(ws, func(i, j int) bool { return eventTime(ws[i]).Before(eventTime(ws[j])) })
	if len(ws) > n {
		ws = ws[len(ws)-n:]
	}
	var out []string
	for _, e := range ws {
		out = append(out, fmt.Sprintf("%s %s %s by %s (x%d): %s", eventTime(e).UTC().Format(time.TimeOnly), e.InvolvedObject.Name, e.Reason, eventSource(e), max(e.Count, 1), e.Message))
	}
	return "; Warning events: " + strings.Join(out, "; ")
}

func podNames(pods []corev1.Pod) string {
	var names []string
	for _, p := range pods {
		names = append(names, fmt.Sprintf("%s (uid %s)", p.Name, p.UID))
	}
	return strings.Join(names, ", ")
}

func eventTime(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

func eventSource(e corev1.Event) string {
	for _, s := range []string{e.ReportingController, e.Source.Component} {
		if s != "" {
			return s
		}
	}
	return "?"
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitingReason(p corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil {
			return cs.State.Waiting.Reason
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			return c.Message
		}
	}
	return ""
}
