// Package reconstruction is the scenario behind KEP-3756's upgrade and
// downgrade sign-off, made repeatable: a StatefulSet with one PVC per pod
// on one node; then, for each hop of the plan, stop the kubelet, swap its
// binary, force-delete the pods while it is down, start it, and check that
// nothing of the old pods is left (mounts, pod dirs, plugin entries), that
// the re-created pods run on the same volumes with their data, that each
// CSI global mount is mounted exactly once, and that the kubelet's
// reconstruction metrics report no errors beyond what the scenario
// documents for the volume kind.
package reconstruction

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/conditions"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/clusters/timeouts"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// Cluster is what the scenario needs of a provider beyond its node.
type Cluster interface {
	RESTConfig() (*rest.Config, error)
	ProvisionVolumes(ctx context.Context, req storage.Request) (storage.Volumes, error)
	Workload() storage.Workload
}

// Config is one scenario run.
type Config struct {
	Plan plan.Plan
	// Kubelets holds one binary per plan entry, in plan order.
	Kubelets  []binaries.Binary
	Replicas  int
	Kind      storage.Kind
	Size      string
	Namespace string
	Name      string
	// PollInterval is how often node state is read while waiting; the
	// harness notices a change within this time.
	PollInterval time.Duration
	// CleanupTimeout bounds each wait for the kubelet to clean up.
	CleanupTimeout time.Duration
	// TimeoutFactor stretches every wait of the scenario (timeouts.FactorEnv);
	// 0 counts as 1.
	TimeoutFactor time.Duration
	// FirstHop is the number of the plan's first hop (default 1), for a
	// plan that continues a longer one, such as a matrix tour's trail.
	FirstHop int
	// Fault, when set, is the catalogue fault each hop plants instead of
	// the baseline force-delete alone.
	Fault *Fault
	// Shapes are catalogue shapes added to the workload's pod, each
	// checked and judged after every hop (shapes.go).
	Shapes []Shape
	Logger *slog.Logger
}

// The scenario's waits, before timeouts.Scale.
const (
	defaultCleanupTimeout = 3 * time.Minute
	podsRunningTimeout    = 3 * time.Minute
	nodeReadyTimeout      = 2 * time.Minute
	podsGoneTimeout       = time.Minute
	// eventsTimeout bounds reading the pods' events for a failed wait's
	// error, after the wait's own deadline.
	eventsTimeout = 10 * time.Second
)

// maxQuotedEvents is how many of a stuck pod's Warning events its wait's
// error quotes: enough for a controller's and the scheduler's reasons.
const maxQuotedEvents = 4

// scaled is d stretched by the configured timeout factor.
func (s *Scenario) scaled(d time.Duration) time.Duration {
	return timeouts.Scale(d, s.cfg.TimeoutFactor)
}

