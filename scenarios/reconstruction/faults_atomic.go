package reconstruction

// This file plants and observes configmap-key-missing (#121472): the
// state a kubelet killed inside a configMap volume's AtomicWriter leaves,
// with ..data in place and a key's user-visible link not yet made.

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

var _ = addFault(catalogue.Entry{
	Name: "configmap-key-missing", Item: 13,
	Plants: "the projected-secret-configmap shape's workload; with the kubelet down and nothing deleted, the key's link in each running pod's configMap volume (pods/<uid>/volumes/kubernetes.io~configmap/cfg/file.txt) removed, ..data and its timestamped dir kept, as a kubelet killed between writing ..data and the key links leaves them",
	Checks: "the same pods Running, containers and mounts untouched; within a bounded watch from the kubelet's start the key's link is back and reads the ConfigMap's value",
	// Fixed by PR #122807 in 1.30.0 only: its 1.28 cherry-pick
	// #123104 was closed unmerged, and 1.27 and 1.29 got none.
	Expect: catalogue.ByFix("1.26",
		catalogue.Expectation{Outcome: catalogue.KnownBug, Bug: "configMap key missing after the restart",
			Says:    "the volume's AtomicWriter finds the payload unchanged (\"no update required\") and returns before it makes the user-visible links: the key stays missing in the container",
			Symptom: catalogue.Symptom{Traces: []catalogue.Trace{{Kind: catalogue.Missing, Path: "pods/" + catalogue.UID + "/volumes/kubernetes.io~configmap/" + cfgVolume + "/" + cfgKey}}},
			Refs:    []catalogue.Ref{catalogue.Issue(121472), catalogue.PR(122807)}},
		catalogue.Expectation{Outcome: catalogue.Clean, Says: "the AtomicWriter makes the user-visible links at every write, so the key is back once the volume is set up again after the start",
			Refs: []catalogue.Ref{catalogue.Issue(121472), catalogue.PR(122807)}},
		"1.30.0"),
	Needs: hostFaultNeeds,
}, Fault{KeepPods: true, Shapes: []string{ShapeProjected}, Plant: plantMissingKey, Observe: observeMissingKey})

// keyLinkWatch is how long after the kubelet's start the key's link is
// given to come back. A fixed kubelet makes the links whenever it sets the
// volume up again: at its start, for the running pods' reconstructed (new
// path) or not yet mounted (old path) volumes, within seconds, and at
// every pod sync after that (syncFrequency: 10 s on the local provider,
// 1 min on kind's default). A kubelet with the bug never does, however
// long it is watched.
const keyLinkWatch = 30 * time.Second

// keyLink is where pod uid's configMap volume of the shape links its key,
// relative to the kubelet's root dir.
func keyLink(uid string) string {
	return fmt.Sprintf("pods/%s/volumes/kubernetes.io~configmap/%s/%s", uid, cfgVolume, cfgKey)
}

// plantMissingKey removes the key's link from each running pod's configMap
// volume, checking first that it is the AtomicWriter's link into ..data,
// which stays.
func plantMissingKey(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	if len(s.running) == 0 {
		return fmt.Errorf("no running pods recorded: nothing to plant in")
	}
	removed, left := 0, 0
	for i, r := range s.running {
		link := s.down.Abs(keyLink(string(r.uid)))
		// The link is this fault's own to watch (observeMissingKey), not
		// the untouched watch's: it is gone from the start.
		s.running[i].files = slices.DeleteFunc(r.files, func(f keptFile) bool { return f.path == link })
		if _, err := exec.Output(ctx, sc.Node, "test", "-d", path.Join(path.Dir(link), "..data")); err != nil {
			return fmt.Errorf("pod %s (uid %s): no ..data beside %s: %w", r.name, r.uid, link, err)
		}
		if _, err := exec.Output(ctx, sc.QuietNode, "test", "-L", link); err != nil {
			// A kubelet with the bug, at an earlier hop, left it so:
			// the state to plant is already there.
			left++
			continue
		}
		res, err := exec.Output(ctx, sc.Node, "readlink", link)
		if err != nil {
			return fmt.Errorf("pod %s (uid %s): the configMap key link: %w", r.name, r.uid, err)
		}
		if want := path.Join("..data", cfgKey); strings.TrimSpace(res.Stdout) != want {
			return fmt.Errorf("pod %s (uid %s): %s links to %q, not %q: not the AtomicWriter's layout this fault plants in", r.name, r.uid, link, strings.TrimSpace(res.Stdout), want)
		}
		if _, err := exec.Output(ctx, sc.Node, "rm", link); err != nil {
			return fmt.Errorf("pod %s (uid %s): %w", r.name, r.uid, err)
		}
		removed++
	}
	sc.Note("removed the configMap key link %s of %d running pods (%d had none: an earlier kubelet left it missing); ..data and its timestamped dir kept", cfgKey, removed, left)
	return nil
}

// observeMissingKey watches each pod's key link until it is back and reads
// the ConfigMap's value, or keyLinkWatch has passed since the kubelet's
// start; a link still missing then is the bug. It runs after
// checkUntouched, so a change to the pods' containers or mounts is seen
// too.
func observeMissingKey(ctx context.Context, s *Scenario, sc *scenarios.StepContext) (catalogue.Observation, error) {
	if o, _ := observeUntouched(ctx, s, sc); len(o.Traces) > 0 {
		return o, nil
	}
	want, _ := shapeObjectsData(s.cfg.Namespace)
	end := s.kubeletUp.Add(s.scaled(keyLinkWatch))
	back := map[string]float64{}
	for {
		for _, r := range s.running {
			uid := string(r.uid)
			if _, ok := back[uid]; ok {
				continue
			}
			res, err := exec.Output(ctx, sc.QuietNode, "cat", s.down.Abs(keyLink(uid)))
			if err != nil {
				continue
			}
			if res.Stdout != want[cfgKey] {
				return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): the configMap key is back but reads %q, want %q", r.name, r.uid, res.Stdout, want[cfgKey])
			}
			back[uid] = time.Since(s.kubeletUp).Seconds()
		}
		if len(back) == len(s.running) || !time.Now().Before(end) {
			break
		}
		select {
		case <-ctx.Done():
			return catalogue.Observation{}, ctx.Err()
		case <-time.After(s.cfg.PollInterval):
		}
	}
	var missing, found []string
	var traces []catalogue.Trace
	for _, r := range s.running {
		if t, ok := back[string(r.uid)]; ok {
			found = append(found, fmt.Sprintf("pod %s: back %.1fs after the start", r.name, t))
		} else {
			missing = append(missing, fmt.Sprintf("pod %s (uid %s): %s", r.name, r.uid, s.down.Abs(keyLink(string(r.uid)))))
			traces = append(traces, catalogue.Trace{Kind: catalogue.Missing, Path: keyLink(string(r.uid)), Detail: "pod " + r.name})
		}
	}
	window := fmt.Sprintf("watched until %s after the kubelet's start", s.scaled(keyLinkWatch))
	if len(missing) > 0 {
		return catalogue.Observation{Traces: traces, Detail: fmt.Sprintf("configMap key %s still missing in %d of %d pods, %s: %s", cfgKey, len(missing), len(s.running), window, strings.Join(missing, "; "))}, nil
	}
	return catalogue.Observation{Detail: fmt.Sprintf("configMap key %s back in every pod with the ConfigMap's value (%s; %s)", cfgKey, strings.Join(found, ", "), window)}, nil
}
