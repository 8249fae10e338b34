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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/clusters/timeouts"
	"sigs.k8s.io/skewtest/clusters/workloads"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// Cluster is what the scenario needs of a provider beyond its node: its
// API server, and volumes and a workload image, which a provider gives of
// its own (capabilities.WithOwnWorkload) or the run makes from a
// StorageClass and a stock image.
type Cluster interface {
	RESTConfig() (*rest.Config, error)
	capabilities.WithOwnWorkload
}

// Config is one scenario run.
type Config struct {
	Plan plan.Plan
	// Kubelets holds one binary per plan entry, in plan order.
	Kubelets []binaries.Binary
	Replicas int
	// VolumesPerPod is how many volumes, each its own claim, every pod
	// has (default 1): many, to measure what reconstruction costs per
	// volume on a busy node. The baseline only: no fault or shape.
	VolumesPerPod int
	Kind          storage.Kind
	Size          string
	// RunID is the value of workloads.RunLabel on everything the scenario
	// makes, which tells its objects from another run's on a shared
	// cluster; default a fresh run ID.
	RunID string
	// Namespace is the scenario's own: it makes it, and refuses one that
	// exists (workloads.ErrNotOurs). Default workloads.Namespace(RunID);
	// scenarios of one run at once (a batch's jobs, a matrix's trails)
	// each need their own.
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
	// VolumeGroup, when set, names the scenario's PVs apart from those of
	// another scenario on the same node: a batch runs several one after
	// another on a node, and a PV name, or the volume handle made of it,
	// seen again could meet what the driver kept of the earlier one.
	VolumeGroup string
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
	// OnMade, when set, keeps the record of what the scenario made in the
	// API and has not removed (a provider of a shared cluster writes it
	// into its run's state, for skewtest clean); it is called before the
	// things a record adds are made. An error fails the step.
	OnMade func(workloads.Record) error
}

// DefaultPollInterval is how often node state is read while waiting
// unless Config.PollInterval says otherwise.
const DefaultPollInterval = 250 * time.Millisecond

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

// scaled is d stretched by the configured timeout factor.
func (s *Scenario) scaled(d time.Duration) time.Duration {
	return timeouts.Scale(d, s.cfg.TimeoutFactor)
}