func (c *Config) defaults() {
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	if c.Kind == "" {
		c.Kind = storage.CSI
	}
	if c.Size == "" {
		c.Size = "16Mi"
	}
	if c.Namespace == "" {
		c.Namespace = "skewtest"
	}
	if c.Name == "" {
		c.Name = "web"
	}
	if c.PollInterval == 0 {
		c.PollInterval = 250 * time.Millisecond
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = timeouts.Scale(defaultCleanupTimeout, c.TimeoutFactor)
	}
	if c.FirstHop == 0 {
		c.FirstHop = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Scenario holds the state carried between steps.
type Scenario struct {
	cfg     Config
	cluster Cluster
	node    nodes.Node
	run     *reports.Run
	res     *resources.Resources
	cs      kubernetes.Interface
	reader  nodestate.Reader

	volumes storage.Volumes
	// provisioned are the PVs the provider made for the StatefulSet's
	// claims, as it made them (volumes holds those the claims bound).
	provisioned storage.Volumes
	pvOf        map[string]string // claim -> PV
	markers     map[string]string // PV -> marker content written at deploy
	pods        map[string]corev1.Pod
	initial     *nodestate.Snapshot
	// per hop
	oldUIDs     []string
	down        *nodestate.Snapshot
	kubeletUp   time.Time
	hop         *reports.Hop
	volsAtStart int
	// what a fault's observation reads
	faultSeen   []string // the fault's own symptoms (faults_disrupt.go)
	faultDetail string
	podFaultState
	running       []running
	changes       []string
	left          []nodestate.Leftover
	leftEver      []nodestate.Leftover
	metricResults []kubeletmetrics.Result
	// shapes, when the workload carries catalogue shapes
	shapes *shapeRun
}

// New prepares a scenario; it creates nothing until its steps run.
func New(cfg Config, cluster Cluster, node nodes.Node, run *reports.Run) (*Scenario, error) {
	cfg.defaults()
	if len(cfg.Kubelets) != len(cfg.Plan.Versions) {
		return nil, fmt.Errorf("reconstruction: %d kubelet binaries for a plan of %d versions", len(cfg.Kubelets), len(cfg.Plan.Versions))
	}
	rc, err := cluster.RESTConfig()
	if err != nil {
		return nil, err
	}
	res, err := resources.New(rc)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	s := &Scenario{
		cfg: cfg, cluster: cluster, node: node, run: run, res: res, cs: cs,
		pvOf: map[string]string{}, markers: map[string]string{},
	}
	if len(cfg.Shapes) > 0 {
		s.shapes = &shapeRun{list: cfg.Shapes, has: map[string]bool{}, markers: map[string]string{}, genPV: map[string]string{}}
		for _, sh := range cfg.Shapes {
			s.shapes.has[sh.Entry.Name] = true
		}
		if err := s.checkShapesPossible(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Steps returns the scenario's steps in order.
func (s *Scenario) Steps() []scenarios.Step {
	steps := []scenarios.Step{
		{Name: fmt.Sprintf("deploy a StatefulSet of %d pods on %s volumes", s.cfg.Replicas, s.cfg.Kind), Run: s.deploy},
		{Name: "snapshot node state (before)", Run: s.snapshotBefore},
	}
	f := s.cfg.Fault
	for i, h := range s.cfg.Plan.Hops() {
		bin := s.cfg.Kubelets[i+1]
		h.Number += s.cfg.FirstHop - 1
		n := h.Number
		to := "v" + h.To.String()
		step := func(name string, run func(context.Context, *scenarios.StepContext) error) {
			steps = append(steps, scenarios.Step{Hop: n, Name: name, Run: run})
		}
		step(fmt.Sprintf("hop %d (%s v%s → %s): stop kubelet", n, h.Direction, h.From, to), s.stopKubelet(h))
		step(fmt.Sprintf("hop %d: swap kubelet binary to %s", n, to), s.swapKubelet(bin))
		if f != nil && f.KeepPods {
			step(fmt.Sprintf("hop %d: record the running pods' containers and mounts (nothing is deleted)", n), s.recordRunning)
		} else if f != nil && f.NoDelete {
			step(fmt.Sprintf("hop %d: record the node state the kubelet will find (nothing is deleted)", n), s.recordDown)
		} else {
			step(fmt.Sprintf("hop %d: force-delete the pods while the kubelet is down", n), s.forceDelete)
		}
		if f != nil && f.Plant != nil {
			step(fmt.Sprintf("hop %d: plant fault %s", n, f.Entry.Name), s.plant)
		}
		if f != nil && f.Start != nil {
			step(fmt.Sprintf("hop %d: start kubelet %s with fault %s", n, to, f.Entry.Name), s.faultStep(f.Start))
		} else {
			step(fmt.Sprintf("hop %d: start kubelet %s", n, to), s.startKubelet)
		}
		if f != nil && f.AfterStart != nil {
			step(fmt.Sprintf("hop %d: fault %s once the kubelet runs", n, f.Entry.Name), s.faultStep(f.AfterStart))
		}
		step(fmt.Sprintf("hop %d: wait for the node Ready at kubelet %s", n, to), s.waitReady(to))
		if f != nil && f.KeepPods {
			step(fmt.Sprintf("hop %d: the same pods Running, their containers and mounts untouched", n), s.checkUntouched)
		} else {
			step(fmt.Sprintf("hop %d: wait until the old pods' mounts and directories are gone", n), s.waitCleanup)
			if f != nil && f.AfterCleanup != nil {
				step(fmt.Sprintf("hop %d: fault %s after the cleanup", n, f.Entry.Name), s.faultStep(f.AfterCleanup))
			}
			step(fmt.Sprintf("hop %d: re-created pods Running on the same volumes with their data", n), s.checkRecreated)
		}
		step(fmt.Sprintf("hop %d: kubelet metrics", n), s.checkMetrics)
		if f != nil {
			step(fmt.Sprintf("hop %d: catalogue %s %s on kubelet %s", n, f.Entry.Kind, f.Entry.Name, to), s.judge(h.To))
		}
		for _, sh := range s.cfg.Shapes {
			step(fmt.Sprintf("hop %d: catalogue %s %s on kubelet %s", n, sh.Entry.Kind, sh.Entry.Name, to), s.judgeShape(sh, h.To))
		}
	}
	steps = append(steps,
		scenarios.Step{Name: "snapshot node state (after) and compare", Run: s.snapshotAfter},
		scenarios.Step{Name: "delete the StatefulSet and check its volumes are unmounted", Run: s.deleteWorkload},
	)
	if s.shapes != nil {
		steps = append(steps, scenarios.Step{Name: "the shapes' volumes unstaged, detached and released", Run: s.releaseShapes})
	}
	return steps
}

// RemoveWorkload is the last step's work as a step of its own, for a run
// that abandons this scenario after a failed hop and goes on with another
// workload on the same node: delete the StatefulSet, check its volumes are
// unmounted and release them.
func (s *Scenario) RemoveWorkload() scenarios.Step {
	return scenarios.Step{Name: fmt.Sprintf("remove StatefulSet %s/%s, left by the failed hop", s.cfg.Namespace, s.cfg.Name), Run: s.deleteWorkload}
}

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

// deploy creates the namespace, the volumes and the StatefulSet, and waits
// until every pod runs with its marker written.
func (s *Scenario) deploy(ctx context.Context, sc *scenarios.StepContext) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.cfg.Namespace}}
	if err := s.res.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", s.cfg.Namespace, err)
	}
	claims := make([]string, s.cfg.Replicas)
	for i := range claims {
		claims[i] = claimName(s.cfg.Name, i)
	}
	req := storage.Request{Kind: s.cfg.Kind, Namespace: s.cfg.Namespace, Claims: claims, Size: s.cfg.Size, Node: s.node.String()}
	if s.cfg.Fault != nil {
		req.AccessMode = s.cfg.Fault.AccessMode
	}
	vols, err := s.cluster.ProvisionVolumes(ctx, req)
	if err != nil {
		return fmt.Errorf("provision %s volumes: %w", s.cfg.Kind, err)
	}
	s.volumes.StorageClass, s.volumes.DeleteStorageClass, s.volumes.NoStagingMount = vols.StorageClass, vols.DeleteStorageClass, vols.NoStagingMount
	s.volumes.UnstageLosesData = vols.UnstageLosesData
	s.provisioned = vols
	sts := statefulSet(s.cfg.Name, s.cfg.Namespace, s.node.String(), s.cfg.Replicas, vols.StorageClass, s.cfg.Size, req.Mode(), s.cluster.Workload())
	if s.shapes != nil {
		if len(vols.PVs) == 0 || vols.PVs[0].Driver == "" {
			return fmt.Errorf("catalogue shapes need pre-created CSI PVs from the provider (its CSI driver serves the inline volumes)")
		}
		s.shapes.driver = vols.PVs[0].Driver
		if err := s.provisionShapes(ctx, sc); err != nil {
			return err
		}
		s.addShapes(sts, vols.StorageClass)
	}
	if err := s.res.Create(ctx, sts); err != nil {
		return fmt.Errorf("create StatefulSet %s/%s: %w", s.cfg.Namespace, s.cfg.Name, err)
	}
	start := time.Now()
	pods, err := s.waitPodsRunning(ctx, sc, nil, s.scaled(podsRunningTimeout))
	if err != nil {
		return err
	}
	sc.Note("%d pods Running after %s", len(pods), time.Since(start).Round(10*time.Millisecond))
	s.run.Timings = append(s.run.Timings, reports.Timing{Phase: "workload Running", Duration: time.Since(start)})
	if err := s.boundVolumes(ctx, sc, claims); err != nil {
		return err
	}
	snap, err := s.snapshot(ctx, sc.QuietNode)
	if err != nil {
		return err
	}
	for _, p := range pods {
		pv := s.pvOf[claimOf(p)]
		marker, err := s.readMarker(ctx, sc.Node, snap, p, pv)
		if err != nil {
			return err
		}
		s.markers[pv] = marker
		sc.Note("pod %s uid %s on PV %s wrote marker %q", p.Name, p.UID, pv, marker)
	}
	if s.shapes != nil {
		return s.recordShapes(ctx, sc)
	}
	return nil
}

// boundVolumes reads the PV bound to each claim: its name, and for CSI the
// driver and volume handle the global mount is named after.
func (s *Scenario) boundVolumes(ctx context.Context, sc *scenarios.StepContext, claims []string) error {
	s.volumes.PVs = nil
	for _, claim := range claims {
		var pvc corev1.PersistentVolumeClaim
		if err := s.res.Get(ctx, claim, s.cfg.Namespace, &pvc); err != nil {
			return fmt.Errorf("get PVC %s/%s: %w", s.cfg.Namespace, claim, err)
		}
		var pv corev1.PersistentVolume
		if err := s.res.Get(ctx, pvc.Spec.VolumeName, "", &pv); err != nil {
			return fmt.Errorf("get PV %q bound to claim %s: %w", pvc.Spec.VolumeName, claim, err)
		}
		rec := storage.PV{Name: pv.Name, Claim: claim}
		switch {
		case pv.Spec.CSI != nil && s.cfg.Kind == storage.CSI:
			rec.Driver, rec.VolumeHandle = pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle
		case pv.Spec.Local != nil && s.cfg.Kind == storage.Local:
			rec.Path = pv.Spec.Local.Path
		default:
			return fmt.Errorf("PV %s bound to claim %s is not a %s volume; check the storage class %s", pv.Name, claim, s.cfg.Kind, s.volumes.StorageClass)
		}
		s.volumes.PVs = append(s.volumes.PVs, rec)
		s.pvOf[claim] = pv.Name
		sc.Note("claim %s bound to PV %s (%s)", claim, pv.Name, describePV(rec))
	}
	return nil
}

func describePV(pv storage.PV) string {
	if pv.Driver != "" {
		return fmt.Sprintf("CSI driver %s, volume handle %s, global mount %s", pv.Driver, pv.VolumeHandle, nodestate.CSIGlobalMountPath(pv.Driver, pv.VolumeHandle))
	}
	return "local path " + pv.Path
}

func claimOf(p corev1.Pod) string {
	for _, v := range p.Spec.Volumes {
		if v.Name == volumeName && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// readMarker reads the marker through the pod's volume mount on the node,
// which is what the container sees at /data.
func (s *Scenario) readMarker(ctx context.Context, node exec.Cmder, snap *nodestate.Snapshot, p corev1.Pod, pv string) (string, error) {
	dir := snap.Abs(podVolumeDir(s.cfg.Kind, string(p.UID), pv))
	res, err := exec.Output(ctx, node, "cat", dir+"/marker")
	if err != nil {
		return "", fmt.Errorf("read the marker of pod %s (uid %s) on PV %s at %s/marker: %w", p.Name, p.UID, pv, dir, err)
	}
	return strings.TrimSpace(res.Stdout), nil
}

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

func (s *Scenario) snapshotBefore(ctx context.Context, sc *scenarios.StepContext) error {
	snap, err := s.snapshot(ctx, sc.Node)
	if err != nil {
		return err
	}
	s.initial = snap
	s.snapshotEvidence(sc, "node state before the first hop", snap)
	if s.cfg.Kind == storage.CSI && s.volumes.NoStagingMount {
		sc.Note("the CSI driver mounts nothing at the global mount path when it stages (NodeStageVolume is a no-op); the global mount checks do not apply")
	}
	if s.cfg.Kind == storage.CSI && !s.volumes.NoStagingMount {
		for _, pv := range s.volumes.PVs {
			path, n := snap.CSIGlobalMount(pv.Driver, pv.VolumeHandle)
			if n != 1 {
				return fmt.Errorf("CSI global mount of PV %s at %s is mounted %d times before any hop; want 1", pv.Name, path, n)
			}
		}
	}
	return nil
}

func (s *Scenario) stopKubelet(h plan.Hop) func(context.Context, *scenarios.StepContext) error {
	return func(ctx context.Context, sc *scenarios.StepContext) error {
		s.hop = &reports.Hop{Number: h.Number, From: "v" + h.From.String(), To: "v" + h.To.String(), Direction: h.Direction}
		s.run.Hops = append(s.run.Hops, *s.hop)
		s.hop = &s.run.Hops[len(s.run.Hops)-1]
		pods, err := s.listPods(ctx)
		if err != nil {
			return fmt.Errorf("list pods before stopping the kubelet: %w", err)
		}
		s.oldUIDs = nil
		for _, p := range pods {
			s.oldUIDs = append(s.oldUIDs, string(p.UID))
		}
		s.faultSeen, s.faultDetail = nil, ""
		start := time.Now()
		if f := s.cfg.Fault; f != nil && f.Stop != nil {
			if err := f.Stop(ctx, s, sc); err != nil {
				return err
			}
		} else if err := s.node.StopKubelet(ctx); err != nil {
			return err
		}
		if f := s.cfg.Fault; f == nil || !f.KeepPods && !f.NoDelete {
			s.hop.OldPodUIDs = append([]string(nil), s.oldUIDs...)
		}
		s.timing(reports.PhaseKubeletStop, time.Since(start))
		sc.Note("kubelet stopped in %s; pods to force-delete: %s", time.Since(start).Round(time.Millisecond), strings.Join(s.oldUIDs, ", "))
		return nil
	}
}

func (s *Scenario) timing(phase string, d time.Duration) {
	s.hop.Timings = append(s.hop.Timings, reports.Timing{Phase: phase, Duration: d})
}

func (s *Scenario) swapKubelet(bin binaries.Binary) func(context.Context, *scenarios.StepContext) error {
	return func(ctx context.Context, sc *scenarios.StepContext) error {
		start := time.Now()
		if err := s.node.SwapKubelet(ctx, bin); err != nil {
			return err
		}
		s.timing("swap binary", time.Since(start))
		sc.Note("kubelet %s from %s (sha256 %s) installed", bin.Version, bin.Source, bin.SHA256)
		return nil
	}
}

// forceDelete deletes the pods with grace period 0 while the kubelet is
// down, as the manual sign-off did, then records the node state the new
// kubelet will find.
func (s *Scenario) forceDelete(ctx context.Context, sc *scenarios.StepContext) error {
	start := time.Now()
	pods, err := s.listPods(ctx)
	if err != nil {
		return err
	}
	for i := range pods {
		if err := s.res.Delete(ctx, &pods[i], resources.WithGracePeriod(0)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("force-delete pod %s/%s (uid %s): %w", pods[i].Namespace, pods[i].Name, pods[i].UID, err)
		}
	}
	old := map[string]bool{}
	for _, u := range s.oldUIDs {
		old[u] = true
	}
	gone := func(ctx context.Context) (bool, error) {
		now, err := s.listPods(ctx)
		if err != nil {
			return false, nil
		}
		for _, p := range now {
			if old[string(p.UID)] {
				return false, nil
			}
		}
		return true, nil
	}
	if err := wait.For(gone, wait.WithContext(ctx), wait.WithTimeout(s.scaled(podsGoneTimeout)), wait.WithInterval(100*time.Millisecond), wait.WithImmediate()); err != nil {
		return fmt.Errorf("force-deleted pods still in the API: %w", err)
	}
	s.timing("force delete", time.Since(start))
	snap, err := s.snapshot(ctx, sc.Node)
	if err != nil {
		return err
	}
	s.down = snap
	left := snap.Leftovers(s.oldUIDs)
	s.volsAtStart = 0
	for _, u := range s.oldUIDs {
		s.volsAtStart += len(snap.Pod(u).VolumeDirs())
	}
	sc.Note("%d pods force-deleted; with the kubelet down the node still holds %d of their mounts and directories, %d volume dirs for reconstruction", len(pods), len(left), s.volsAtStart)
	s.snapshotEvidence(sc, "node state while the kubelet is down", snap)
	if len(left) == 0 {
		return fmt.Errorf("nothing of the old pods %v is on the node while the kubelet is down: the scenario would prove nothing", s.oldUIDs)
	}
	if s.shapes != nil {
		return s.recordShapesDown(ctx, sc)
	}
	return nil
}

func (s *Scenario) startKubelet(ctx context.Context, sc *scenarios.StepContext) error {
	s.kubeletUp = time.Now()
	if err := s.node.StartKubelet(ctx); err != nil {
		return err
	}
	if n, ok := s.node.(nodes.WithNotes); ok {
		for _, note := range n.Notes() {
			sc.Note("%s", note)
		}
	}
	sc.Note("kubelet process healthy %s after start", time.Since(s.kubeletUp).Round(time.Millisecond))
	return nil
}

func (s *Scenario) waitReady(version string) func(context.Context, *scenarios.StepContext) error {
	return func(ctx context.Context, sc *scenarios.StepContext) error {
		if err := conditions.WaitNodeReady(ctx, s.res, s.node.String(), version, s.scaled(nodeReadyTimeout)); err != nil {
			return err
		}
		d := time.Since(s.kubeletUp)
		s.timing(reports.PhaseNodeReady, d)
		sc.Note("node %s Ready at kubelet %s, %s after the kubelet started", s.node, version, d.Round(10*time.Millisecond))
		return nil
	}
}

// waitCleanup polls node state until no mount and then nothing at all of
// the old pods is left, recording when each happened (from the kubelet's
// start).
func (s *Scenario) waitCleanup(ctx context.Context, sc *scenarios.StepContext) error {
	var last *nodestate.Snapshot
	var lastErr error
	mountsGone, polls := time.Duration(0), 0
	cond := func(ctx context.Context) (bool, error) {
		polls++
		// The re-created pods' new ephemeral claims get their PVs as soon
		// as they exist, as from a provisioner, not after the cleanup.
		s.bindNewClaims(ctx, sc)
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last = snap
		left := snap.Leftovers(s.oldUIDs)
		mounts := 0
		for _, l := range left {
			if l.Kind == "mount" {
				mounts++
			}
		}
		if mounts == 0 && mountsGone == 0 {
			mountsGone = time.Since(s.kubeletUp)
		}
		return len(left) == 0, nil
	}
	timeout := s.cfg.CleanupTimeout
	to := version.MustParseGeneric(s.hop.To)
	mayLeave := s.cfg.Fault != nil && s.cfg.Fault.MayLeave || s.shapesMayLeave(to)
	if mayLeave && timeout > mayLeaveBound {
		timeout = mayLeaveBound
	}
	s.left = nil
	err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate())
	dirsGone := time.Since(s.kubeletUp)
	if last != nil {
		s.snapshotEvidence(sc, "node state after cleanup", last)
		sc.Evidence(reports.Evidence{Name: "changes since the kubelet was stopped", Kind: "diff", Text: nodestate.Diff(s.down, last)})
	}
	if err != nil && mayLeave && last != nil && ctx.Err() == nil {
		s.left = last.Leftovers(s.oldUIDs)
		s.leftEver = append(s.leftEver, s.left...)
		if s.shapes != nil {
			if un := s.unexplainedLeftovers(s.left, to); len(un) > 0 {
				return fmt.Errorf("old pods not cleaned up within %s of the kubelet's start, beyond what the shapes' known bugs leave (%d polls): %s", timeout, polls, s.leftoverHeadline(ctx, un))
			}
		}
		sc.Note("%s: %d things of the old pods left %s after the kubelet started (bounded wait); the catalogue judges them", s.leakEntry().Name, len(s.left), timeout)
		return nil
	}
	if err != nil {
		detail := ""
		if last != nil {
			detail = s.leftoverHeadline(ctx, last.Leftovers(s.oldUIDs))
		} else if lastErr != nil {
			detail = snapshotFailure(sc, lastErr)
		}
		return fmt.Errorf("old pods not cleaned up within %s of the kubelet's start (%d polls): %s", timeout, polls, detail)
	}
	s.timing(reports.PhaseMountsGone, mountsGone)
	s.timing(reports.PhasePodDirsGone, dirsGone)
	sc.Note("old pods' mounts gone %s and their directories %s after the kubelet started (%d polls every %s)",
		mountsGone.Round(10*time.Millisecond), dirsGone.Round(10*time.Millisecond), polls, s.cfg.PollInterval)
	return nil
}

// checkRecreated checks the StatefulSet's new pods: new UIDs, same node,
// same claims bound to the same PVs, marker readable and unchanged, each
// pod's volume mounted, and each CSI global mount mounted exactly once.
func (s *Scenario) checkRecreated(ctx context.Context, sc *scenarios.StepContext) error {
	exclude := map[types.UID]bool{}
	for _, u := range s.oldUIDs {
		exclude[types.UID(u)] = true
	}
	pods, err := s.waitPodsRunning(ctx, sc, exclude, s.scaled(podsRunningTimeout))
	if err != nil {
		return err
	}
	s.timing("pods Running", time.Since(s.kubeletUp))
	snap, err := s.snapshot(ctx, sc.QuietNode)
	if err != nil {
		return err
	}
	for _, p := range pods {
		claim := claimOf(p)
		pv := s.pvOf[claim]
		var pvc corev1.PersistentVolumeClaim
		if err := s.res.Get(ctx, claim, s.cfg.Namespace, &pvc); err != nil {
			return fmt.Errorf("get PVC %s of pod %s: %w", claim, p.Name, err)
		}
		if pvc.Spec.VolumeName != pv {
			return fmt.Errorf("pod %s (uid %s) claim %s is bound to PV %q; it was %q before the hop", p.Name, p.UID, claim, pvc.Spec.VolumeName, pv)
		}
		dir := podVolumeDir(s.cfg.Kind, string(p.UID), pv)
		if n := snap.MountCount(dir); n < 1 {
			return fmt.Errorf("pod %s (uid %s): its volume %s is not mounted at %s", p.Name, p.UID, pv, snap.Abs(dir))
		}
		marker, err := s.readMarker(ctx, sc.Node, snap, p, pv)
		if err != nil {
			return err
		}
		if s.cfg.Fault != nil && s.cfg.Fault.DataLost {
			sc.Note("pod %s uid %s on PV %s: marker now %q (fault %s takes the volume's data; before: %q)", p.Name, p.UID, pv, marker, s.cfg.Fault.Entry.Name, s.markers[pv])
			s.markers[pv] = marker
			continue
		}
		if marker != s.markers[pv] {
			if line := s.unstagedLine(ctx, pv); line != "" {
				sc.Evidence(reports.Evidence{Name: "the kubelet unstaged PV " + pv, Kind: "log", Text: line})
				sc.Note("pod %s uid %s on PV %s: marker now %q, before %q: %s", p.Name, p.UID, pv, marker, s.markers[pv], restaged(line))
				s.markers[pv] = marker
				continue
			}
			return fmt.Errorf("pod %s (uid %s): marker on PV %s is %q, want %q (written before the first hop)", p.Name, p.UID, pv, marker, s.markers[pv])
		}
		sc.Note("pod %s uid %s on %s, claim %s → PV %s, marker intact", p.Name, p.UID, p.Spec.NodeName, claim, pv)
	}
	if s.cfg.Kind == storage.CSI && !s.volumes.NoStagingMount {
		for _, pv := range s.volumes.PVs {
			path, n := snap.CSIGlobalMount(pv.Driver, pv.VolumeHandle)
			if n != 1 {
				return fmt.Errorf("CSI global mount of PV %s at %s is mounted %d times; want exactly 1", pv.Name, path, n)
			}
		}
		sc.Note("each of the %d CSI global mounts is mounted exactly once", len(s.volumes.PVs))
	}
	s.snapshotEvidence(sc, "node state with the re-created pods", snap)
	return nil
}

// checkMetrics scrapes the kubelet through the API server's node proxy and
// checks the scenario's expectations for the volume kind.
func (s *Scenario) checkMetrics(ctx context.Context, sc *scenarios.StepContext) error {
	scrape, err := kubeletmetrics.Fetch(ctx, s.cs, s.node.String())
	if err != nil {
		return err
	}
	if path, err := sc.Artifact("metrics.txt", scrape.Raw); err == nil {
		sc.Evidence(reports.Evidence{Name: "kubelet metrics", Kind: "metrics", Path: path})
	}
	exps := kubeletmetrics.CSIExpectations(s.volsAtStart)
	if s.cfg.Kind == storage.Local {
		exps = kubeletmetrics.LocalVolumeExpectations(s.volsAtStart)
	}
	if s.cfg.Fault != nil && s.cfg.Fault.Metrics != nil {
		exps = s.cfg.Fault.Metrics(s.volsAtStart)
	}
	exps = s.shapeMetrics(exps, version.MustParseGeneric(s.hop.To))
	results := kubeletmetrics.Evaluate(scrape, exps)
	if kubeletmetrics.NeedsKubeletLog(results) {
		results = s.explainRace(ctx, sc, results)
	}
	s.metricResults = results
	var failed []string
	for _, r := range results {
		m := reports.Metric{Name: r.Metric, Value: r.Value, Present: r.Present, Expected: r.Expected, Verdict: reports.Verdict(r.Verdict), Reason: r.Reason}
		s.hop.Metrics = append(s.hop.Metrics, m)
		switch m.Verdict {
		case reports.Fail:
			failed = append(failed, fmt.Sprintf("%s = %v, expected %s", r.Metric, r.Value, r.Expected))
		case reports.PassWithExpectedDeviations:
			sc.Deviation(reports.Deviation{Check: "metric " + r.Metric, Expected: r.Expected, Observed: fmt.Sprint(r.Value), Reason: r.Reason})
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("kubelet metrics: %s", strings.Join(failed, "; "))
	}
	return nil
}

// explainRace cross-checks a reconstruct_volume_operations_total lower
// than the volume dirs the kubelet found against the kubelet's own log:
// when the log shows the reconstructions, the counter lost them to the
// metrics registration race, an expected deviation that quotes the log.
// Without the node's log the counter stays failed, and a note says why.
func (s *Scenario) explainRace(ctx context.Context, sc *scenarios.StepContext, results []kubeletmetrics.Result) []kubeletmetrics.Result {
	ln, ok := s.node.(nodes.WithKubeletLog)
	if !ok {
		sc.Note("reconstruct_volume_operations_total is low and node %s cannot show its kubelet's log, so the metrics registration race cannot be told from a kubelet that did not reconstruct", s.node)
		return results
	}
	text, err := ln.KubeletLog(ctx)
	if err != nil {
		sc.Note("reconstruct_volume_operations_total is low and the kubelet's log could not be read to cross-check it: %v", err)
		return results
	}
	log := kubeletmetrics.ParseReconstructionLog(text)
	if log.Attempts() == 0 {
		sc.Note("the kubelet's log since its start names no reconstructed volume: either it reconstructed none, or it logs below level 2 (--v=2, or logging.verbosity: 2 in its configuration), where it names each one")
	}
	sc.Evidence(reports.Evidence{Name: "the kubelet's reconstruction log lines since its start", Kind: "log",
		Text: fmt.Sprintf("%d reconstructed, %d could not be constructed\n%s", log.Reconstructed, log.Failed, strings.Join(log.Lines, "\n"))})
	return kubeletmetrics.ExplainRegistrationRace(results, log, s.volsAtStart)
}

func (s *Scenario) snapshotAfter(ctx context.Context, sc *scenarios.StepContext) error {
	snap, err := s.snapshot(ctx, sc.Node)
	if err != nil {
		return err
	}
	s.snapshotEvidence(sc, "node state after the last hop", snap)
	sc.Evidence(reports.Evidence{Name: "changes since before the first hop", Kind: "diff", Text: nodestate.Diff(s.initial, snap)})
	return nil
}

// deleteWorkload deletes the StatefulSet normally and checks that the
// kubelet unmounts its volumes, including the CSI global mounts no pod
// uses any more, then deletes the claims and volumes.
func (s *Scenario) deleteWorkload(ctx context.Context, sc *scenarios.StepContext) error {
	pods, err := s.listPods(ctx)
	if err != nil {
		return err
	}
	var uids []string
	for _, p := range pods {
		uids = append(uids, string(p.UID))
	}
	start := time.Now()
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: s.cfg.Name, Namespace: s.cfg.Namespace}}
	if err := s.res.Delete(ctx, sts, resources.WithDeletePropagation(string(metav1.DeletePropagationForeground))); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete StatefulSet %s/%s: %w", s.cfg.Namespace, s.cfg.Name, err)
	}
	var last *nodestate.Snapshot
	cond := func(ctx context.Context) (bool, error) {
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil {
			return false, nil
		}
		last = snap
		if len(snap.Leftovers(uids)) > 0 {
			return false, nil
		}
		if s.cfg.Kind == storage.CSI {
			for _, pv := range s.volumes.PVs {
				if _, n := snap.CSIGlobalMount(pv.Driver, pv.VolumeHandle); n > 0 {
					return false, nil
				}
			}
		}
		return true, nil
	}
	// A fault that left old pods' mounts behind keeps their CSI global
	// mounts in use, so the kubelet never unstages them: a bounded wait,
	// and the leak is judged with the fault's bug.
	timeout := s.cfg.CleanupTimeout
	if len(s.leftEver) > 0 && timeout > mayLeaveBound {
		timeout = mayLeaveBound
	}
	if err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		if len(s.leftEver) > 0 && last != nil && ctx.Err() == nil && len(last.Leftovers(uids)) == 0 {
			if err := s.judgeLeakedGlobalMounts(sc, last); err != nil {
				return err
			}
			return s.deleteVolumes(ctx)
		}
		msg := fmt.Sprintf("volumes of the deleted StatefulSet still on the node after %s", timeout)
		if last != nil {
			s.snapshotEvidence(sc, "node state after deleting the StatefulSet", last)
			var detail []string
			for _, l := range last.Leftovers(uids) {
				detail = append(detail, l.String())
			}
			for _, pv := range s.volumes.PVs {
				if path, n := last.CSIGlobalMount(pv.Driver, pv.VolumeHandle); n > 0 {
					detail = append(detail, fmt.Sprintf("CSI global mount %s still mounted %d times", path, n))
				}
			}
			msg += ": " + strings.Join(detail, "; ")
		}
		return fmt.Errorf("%s: %w", msg, err)
	}
	sc.Note("StatefulSet deleted; its pods' mounts, directories and global mounts gone after %s", time.Since(start).Round(10*time.Millisecond))
	return s.deleteVolumes(ctx)
}

// deleteVolumes releases the claims, PVs and StorageClass of the run (see
// storage.Release for why dynamically provisioned PVs are waited for, not
// deleted).
func (s *Scenario) deleteVolumes(ctx context.Context) error {
	return storage.Release(ctx, s.cs, s.cfg.Namespace, s.volumes, s.cfg.CleanupTimeout, s.cfg.PollInterval)
}
