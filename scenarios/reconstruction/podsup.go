package reconstruction

// This file notes when a hop's re-created pods first all run: the hop's
// "pods Running" phase, from the kubelet's start.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// podsUp watches the StatefulSet's pods from the kubelet's start until the
// re-created ones all run and are ready, and notes when. The wait that
// checks them (checkRecreated) begins only once the old pods' cleanup is
// over, which they usually precede: timed there, the phase would be the
// cleanup's. A watch, not a list per poll, so that a busy node's hundred
// pods are not decoded four times a second beside the kubelet whose cost
// the hop measures.
type podsUp struct {
	cancel context.CancelFunc
	done   chan struct{}
	// at is when they were seen up, from the kubelet's start; 0 when
	// not seen. Read only after done is closed.
	at time.Duration
}

// watchPodsUp starts watching for the re-created pods of a hop that
// force-deleted the old ones (s.hop.OldPodUIDs), from s.kubeletUp; a
// start outside a hop watches nothing. The watch ends when they are up,
// at stopPodsUp, or once the hop's waits for them would all have ended.
func (s *Scenario) watchPodsUp(ctx context.Context) {
	s.stopPodsUp()
	// The start before the first hop (a plan entry's gates) has no hop.
	if s.hop == nil || len(s.hop.OldPodUIDs) == 0 {
		return
	}
	exclude := map[types.UID]bool{}
	for _, u := range s.hop.OldPodUIDs {
		exclude[types.UID(u)] = true
	}
	start := s.kubeletUp
	bound := s.scaled(nodeReadyTimeout) + s.cfg.CleanupTimeout + s.scaled(podsRunningTimeout)
	wctx, cancel := context.WithTimeout(ctx, bound)
	w := &podsUp{cancel: cancel, done: make(chan struct{})}
	s.podsUp = w
	pods := s.cs.CoreV1().Pods(s.cfg.Namespace)
	opts := metav1.ListOptions{LabelSelector: appLabel + "=" + s.cfg.Name}
	up := func(seen map[types.UID]corev1.Pod) bool {
		got := make([]corev1.Pod, 0, len(seen))
		for _, p := range seen {
			got = append(got, p)
		}
		ps := observePods(got, exclude, s.node.String())
		return ps.ready == s.cfg.Replicas && len(got) == s.cfg.Replicas
	}
	go func() {
		defer close(w.done)
		defer cancel()
		list, err := pods.List(wctx, opts)
		if err != nil {
			return
		}
		seen := map[types.UID]corev1.Pod{}
		for _, p := range list.Items {
			seen[p.UID] = p
		}
		if up(seen) {
			w.at = time.Since(start)
			return
		}
		opts.ResourceVersion = list.ResourceVersion
		wi, err := pods.Watch(wctx, opts)
		if err != nil {
			return
		}
		defer wi.Stop()
		for {
			var ev watch.Event
			select {
			case <-wctx.Done():
				return
			case e, open := <-wi.ResultChan():
				if !open {
					return
				}
				ev = e
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				// The watch's own error (a Status): the wait in
				// checkRecreated times the phase instead.
				return
			}
			switch ev.Type {
			case watch.Deleted:
				delete(seen, p.UID)
			case watch.Added, watch.Modified:
				seen[p.UID] = *p
			}
			if up(seen) {
				w.at = time.Since(start)
				return
			}
		}
	}()
}

// stopPodsUp ends the hop's watch, if any, and returns when it saw the
// re-created pods up (0: not seen).
func (s *Scenario) stopPodsUp() time.Duration {
	w := s.podsUp
	if w == nil {
		return 0
	}
	s.podsUp = nil
	w.cancel()
	<-w.done
	return w.at
}
