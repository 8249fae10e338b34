package reconstruction

// This file observes restart-kill-container (#124057): after a kubelet
// restart with nothing deleted, a running pod's container dies, and the
// kubelet must start it again on the volumes it reconstructed.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

var _ = addFault(catalogue.Entry{
	Name: "restart-no-delete", Item: 10,
	Plants: "a kubelet stop, swap and start with nothing deleted",
	Checks: "the same pod UIDs Running with the same container IDs and restart counts; every volume mount of the pods untouched (same mount IDs); reconstruction metrics",
	Expect: []catalogue.Expectation{{From: "1.30", Outcome: catalogue.Clean, Says: "the running pods' volumes are reconstructed and left mounted; no container restarts"}},
	Needs:  faultNeeds,
}, Fault{KeepPods: true, Observe: observeUntouched})

var _ = addFault(catalogue.Entry{
	Name:   "shapes-restart",
	Plants: "the six shapes' workload (block, subpath, emptydir-memory, projected-secret-configmap, generic-ephemeral and csi-inline-ephemeral in one pod, skewtest's driver in CSI_MODE=ebs); a kubelet stop, swap and start with nothing deleted",
	Checks: "the same pod Running with the same container IDs and restart counts; every mount of the pod on the node (its volumes, the subPath binds, the block volume's map link and publish bind) with its mount ID unchanged; every marker the pod wrote (each writable volume, the block device's first sector), the configMap, secret and projected files and their ..data links unchanged; no line in the kubelet's log since its start unmounting, unmapping, unstaging or detaching one of the pod's volumes",
	// Read in v1.37.2's reconstruct.go: every volume dir is
	// reconstructed at start, the running pod's too, marked
	// uncertain and set up again in place (SetUp and MapPodDevice
	// find their mounts and links there and keep them; the
	// AtomicWriter writes nothing for an unchanged payload).
	Expect: []catalogue.Expectation{{From: "1.34", Outcome: catalogue.Clean, Says: "the running pod's volumes are reconstructed as uncertain and set up again in place: no unmount, remount or rewrite, no container restart"}},
	Needs:  []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.BlockVolumes, nodes.HostNode},
}, Fault{KeepPods: true, Shapes: everyShape, Observe: observeUntouched})

// everyShape is every shape the scenario adds (TestShapesRestartHasEveryShape
// holds it to Shapes): package variables are set before Shapes is whole, so
// shapes-restart cannot ask it.
var everyShape = []string{ShapeBlock, ShapeCSIInline, ShapeEmptyDirMemory, ShapeGenericEphemeral, ShapeProjected, ShapeSubpath}

var _ = addFault(catalogue.Entry{
	Name: "restart-kill-container", Item: 15,
	Plants: "a kubelet stop, swap and start with nothing deleted; once the pods were watched untouched, each one's workload container killed on the node",
	Checks: "the same pods Running with the same containers until the kill; then each killed container runs again within a bounded watch, its restart count up",
	// #124057: with NewVolumeManagerReconstruction on and
	// SELinuxMountReadWriteOncePod off, a reconstructed volume
	// keeps its provisional outer name, so the pod's volumes
	// read as unmounted and its sync fails: running containers
	// run on, a dead one is never started again. Fixed by
	// #124048 and its backports; 1.28's default gates (the
	// SELinux gate on) never had it.
	Expect: append(catalogue.ByFix("1.28",
		catalogue.Expectation{Gates: map[string]bool{"SELinuxMountReadWriteOncePod": false}, Outcome: catalogue.KnownBug, Bug: "killed container not started again",
			Says: "the reconstructed volume keeps its provisional outer name, so the pod's sync reports its volumes unmounted (\"unmounted volumes=[...]\") and the kubelet never starts the dead container again",
			// The sync's "unmounted volumes=[...]" error comes only
			// after WaitForAttachAndMount's 2 min bound, past the
			// watch: no log line is required.
			Symptom: catalogue.Symptom{Traces: []catalogue.Trace{{Kind: catalogue.NotRestarted, Path: "pods/" + catalogue.UID}}},
			Refs:    []catalogue.Ref{catalogue.Issue(124057), catalogue.PR(124048)}},
		catalogue.Expectation{Gates: map[string]bool{"SELinuxMountReadWriteOncePod": false}, Outcome: catalogue.Clean, Says: "the reconstructed volume gets the pod's outer name, and the dead container is started again",
			Refs: []catalogue.Ref{catalogue.Issue(124057), catalogue.PR(124048)}},
		"1.28.9", "1.29.4", "1.30.0"),
		catalogue.Expectation{From: "1.28", Outcome: catalogue.Clean, Says: "the dead container is started again on the reconstructed volumes", Refs: []catalogue.Ref{catalogue.Issue(124057)}}),
	Needs: hostFaultNeeds,
}, Fault{KeepPods: true, BugLasts: true, Observe: observeContainerRestart})

// containerRestartWatch is how long a killed container gets to run again:
// the kubelet's first restart of a container that exited waits out no
// back-off, and the pod worker syncs within seconds of the exit; one
// whose volumes it thinks unmounted (#124057) never does.
const containerRestartWatch = 40 * time.Second