func (c *Config) defaults() {
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	if c.VolumesPerPod == 0 {
		c.VolumesPerPod = 1
	}
	if c.Kind == "" {
		c.Kind = storage.CSI
	}
	if c.Size == "" {
		c.Size = "16Mi"
	}
	if c.RunID == "" {
		c.RunID = reports.NewRunID(time.Now())
	}
	if c.Namespace == "" {
		c.Namespace = workloads.Namespace(c.RunID)
	}
	if c.Name == "" {
		c.Name = "web"
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
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
	oldUIDs []string
	// unstagedInStop: PV -> the stopping kubelet's log line saying it
	// unstaged the PV while a fault's Stop ran with the kubelet up
	// (kubeletlog.go), for a driver whose volumes lose their data then.
	unstagedInStop map[string]string
	down           *nodestate.Snapshot
	kubeletUp      time.Time
	podsUp         *podsUp
	hop            *reports.Hop
	volsAtStart    int
	// what a fault's observation reads
	faultSeen   []string // the fault's own symptoms (faults_disrupt.go)
	faultDetail string
	// faultTraces are what the fault's own steps saw left, as traces for
	// the catalogue's judge (a staged global mount no pod uses).
	faultTraces []catalogue.Trace
	podFaultState
	sharedFaultState
	errs    errorsState // faults_errors.go
	running []running
	// changes are what happened to the running pods since the kubelet was
	// stopped, each a trace whose Detail says it in words.
	changes []catalogue.Trace
	// logUnread says why the untouched watch could not read the kubelet's
	// log for unmounts ("" when it read it).
	logUnread string
	left      []nodestate.Leftover
	leftEver  []nodestate.Leftover
	// leftSnap is the node state the hop's cleanup wait ended on.
	leftSnap *nodestate.Snapshot
	// plantedEver are the volume dirs (or files) a fault planted
	// unreconstructable, this hop's and earlier hops'; unreconstructable
	// is how many of them the hop's kubelet finds at its start.
	plantedEver       []string
	unreconstructable int
	// race is what the hop's witness starts of the metrics registration
	// race showed (witness.go).
	race hopRace
	// restored says what the restore before the hop re-created and why
	// (restore.go), for the hop's record; "" when nothing was.
	restored string
	// stuck says why the re-created pods did not run, on a hop whose
	// fault may keep them from it (Fault.MayStick); "" when they ran.
	stuck         string
	metricResults []kubeletmetrics.Result
	// the hop's kubelet's log and reconstruction path (path.go)
	hopLog *string
	// hopStartLog is the hop's kubelet start's whole log, kept before a
	// witness start of the metrics race replaced that kubelet; nil when
	// none did.
	hopStartLog *string
	pathTried   bool
	pathVolumes int
	// shapes, when the workload carries catalogue shapes
	shapes *shapeRun
	// made is what the scenario made in the API and has not removed
	// (remove.go).
	made workloads.Record
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
	if err := checkGatesNode(cfg.Plan, node); err != nil {
		return nil, err
	}
	if cfg.VolumesPerPod > 1 && (cfg.Fault != nil || len(cfg.Shapes) > 0) {
		return nil, fmt.Errorf("%d volumes per pod: a catalogue fault or shape runs with one volume per pod", cfg.VolumesPerPod)
	}
	s := &Scenario{
		cfg: cfg, cluster: cluster, node: node, run: run, res: res, cs: cs,
		pvOf: map[string]string{}, markers: map[string]string{},
	}
	if f := cfg.Fault; f != nil && len(f.Shapes) > 0 {
		if len(cfg.Shapes) > 0 {
			return nil, fmt.Errorf("fault %s brings its own workload shapes (%s); run it without others", f.Entry.Name, strings.Join(f.Shapes, ", "))
		}
		shapes, err := LookupShapes(f.Shapes)
		if err != nil {
			return nil, fmt.Errorf("fault %s: %w", f.Entry.Name, err)
		}
		s.cfg.Shapes = shapes
		cfg = s.cfg
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
	var steps []scenarios.Step
	if gates := s.cfg.Plan.GatesOf(0); len(gates) > 0 {
		steps = append(steps, scenarios.Step{Name: fmt.Sprintf("restart kubelet %s with its plan entry's feature gates", s.cfg.Plan.Entry(0)), Run: s.applyInitialGates})
	}
	deploy := fmt.Sprintf("deploy a StatefulSet of %d pods on %s volumes", s.cfg.Replicas, s.cfg.Kind)
	if s.cfg.VolumesPerPod > 1 {
		deploy = fmt.Sprintf("deploy a StatefulSet of %d pods with %d %s volumes each", s.cfg.Replicas, s.cfg.VolumesPerPod, s.cfg.Kind)
	}
	steps = append(steps,
		scenarios.Step{Name: deploy, Run: s.deploy},
		scenarios.Step{Name: "snapshot node state (before)", Run: s.snapshotBefore},
	)
	f := s.cfg.Fault
	for i, h := range s.cfg.Plan.Hops() {
		bin := s.cfg.Kubelets[i+1]
		h.Number += s.cfg.FirstHop - 1
		n := h.Number
		to := "v" + h.To.String()
		step := func(name string, run func(context.Context, *scenarios.StepContext) error) {
			steps = append(steps, scenarios.Step{Hop: n, Name: name, Run: run})
		}
		if s.restoresBefore(i) {
			step(fmt.Sprintf("hop %d: restore the pods fault %s keeps, if kubelet %s's known bug changed them", n, f.Entry.Name, s.cfg.Plan.Entry(i)), s.restore(i, n))
		}
		step(fmt.Sprintf("hop %d (%s %s → %s): stop kubelet", n, h.Direction, s.cfg.Plan.Entry(i), s.cfg.Plan.Entry(i+1)), s.stopKubelet(h))
		step(fmt.Sprintf("hop %d: swap kubelet binary to %s", n, s.cfg.Plan.Entry(i+1)), s.swapKubelet(bin, h.ToGates))
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
		if f == nil && s.cfg.Kind == storage.Local {
			step(fmt.Sprintf("hop %d: catalogue %s %s on kubelet %s", n, catalogue.Shape, localVolumeEntry, to), s.judgeLocalVolume(h.To))
		}
		if f != nil {
			step(fmt.Sprintf("hop %d: catalogue %s %s on kubelet %s", n, f.Entry.Kind, f.Entry.Name, to), s.judge(h.To))
		}
		// A fault's shapes are its plant's workload: the fault is judged.
		for _, sh := range s.cfg.Shapes {
			if f != nil {
				break
			}
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
