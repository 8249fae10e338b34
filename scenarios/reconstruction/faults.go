package reconstruction

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

// Fault is how a catalogue fault changes each hop of the scenario: what it
// plants on the node while the kubelet is down, what it checks instead of
// or beyond the baseline, and how it tells whether the entry's bug showed
// (catalogue.Judge then decides what that means for the hop's kubelet).
type Fault struct {
	Entry catalogue.Entry
	// KeepPods: the hop deletes nothing; the same pods must run on, their
	// containers and volume mounts untouched.
	KeepPods bool
	// Plant runs while the kubelet is down, after the pods were
	// force-deleted; its commands are recorded in its step.
	Plant func(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error
	// MayLeave: the entry's bug leaves old pods' state behind, so the
	// cleanup wait is bounded by mayLeaveBound and what is left is judged
	// against the bug's symptom (catalogue.Symptom), not failed outright.
	MayLeave bool
	// MayStick: the entry's bug can keep the re-created pods from running
	// (a volume published without being staged). On a hop whose kubelet
	// the catalogue expects to have the bug, their wait is bounded by
	// mayStickBound and pods that did not run are the observation, with
	// why (s.stuck), not a failure.
	MayStick bool
	// BugLasts: the entry's known bug leaves the pods this fault keeps
	// otherwise than its plant needs them, for good (a running pod's
	// volume unmounted under its Terminating claim, a killed container
	// never started again). A hop after one whose kubelet the catalogue
	// expects to have the bug first re-creates the workload's pods when
	// the bug changed them (restore.go); failing that, it is not reached.
	BugLasts bool
	// DataLost: the fault takes the volumes' data with it (the test
	// driver's tmpfs volumes do not survive their global mount going, as
	// after a real reboot), so the re-created pods' markers are read again
	// instead of compared.
	DataLost bool
	// Metrics, when set, replaces the volume kind's metric expectations;
	// the counters a known bug's symptom names are set from it on a hop
	// whose kubelet has the bug (symptomMetrics).
	Metrics func(volumesAtStart int) []kubeletmetrics.Expectation
	// AccessMode, when set, is the StatefulSet's claims' and PVs' access
	// mode in place of ReadWriteOnce.
	AccessMode corev1.PersistentVolumeAccessMode
	// Shapes are catalogue shapes the plant needs in the workload
	// (reconstruction.Shapes): their objects and volumes are made as for
	// the shapes themselves, but only the fault is judged.
	Shapes []string
	// Observe reads the hop's outcome after its checks: what the fault's
	// own checks saw, as traces where a known bug's symptom names them;
	// the old pods' leftovers, the kubelet's log and counters are added
	// for the judge (evidence).
	Observe func(ctx context.Context, s *Scenario, sc *scenarios.StepContext) (catalogue.Observation, error)

	// Stop, when set, takes the kubelet down in place of a plain stop: it
	// runs with the kubelet up and the pods Running, returns with the
	// kubelet gone, and adds the UIDs of pods it made to s.oldUIDs.
	Stop func(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error
	// NoDelete: the hop deletes nothing while the kubelet is down (Stop
	// already removed what it meant to); the node state is recorded.
	NoDelete bool
	// Start, when set, starts the kubelet in place of a plain start.
	Start func(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error
	// AfterStart, when set, runs once the kubelet runs, before the node
	// is waited for.
	AfterStart func(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error
	// AfterCleanup, when set, runs once the old pods are cleaned, before
	// the re-created pods are checked.
	AfterCleanup func(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error
	// Holds is how long each hop of the fault waits on purpose beyond a
	// MayLeave bound (an outage, a preStop's grace, a bounded wait for an
	// unstage that never comes), for DemandOf.
	Holds time.Duration
}

// mayStickBound is how long the re-created pods get to run on a hop whose
// kubelet is expected to keep them from it: the kubelet retries a failed
// mount at 0.5 s, doubling, so by then it has tried six times, and a pod
// of a kubelet without the bug runs within seconds.
const mayStickBound = 45 * time.Second

// mayLeaveBound is how long a hop whose fault may leave old pods' state
// behind waits for the kubelet to clean up: the orphan sweep runs every
// 2 s, so a cleanup not done by then is not coming.
const mayLeaveBound = 30 * time.Second

// Faults are the catalogue faults the scenario implements, by entry name
// (each declared with addFault beside its code).
func Faults() map[string]Fault {
	out := map[string]Fault{}
	for name, f := range registry.faults {
		out[name] = f
	}
	return out
}

// LookupFault finds an implemented fault by catalogue name.
func LookupFault(name string) (Fault, error) {
	f, ok := Faults()[name]
	if !ok {
		var names []string
		for n := range Faults() {
			names = append(names, n)
		}
		sort.Strings(names)
		if _, known := CatalogueEntry(name); known {
			return Fault{}, fmt.Errorf("catalogue entry %q is not implemented as a fault yet (go run ./cmd/skewtest scenarios); implemented: %s", name, strings.Join(names, ", "))
		}
		return Fault{}, fmt.Errorf("no catalogue fault %q; implemented: %s", name, strings.Join(names, ", "))
	}
	return f, nil
}

// running is what a hop that deletes nothing must find again.
type running struct {
	uid        types.UID
	name       string
	containers map[string]string // container name → "<id> restarts <n>"
	// mounts are every mount of the pod on the node, by mount point:
	// below pods/<uid> (its volumes, subPath binds), below plugins/ naming
	// its UID (a block volume's map link and publish bind), and its
	// volumes' staging mounts (podMounts).
	mounts map[string]int // mount point → mount ID
	// files are the files of its volumes the watch reads, with what they
	// held while the kubelet was down (keptFiles).
	files []keptFile
	// pvs are the PVs of its claims: the kubelet's lines about a
	// volume's device (unstage, unmap, detach) name them.
	pvs []string
}

// recordRunning records the running pods' containers, every mount of
// theirs on the node and the files of their volumes, with the kubelet
// down.
func (s *Scenario) recordRunning(ctx context.Context, sc *scenarios.StepContext) error {
	pods, err := s.listPods(ctx)
	if err != nil {
		return err
	}
	snap, err := s.snapshot(ctx, sc.Node)
	if err != nil {
		return err
	}
	s.down = snap
	s.running = nil
	s.volsAtStart = 0
	for _, p := range pods {
		r := running{uid: p.UID, name: p.Name, containers: containerState(p)}
		pvs, err := s.podPVs(ctx, p)
		if err != nil {
			return err
		}
		r.pvs = sortedPVs(pvs)
		r.mounts = s.podMounts(snap, string(p.UID), r.pvs)
		if len(r.mounts) == 0 {
			return fmt.Errorf("pod %s (uid %s) has no mounts on the node: the scenario would prove nothing", p.Name, p.UID)
		}
		r.files = s.keptFiles(p, pvs, snap)
		s.volsAtStart += len(snap.Pod(string(p.UID)).VolumeDirs())
		s.running = append(s.running, r)
	}
	held, err := s.readKeptFiles(ctx, sc.Node)
	if err != nil {
		return err
	}
	for i := range s.running {
		r := &s.running[i]
		for j := range r.files {
			r.files[j].was = held[r.files[j].path]
		}
		sc.Note("pod %s uid %s: containers %v, %d mounts, %d files of its volumes (%s)", r.name, r.uid, r.containers, len(r.mounts), len(r.files), describeKeptFiles(r.files))
	}
	s.snapshotEvidence(sc, "node state while the kubelet is down", snap)
	return nil
}

func containerState(p corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, c := range p.Status.ContainerStatuses {
		out[c.Name] = fmt.Sprintf("%s restarts %d", c.ContainerID, c.RestartCount)
	}
	return out
}

// untouchedWatch is how long after the kubelet's start a hop that keeps
// its pods watches them for a change, at the least: the kubelet unmounts a
// running pod's volume it wrongly left out of its desired state (#130335:
// 1.42 s after the start, measured on v1.32.2) only once its desired state
// of world is populated and it has read the node's status, which on a
// busy 2-core machine takes seconds; a single look at node Ready (about
// 1.3 s after the start) saw nothing. The watch also lasts
// untouchedSettle past the pods' Running again, so several reconciler
// passes (100 ms each) run after the populator has seen every pod.
const (
	untouchedWatch  = 20 * time.Second
	untouchedSettle = 5 * time.Second
)

// checkUntouched waits for the pods to run again, then watches their
// containers, mounts and volumes' files for a bounded window
// (untouchedWatch after the kubelet's start, and untouchedSettle after the
// pods ran), recording every change against what they were before the
// kubelet stopped. A change seen once stays recorded, even if it is undone
// later (a remount). Then the kubelet's log since its start must name no
// unmount of their volumes (unmountsLogged): a volume unmounted and set up
// again between two looks leaves its lines there.
func (s *Scenario) checkUntouched(ctx context.Context, sc *scenarios.StepContext) error {
	pods, err := s.waitPodsRunning(ctx, sc, nil, s.scaled(podsRunningTimeout))
	if err != nil {
		return err
	}
	s.timing(reports.PhasePodsRunning, time.Since(s.kubeletUp))
	end := s.kubeletUp.Add(s.scaled(untouchedWatch))
	if settle := time.Now().Add(s.scaled(untouchedSettle)); settle.After(end) {
		end = settle
	}
	seen := map[string]bool{}
	s.changes = nil
	polls := 0
	var snap *nodestate.Snapshot
	for {
		polls++
		if snap, err = s.snapshot(ctx, sc.QuietNode); err != nil {
			return err
		}
		got, err := s.listPods(ctx)
		if err != nil {
			return fmt.Errorf("list the pods while watching them: %w", err)
		}
		files, err := s.readKeptFiles(ctx, sc.QuietNode)
		if err != nil {
			return err
		}
		for _, c := range s.untouchedChanges(got, snap, files) {
			if !seen[c.Detail] {
				seen[c.Detail] = true
				c.Detail = fmt.Sprintf("%s (%.2fs after the kubelet's start)", c.Detail, time.Since(s.kubeletUp).Seconds())
				s.changes = append(s.changes, c)
			}
		}
		if !time.Now().Before(end) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.cfg.PollInterval):
		}
	}
	sc.Evidence(reports.Evidence{Name: "changes since the kubelet was stopped", Kind: "diff", Text: nodestate.Diff(s.down, snap)})
	sc.Note("%d pods Running again; watched their containers, mounts and volumes' files until %.1fs after the kubelet's start (%d looks, at least %s after the start and %s after they ran): %d changes",
		len(pods), end.Sub(s.kubeletUp).Seconds(), polls, s.scaled(untouchedWatch), s.scaled(untouchedSettle), len(s.changes))
	text, err := s.hopKubeletLog(ctx)
	if err != nil {
		s.logUnread = err.Error()
		sc.Note("the kubelet's log could not be read for unmounts of the pods' volumes: %v", err)
		return nil
	}
	s.logUnread = ""
	lines := s.unmountsLogged(text)
	if len(lines) > 0 {
		sc.Evidence(reports.Evidence{Name: "the kubelet's log since its start: unmounts of the running pods' volumes", Kind: "log", Text: strings.Join(lines, "\n") + "\n"})
		s.changes = append(s.changes, catalogue.Trace{Kind: catalogue.UnmountLogged, Detail: fmt.Sprintf("the kubelet logged %d unmounts of the running pods' volumes since its start, the first: %s", len(lines), lines[0])})
	}
	return nil
}

// untouchedChanges compares the pods, the node and the files of their
// volumes now (files: what readKeptFiles read) with what they were before
// the kubelet stopped (s.running): each change a trace, its Detail the
// change in words.
func (s *Scenario) untouchedChanges(pods []corev1.Pod, snap *nodestate.Snapshot, files map[string]string) []catalogue.Trace {
	byUID := map[types.UID]corev1.Pod{}
	for _, p := range pods {
		byUID[p.UID] = p
	}
	rel := func(mp string) string {
		if r, ok := strings.CutPrefix(mp, strings.TrimSuffix(snap.ResolvedRoot, "/")+"/"); ok {
			return r
		}
		return mp
	}
	var changes []catalogue.Trace
	for _, r := range s.running {
		dir := "pods/" + string(r.uid)
		p, ok := byUID[r.uid]
		if !ok {
			changes = append(changes, catalogue.Trace{Kind: catalogue.PodGone, Path: dir, Detail: fmt.Sprintf("pod %s uid %s is gone", r.name, r.uid)})
			continue
		}
		now := containerState(p)
		for c, was := range r.containers {
			if now[c] != was {
				changes = append(changes, catalogue.Trace{Kind: catalogue.ContainerChanged, Path: dir, Detail: fmt.Sprintf("pod %s uid %s container %s was %q, now %q", r.name, r.uid, c, was, now[c])})
			}
		}
		ids := s.podMounts(snap, string(r.uid), r.pvs)
		for mp, id := range r.mounts {
			switch now, ok := ids[mp]; {
			case !ok:
				changes = append(changes, catalogue.Trace{Kind: catalogue.Unmounted, Path: rel(mp), Detail: fmt.Sprintf("pod %s uid %s: %s was unmounted", r.name, r.uid, mp)})
			case now != id:
				changes = append(changes, catalogue.Trace{Kind: catalogue.Remounted, Path: rel(mp), Detail: fmt.Sprintf("pod %s uid %s: %s was remounted (mount ID %d, now %d)", r.name, r.uid, mp, id, now)})
			}
		}
		for _, f := range r.files {
			if now := files[f.path]; now != f.was {
				changes = append(changes, catalogue.Trace{Kind: catalogue.ContentChanged, Path: rel(f.path), Detail: fmt.Sprintf("pod %s uid %s: %s %s held %q, now %q", r.name, r.uid, f.how, f.path, truncate(f.was, maxQuotedContent), truncate(now, maxQuotedContent))})
			}
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Detail < changes[j].Detail })
	return changes
}

// observeUntouched: each change to the running pods is a trace.
func observeUntouched(_ context.Context, s *Scenario, _ *scenarios.StepContext) (catalogue.Observation, error) {
	if len(s.changes) > 0 {
		return catalogue.Observation{Traces: append([]catalogue.Trace(nil), s.changes...), Detail: changesDetail(s.changes)}, nil
	}
	mounts, files := 0, 0
	for _, r := range s.running {
		mounts += len(r.mounts)
		files += len(r.files)
	}
	logged := "the kubelet's log since its start names no unmount of their volumes"
	if s.logUnread != "" {
		logged = "the kubelet's log was not read (" + s.logUnread + ")"
	}
	return catalogue.Observation{Detail: fmt.Sprintf("%d pods kept their containers, restart counts, %d mounts and %d files of their volumes; %s", len(s.running), mounts, files, logged)}, nil
}

// changesDetail is the running pods' changes in words.
func changesDetail(changes []catalogue.Trace) string {
	var out []string
	for _, c := range changes {
		out = append(out, c.Detail)
	}
	return strings.Join(out, "; ")
}

// notePlanted records the volume dirs (or files where one belongs) the
// fault made unreconstructable on this hop, and counts those the hop's
// kubelet will find: this hop's, and those of earlier hops still on the
// node (the known bugs these faults show leave them).
func (s *Scenario) notePlanted(sc *scenarios.StepContext, planted []string) {
	n := len(planted)
	for _, p := range s.plantedEver {
		if _, ok := s.down.Lookup(p); ok {
			n++
		}
	}
	s.plantedEver = append(s.plantedEver, planted...)
	s.unreconstructable = n
	sc.Note("%d volume dirs on the node the kubelet cannot reconstruct (%d planted on this hop)", n, len(planted))
}

// strayName is the file plantFileForDir puts among a pod's CSI volume dirs.
const strayName = "skewtest-stray-file"

// mayStick tells whether the hop's re-created pods may not run: its fault
// says its bug can do that, and the catalogue expects the bug of the
// hop's kubelet.
func (s *Scenario) mayStick() bool {
	f := s.cfg.Fault
	if f == nil || !f.MayStick || s.hop == nil {
		return false
	}
	v, err := version.ParseSemantic(s.hop.To)
	if err != nil {
		return false
	}
	x, ok := f.Entry.ExpectationForKubelet(v, s.hopGates())
	return ok && x.Outcome == catalogue.KnownBug
}

// stuckWhy says why the re-created pods did not run: the wait's error
// (with their Warning events), and for each of the workload's PVs whether
// the kubelet's log since its start shows MountDevice (NodeStage) for it.
func (s *Scenario) stuckWhy(ctx context.Context, sc *scenarios.StepContext, werr error) string {
	why := werr.Error()
	text, err := s.hopKubeletLog(ctx)
	if err != nil {
		return why + "; the kubelet's log could not be read: " + err.Error()
	}
	var unstaged []string
	for _, pv := range s.volumes.PVs {
		staged := findVolumeLine(text, "MountVolume.MountDevice succeeded for volume", pv.Name) != ""
		failed := findVolumeLine(text, "MountVolume.SetUp failed for volume", pv.Name) != ""
		if !staged && failed {
			unstaged = append(unstaged, pv.Name)
		}
	}
	if len(unstaged) > 0 {
		sc.Evidence(reports.Evidence{Name: "the kubelet's log since its start: SetUp (NodePublish) failed, and no MountDevice (NodeStage) for PVs " + strings.Join(unstaged, ", "), Kind: "log", Text: grepLines(text, "MountVolume", 40)})
		why = fmt.Sprintf("the kubelet set up (NodePublish) PVs %s without staging them: its log since its start has MountVolume.SetUp failed and no MountVolume.MountDevice for them; %s", strings.Join(unstaged, ", "), why)
	}
	return why
}

// observeStuckOrLeftovers: the re-created pods that did not run are a
// trace (with why), else what the old pods left is the observation.
func observeStuckOrLeftovers(ctx context.Context, s *Scenario, sc *scenarios.StepContext) (catalogue.Observation, error) {
	if s.stuck != "" {
		return catalogue.Observation{Detail: "the re-created pods did not run: " + s.stuck,
			Traces: []catalogue.Trace{{Kind: catalogue.NotRunning, Detail: s.stuck}}}, nil
	}
	return observeLeftovers(ctx, s, sc)
}

// observeLeftovers says what the old pods left, in the kubelet's words;
// the judge gets the leftovers themselves as traces (evidence), and the
// kubelet's counters and log, to hold against the bug's symptom.
func observeLeftovers(ctx context.Context, s *Scenario, _ *scenarios.StepContext) (catalogue.Observation, error) {
	if len(s.left) > 0 {
		return catalogue.Observation{Detail: fmt.Sprintf("left by the old pods %s after the kubelet's start: %s", mayLeaveBound, s.leftoverHeadline(ctx, s.left))}, nil
	}
	return catalogue.Observation{Detail: fmt.Sprintf("old pods %s cleaned; the re-created pods mounted their volumes again", strings.Join(s.oldUIDs, ", "))}, nil
}

// hopGates are the feature gates of the hop's kubelet (its plan entry's),
// nil before the first hop or for an entry that sets none.
func (s *Scenario) hopGates() map[string]bool {
	if s.hop == nil {
		return nil
	}
	return s.hop.ToGates
}

// judge asks the catalogue what the hop's observation means for the
// kubelet that started on the planted state.
func (s *Scenario) judge(to *version.Version) func(context.Context, *scenarios.StepContext) error {
	return func(ctx context.Context, sc *scenarios.StepContext) error {
		f := s.cfg.Fault
		o, err := f.Observe(ctx, s, sc)
		if err != nil {
			return err
		}
		s.evidence(ctx, &o, oldPodTraces(s.leftSnap, s.left))
		sc.Note("observed: %s", o.Detail)
		d, err := catalogue.Judge(f.Entry, to, s.hopGates(), o)
		if err != nil {
			return err
		}
		if d != nil {
			sc.Deviation(*d)
		}
		return nil
	}
}

// judgeLeakedGlobalMounts judges the CSI global mounts still mounted after
// the workload was deleted, when a known bug left old pods' state (which
// can hold them), against that bug's symptom on the plan's last kubelet:
// the leak it names is an expected deviation, one it does not name fails,
// and one it names but that did not show is said.
func (s *Scenario) judgeLeakedGlobalMounts(ctx context.Context, sc *scenarios.StepContext, snap *nodestate.Snapshot) error {
	traces := s.globalMountTraces(snap)
	s.snapshotEvidence(sc, "node state after deleting the StatefulSet", snap)
	// The kubelet the node runs: the plan's last, unless hops were not
	// reached.
	last, gates := version.MustParseGeneric(s.hop.To), s.hop.ToGates
	detail := fmt.Sprintf("after the StatefulSet was deleted, with %d things the old pods left: no CSI global mount of the workload still mounted", len(s.leftEver))
	if len(traces) > 0 {
		detail = fmt.Sprintf("after the StatefulSet was deleted: %s, held by the old pods' mounts the kubelet left (%d things)", joinTraces(traces), len(s.leftEver))
	}
	o := catalogue.Observation{Detail: detail}
	s.evidence(ctx, &o, traces)
	d, err := catalogue.JudgeAfterDelete(s.leakEntry(), last, gates, o)
	if err != nil {
		return err
	}
	if d != nil {
		d.Check += ": global mounts after the workload is deleted"
		sc.Deviation(*d)
	}
	return nil
}

// plant is the fault's Plant as a step.
func (s *Scenario) plant(ctx context.Context, sc *scenarios.StepContext) error {
	return s.cfg.Fault.Plant(ctx, s, sc)
}