// containerProcsScript runs, on the node, its command for every process
// $p whose cgroup names container ID $1: with the cgroupfs driver the ID
// is a cgroup directory, with the systemd driver part of a scope's name,
// on cgroup v1 and v2, on any provider's node. CMD stands for the command.
const containerProcsScript = `for f in /proc/[0-9]*/cgroup; do if grep -q "$1" "$f" 2>/dev/null; then p=${f#/proc/}; p=${p%/cgroup}; CMD; fi; done`

// killContainerScript kills every process of container ID $1 and prints
// the PIDs it killed; containerPIDsScript only prints them.
var (
	killContainerScript = strings.Replace(containerProcsScript, "CMD", `kill -KILL "$p" 2>/dev/null && echo "$p"`, 1)
	containerPIDsScript = strings.Replace(containerProcsScript, "CMD", `echo "$p"`, 1)
)

// observeContainerRestart: after the untouched watch, each running pod's
// workload container is killed on the node, and must run again within
// containerRestartWatch with its restart count up by one. A container that
// stays down is the bug, with the pod's Warning events as the kubelet's
// words for why.
func observeContainerRestart(ctx context.Context, s *Scenario, sc *scenarios.StepContext) (catalogue.Observation, error) {
	if o, _ := observeUntouched(ctx, s, sc); len(o.Traces) > 0 {
		return o, nil
	}
	pods, err := s.listPods(ctx)
	if err != nil {
		return catalogue.Observation{}, err
	}
	before := map[string]int32{}
	killed := time.Now()
	for _, p := range pods {
		st, ok := workloadStatus(p)
		if !ok || st.State.Running == nil {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): its workload container is not running before the kill", p.Name, p.UID)
		}
		id := strings.TrimPrefix(st.ContainerID, "containerd://")
		res, err := exec.Output(ctx, sc.Node, "sh", "-c", killContainerScript, "kill-container", id)
		if err != nil {
			return catalogue.Observation{}, fmt.Errorf("pod %s: kill container %s: %w", p.Name, id, err)
		}
		if strings.TrimSpace(res.Stdout) == "" {
			return catalogue.Observation{}, fmt.Errorf("pod %s: no process of container %s found on the node to kill", p.Name, id)
		}
		before[p.Name] = st.RestartCount
		sc.Note("pod %s uid %s: killed container %s (pids %s), restart count %d", p.Name, p.UID, id, strings.Join(strings.Fields(res.Stdout), " "), st.RestartCount)
	}
	end := killed.Add(s.scaled(containerRestartWatch))
	back := map[string]float64{}
	var last []corev1.Pod
	for {
		if last, err = s.listPods(ctx); err == nil {
			for _, p := range last {
				if st, ok := workloadStatus(p); ok && st.RestartCount > before[p.Name] && st.State.Running != nil {
					if _, seen := back[p.Name]; !seen {
						back[p.Name] = time.Since(killed).Seconds()
					}
				}
			}
		}
		if len(back) == len(before) || !time.Now().Before(end) {
			break
		}
		select {
		case <-ctx.Done():
			return catalogue.Observation{}, ctx.Err()
		case <-time.After(s.cfg.PollInterval):
		}
	}
	var down, up []string
	var stuck []corev1.Pod
	var traces []catalogue.Trace
	for _, p := range last {
		if t, ok := back[p.Name]; ok {
			up = append(up, fmt.Sprintf("pod %s running again %.1fs after the kill", p.Name, t))
		} else if _, killedIt := before[p.Name]; killedIt {
			down = append(down, fmt.Sprintf("pod %s (uid %s)", p.Name, p.UID))
			stuck = append(stuck, p)
			traces = append(traces, catalogue.Trace{Kind: catalogue.NotRestarted, Path: "pods/" + string(p.UID), Detail: "pod " + p.Name})
		}
	}
	if len(down) > 0 {
		return catalogue.Observation{Traces: traces, Detail: fmt.Sprintf("the killed container of %s did not run again within %s; %s", strings.Join(down, ", "), s.scaled(containerRestartWatch), s.whyNotStarted(ctx, stuck))}, nil
	}
	return catalogue.Observation{Detail: fmt.Sprintf("every killed container ran again (%s)", strings.Join(up, "; "))}, nil
}

// workloadStatus is the status of pod p's workload container.
func workloadStatus(p corev1.Pod) (corev1.ContainerStatus, bool) {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "workload" {
			return c, true
		}
	}
	return corev1.ContainerStatus{}, false
}

// whyNotStarted is the kubelet's own last error line for each pod (its
// pod worker's "Error syncing pod"), or the pods' Warning events when the
// node cannot show the kubelet's log.
func (s *Scenario) whyNotStarted(ctx context.Context, pods []corev1.Pod) string {
	text, err := s.hopKubeletLog(ctx)
	if err != nil {
		return strings.TrimPrefix(s.podWarnings(ctx, pods), "; ")
	}
	var out []string
	for _, p := range pods {
		if line := lastKubeletError(text, string(p.UID)); line != "" {
			out = append(out, fmt.Sprintf("pod %s: the kubelet logged: %s", p.Name, line))
		}
	}
	if len(out) == 0 {
		return "the kubelet's log names no error for them" + s.podWarnings(ctx, pods)
	}
	return strings.Join(out, "; ")
}
