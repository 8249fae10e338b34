package reconstruction

// This file holds the catalogue faults that reach the kubelet's error
// paths for a reconstructed volume: while the kubelet is down and the pods
// are force-deleted, the node's CSI driver is told to fail one call for
// the workload's volumes (its fail knob, nodes.CSIFail) with a final
// error, a few times or until the kubelet gives the volume up. Each hop is
// judged on the driver's call record (which calls, in which order, how
// many failed), the node, the pods and the kubelet's own log lines; what
// the old pods or a given-up volume leave goes to the judge as traces.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

// Holds: the kubelet's backoff after each failed operation (0.5 s,
// doubling), and for the volume given up the pod's deletion and the
// unstage.
// DataLost: the volume given up is unstaged, and the test driver's
// tmpfs goes with it.
var _ = addFault(catalogue.Entry{
	Name: "restage-fails-final-until-deleted", Item: 16,
	Plants: "with the kubelet down and the pods force-deleted, skewtest's CSI driver told (its fail knob) to fail every NodeStageVolume of the workload's volume with FAILED_PRECONDITION, a final error; once the kubelet retried three times, the StatefulSet is scaled to 0, so the kubelet gives the volume up; then the knob is removed and the StatefulSet scaled back",
	Checks: "the driver's call record since the kubelet's start: while the stage fails, the waiting pod gets no NodePublishVolume and nothing is unstaged, and the global mount stays mounted once; after the scale-down, within 30 s: exactly one NodeUnstageVolume, the global mount gone (else a trace), the waiting pod's dir removed; then the new pod stages, publishes and runs; the kubelet keeps the reconstructed device uncertain (\"leaving volume uncertain\") and logs the failed MountDevice once per failed NodeStageVolume",
	Expect: []catalogue.Expectation{{From: "1.34", Outcome: catalogue.Clean, Says: errorsKeptUncertain + "; once no pod wants the volume the kubelet unstages that device (NodeUnstageVolume) and removes its global mount",
		Refs: []catalogue.Ref{catalogue.PR(122211), catalogue.Issue(119608)}, FixedIn: "1.30 (#122211, backported to 1.26-1.29)"}},
	Needs: driverNeeds,
}, Fault{Plant: stageGivenUp.plant, AfterCleanup: giveUpFailingStage, DataLost: true, Observe: stageGivenUp.observe, Holds: 10 * time.Second})

// Not MayLeave: the entry is clean, so an unpublish the kubelet
// wrongly takes as done, which leaves the old pod's mount, fails the
// cleanup wait as on the baseline, naming the mount.
var _ = addFault(catalogue.Entry{
	Name: "unpublish-fails-final", Item: 17,
	Plants: "with the kubelet down and the pods force-deleted, NodeUnpublishVolume of the workload's volume fails twice with FAILED_PRECONDITION, then goes through",
	Checks: "the call record: for the old pod, two failed NodeUnpublishVolume then one that succeeds and nothing after; the re-created pod stages the uncertain device again and publishes; no NodeUnstageVolume; the kubelet logs each failed TearDown once; the old pod's mount and dir gone within the cleanup bound, as on the baseline, the global mount mounted once, the re-created pod Running with its data",
	Expect: []catalogue.Expectation{{From: "1.34", Outcome: catalogue.Clean, Says: "a failed TearDown leaves the reconstructed volume uncertain, so the unmount is retried until the driver unpublishes, and only then is the old pod's dir removed"}},
	Needs:  driverNeeds,
}, Fault{Plant: unpublishFails.plant, AfterCleanup: readFailuresLog, Observe: unpublishFails.observe, Holds: 2 * time.Second})

// errorsKeptUncertain is what the kubelet does with a reconstructed
// device whose re-stage fails finally.
const errorsKeptUncertain = "a final error from the re-stage of a reconstructed device leaves it uncertain (markDeviceErrorState), so the kubelet neither forgets the staged device nor sets a pod up on it unstaged"

const (
	// failCode is the code the knobs fail calls with. The kubelet takes
	// it as final (csidriver.FinalForKubelet: the operation did not
	// happen), and it is the CSI spec's code for a node call whose
	// precondition does not hold, as a re-stage after a reboot meets when
	// the device is not there yet; InvalidArgument would say the
	// kubelet's request itself is wrong, which no retry could mend.
	failCode = codes.FailedPrecondition
	// failTimes is how many calls a counted knob fails before it lets
	// them through: the kubelet retries after 0.5 s, then 1 s.
	failTimes = 2
	// givenUpFailures is how many failed NodeStageVolume calls a volume
	// the kubelet is later made to give up must have had first: the
	// kubelet kept retrying on a device it still counts as uncertain.
	givenUpFailures = 3
	// errorsWait bounds each wait of these faults, before timeouts.Scale:
	// for the failures to come (0.5 + 1 + 2 s of the kubelet's backoff),
	// and for a volume given up to be unstaged.
	errorsWait = 30 * time.Second
)

// The kubelet's own words for the error paths these faults reach, the
// same in every kubelet the catalogue expects them on (1.34 to 1.37).
const (
	// logLeftUncertain: markDeviceErrorState kept a reconstructed device
	// uncertain after a final error (#122211); logged at level 2.
	logLeftUncertain = "MountVolume.markDeviceErrorState leaving volume uncertain"
	// The failed operations, each once in the pending operations' error
	// line (logRetryLine) per failure.
	logMountDeviceFailed = "MountVolume.MountDevice failed for volume"
	logTearDownFailed    = "UnmountVolume.TearDown failed for volume"
	// logRetryLine is in the pending operations' line for a failed
	// operation, once per failure ("Operation for ... failed. No retries
	// permitted until ... Error: <the failure>").
	logRetryLine = "failed. No retries permitted until"
)

// errorsState is what these faults carry through a hop.
type errorsState struct {
	knobs []nodes.CSIFail
	// givenUp are the UIDs of the pods that waited on a failing stage
	// and were deleted (the StatefulSet scaled to 0) meanwhile; scaledDown
	// and cleared are when that happened and when the knobs went.
	givenUp             []string
	scaledDown, cleared time.Time
	// log is the kubelet's log read once the failures are over (after
	// the cleanup), logErr why it could not be read; logRead says it was
	// tried.
	log     string
	logErr  error
	logRead bool
}

// csiErrorFault is one of these faults: which volumes' calls fail and how,
// and what each hop must show of them.
type csiErrorFault struct {
	// knobs are the fail knobs for one volume.
	knobs func(volumeID string) []nodes.CSIFail
	// judge reads one volume's calls since the kubelet's start and says
	// what is wrong with them.
	judge func(v volumeCalls, e errorsState) []string
	// logs are the kubelet's log lines each volume must have, as many as
	// the calls say.
	logs []logCount
}

// logCount is a kubelet log line counted per volume: lines with msg and
// the volume's unique name (which ends with its handle), and for a failed
// operation the pending operations' retry words.
type logCount struct {
	msg         string
	opFailure   bool
	want        func(v volumeCalls) int
	wantDescrib string
}

// stageGivenUp fails every NodeStageVolume of the volume, finally.
var stageGivenUp = &csiErrorFault{
	knobs: func(id string) []nodes.CSIFail {
		return []nodes.CSIFail{{Method: "NodeStageVolume", VolumeID: id, Code: failCode}}
	},
	judge: judgeGivenUp,
	logs: []logCount{
		{msg: logLeftUncertain, want: injectedOf("NodeStageVolume"), wantDescrib: "one per failed NodeStageVolume"},
		{msg: logMountDeviceFailed, opFailure: true, want: injectedOf("NodeStageVolume"), wantDescrib: "one per failed NodeStageVolume"},
	},
}

// unpublishFails fails NodeUnpublishVolume of the volume failTimes times.
var unpublishFails = &csiErrorFault{
	knobs: func(id string) []nodes.CSIFail {
		return []nodes.CSIFail{{Method: "NodeUnpublishVolume", VolumeID: id, Code: failCode, Times: failTimes}}
	},
	judge: judgeUnpublish,
	logs: []logCount{
		{msg: logTearDownFailed, opFailure: true, want: injectedOf("NodeUnpublishVolume"), wantDescrib: "one per failed NodeUnpublishVolume"},
	},
}

// injectedOf counts the volume's calls of method the knob failed.
func injectedOf(method string) func(v volumeCalls) int {
	return func(v volumeCalls) int { return v.injected(method) }
}

// plant sets the knobs for every failed volume, with the kubelet down and
// the pods force-deleted.
func (f *csiErrorFault) plant(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	drv, err := nodeAs[nodes.WithCSIDriver](s, "fail calls of its CSI driver")
	if err != nil {
		return err
	}
	if _, err := s.callRecord(); err != nil {
		return err
	}
	pvs := s.volumes.PVs
	if len(pvs) == 0 || pvs[0].VolumeHandle == "" {
		return fmt.Errorf("fault %s needs CSI volumes of the node's own driver", s.cfg.Fault.Entry.Name)
	}
	s.errs = errorsState{}
	var said []string
	for _, pv := range pvs {
		for _, k := range f.knobs(pv.VolumeHandle) {
			if err := setKnob(ctx, sc, drv, k); err != nil {
				return err
			}
			s.errs.knobs = append(s.errs.knobs, k)
			times := "until removed"
			if k.Times > 0 {
				times = fmt.Sprintf("%d times", k.Times)
			}
			said = append(said, fmt.Sprintf("%s of PV %s (volume %s) fails with %s %s", k.Method, pv.Name, k.VolumeID, k.Code, times))
		}
	}
	sc.Note("the CSI driver's fail knobs are set: %s", strings.Join(said, "; "))
	return nil
}

// setKnob writes a fail knob's file on the node, whole (the driver never
// reads half a file).
func setKnob(ctx context.Context, sc *scenarios.StepContext, d nodes.WithCSIDriver, k nodes.CSIFail) error {
	if err := k.Validate(); err != nil {
		return err
	}
	p := k.Path(d.CSIStallDir())
	_, err := exec.OutputStdin(ctx, sc.Node, strings.NewReader(k.Content()), "sh", "-c", `mkdir -p "$(dirname "$1")" && cat > "$1.tmp" && mv -f "$1.tmp" "$1"`, "sh", p)
	return err
}

// clearKnobs removes the hop's knobs, spent or not.
func (s *Scenario) clearKnobs(ctx context.Context, sc *scenarios.StepContext) error {
	if len(s.errs.knobs) == 0 {
		return nil
	}
	drv, err := nodeAs[nodes.WithCSIDriver](s, "fail calls of its CSI driver")
	if err != nil {
		return err
	}
	argv := []string{"rm", "-f", "--"}
	for _, k := range s.errs.knobs {
		argv = append(argv, k.Path(drv.CSIStallDir()))
	}
	if _, err := exec.Output(ctx, sc.Node, argv...); err != nil {
		return err
	}
	s.errs.knobs = nil
	return nil
}

// callRecord is the provider's record of the CSI driver's calls.
func (s *Scenario) callRecord() (capabilities.WithCSICalls, error) {
	rec, ok := any(s.cluster).(capabilities.WithCSICalls)
	if !ok {
		return nil, fmt.Errorf("fault %s judges the CSI driver's call record, and this provider keeps none", s.cfg.Fault.Entry.Name)
	}
	return rec, nil
}

// csiCall is one call of the node's CSI driver for a volume.
type csiCall struct {
	At     time.Time
	Method string
	// UID is the pod UID in the call's target path; "" for a staging
	// path.
	UID string
	// Code is the error's gRPC code, "" on success; Injected, the fail
	// knob failed it.
	Code     string
	Injected bool
}

func (c csiCall) ok() bool { return c.Code == "" }

func (c csiCall) String() string {
	s := c.At.Format("15:04:05.000") + " " + c.Method
	if c.UID != "" {
		s += " pod " + c.UID
	}
	switch {
	case c.Injected:
		s += " failed by the knob: " + c.Code
	case !c.ok():
		s += " failed: " + c.Code
	}
	return s
}

// volumeCalls is one volume's node calls since the hop's kubelet started,
// in the order served, with the old pods' UIDs (those reconstructed).
type volumeCalls struct {
	PV, Handle string
	Calls      []csiCall
	Old        []string
}

func (v volumeCalls) isOld(uid string) bool { return slices.Contains(v.Old, uid) }

// of are the calls of method, for pods keep says (nil: all).
func (v volumeCalls) of(method string, keep func(uid string) bool) []csiCall {
	var out []csiCall
	for _, c := range v.Calls {
		if c.Method == method && (keep == nil || keep(c.UID)) {
			out = append(out, c)
		}
	}
	return out
}

func (v volumeCalls) injected(method string) int {
	n := 0
	for _, c := range v.of(method, nil) {
		if c.Injected {
			n++
		}
	}
	return n
}

// firstOK is the first successful call of method (for pods keep says) at
// or after from, and whether there is one.
func (v volumeCalls) firstOK(method string, keep func(uid string) bool, from time.Time) (csiCall, bool) {
	for _, c := range v.of(method, keep) {
		if c.ok() && !c.At.Before(from) {
			return c, true
		}
	}
	return csiCall{}, false
}

func (v volumeCalls) newPod(uid string) bool { return uid != "" && !v.isOld(uid) }

// failedThenOK checks that the calls are n the knob failed, then one
// success, and nothing after it.
func failedThenOK(what string, calls []csiCall, n int) []string {
	var got []string
	for _, c := range calls {
		switch {
		case c.Injected:
			got = append(got, "failed by the knob")
		case c.ok():
			got = append(got, "ok")
		default:
			got = append(got, "failed "+c.Code)
		}
	}
	want := slices.Repeat([]string{"failed by the knob"}, n)
	want = append(want, "ok")
	if !slices.Equal(got, want) {
		return []string{fmt.Sprintf("%s: [%s], want [%s]", what, strings.Join(got, ", "), strings.Join(want, ", "))}
	}
	return nil
}

// stagedBeforePublished: every publish for a new pod comes after a
// successful stage since from; the kubelet must not set up a pod's volume
// on a device it could not stage.
func stagedBeforePublished(v volumeCalls, from time.Time) []string {
	pubs := v.of("NodePublishVolume", v.newPod)
	var early []csiCall
	for _, p := range pubs {
		if p.At.Before(from) {
			continue
		}
		if st, ok := v.firstOK("NodeStageVolume", nil, from); !ok || st.At.After(p.At) {
			early = append(early, p)
		}
	}
	if len(early) > 0 {
		return []string{fmt.Sprintf("NodePublishVolume for pod %s at %s without a successful NodeStageVolume before it: the kubelet set the volume up on a device it did not stage", early[0].UID, early[0].At.Format("15:04:05.000"))}
	}
	return nil
}

// newPodPublished: a new pod's publish succeeded since from.
func newPodPublished(v volumeCalls, from time.Time) []string {
	if _, ok := v.firstOK("NodePublishVolume", v.newPod, from); !ok {
		return []string{"no successful NodePublishVolume for a re-created pod"}
	}
	return nil
}

// oldPodsUnpublished: each old pod's volume was unpublished, and none
// published again.
func oldPodsUnpublished(v volumeCalls) []string {
	var out []string
	for _, uid := range v.Old {
		is := func(u string) bool { return u == uid }
		if _, ok := v.firstOK("NodeUnpublishVolume", is, time.Time{}); !ok {
			out = append(out, "no successful NodeUnpublishVolume for the old pod "+uid)
		}
		if n := len(v.of("NodePublishVolume", is)); n > 0 {
			out = append(out, fmt.Sprintf("%d NodePublishVolume calls for the old pod %s", n, uid))
		}
	}
	return out
}

// unstagedBetween: the unstages in [from, to) number want.
func unstagedBetween(v volumeCalls, from, to time.Time, want int, why string) []string {
	var got []string
	for _, c := range v.of("NodeUnstageVolume", nil) {
		if !c.At.Before(from) && (to.IsZero() || c.At.Before(to)) {
			got = append(got, c.String())
		}
	}
	if len(got) != want {
		return []string{fmt.Sprintf("%d NodeUnstageVolume calls %s, want %d (%s)", len(got), betweenWords(from, to), want, why)}
	}
	return nil
}

func betweenWords(from, to time.Time) string {
	switch {
	case from.IsZero() && to.IsZero():
		return "since the kubelet's start"
	case to.IsZero():
		return "since " + from.Format("15:04:05.000")
	case from.IsZero():
		return "before " + to.Format("15:04:05.000")
	}
	return "between " + from.Format("15:04:05.000") + " and " + to.Format("15:04:05.000")
}

// judgeUnpublish: each old pod's NodeUnpublishVolume failed failTimes
// times, then succeeded once; the re-created pod staged (the reconstructed
// device is uncertain) and published; nothing unstaged.
func judgeUnpublish(v volumeCalls, _ errorsState) []string {
	var out []string
	for _, uid := range v.Old {
		is := func(u string) bool { return u == uid }
		out = append(out, failedThenOK("NodeUnpublishVolume of the old pod "+uid, v.of("NodeUnpublishVolume", is), failTimes)...)
	}
	if _, ok := v.firstOK("NodeStageVolume", nil, time.Time{}); !ok {
		out = append(out, "no successful NodeStageVolume: the reconstructed device is uncertain, so the re-created pod's mount must stage it again")
	}
	out = append(out, stagedBeforePublished(v, time.Time{})...)
	out = append(out, newPodPublished(v, time.Time{})...)
	out = append(out, unstagedBetween(v, time.Time{}, time.Time{}, 0, "a pod wanted the volume throughout")...)
	return out
}

// judgeGivenUp: while the knob failed every NodeStageVolume (at least
// givenUpFailures of them), the pods that waited on it got no publish and
// nothing was unstaged; once they were deleted the kubelet unstaged the
// device it still counted as uncertain, exactly once; once the knob was
// removed the StatefulSet's new pods staged and published again.
func judgeGivenUp(v volumeCalls, e errorsState) []string {
	var out []string
	if e.scaledDown.IsZero() || e.cleared.IsZero() {
		return []string{"the fault did not get to delete the waiting pods and remove the knob"}
	}
	var before []csiCall
	for _, c := range v.of("NodeStageVolume", nil) {
		if c.At.Before(e.cleared) {
			before = append(before, c)
			if !c.Injected {
				out = append(out, "a NodeStageVolume the knob did not fail before it was removed: "+c.String())
			}
		}
	}
	if len(before) < givenUpFailures {
		out = append(out, fmt.Sprintf("%d NodeStageVolume calls while the knob failed them, want at least %d", len(before), givenUpFailures))
	}
	for _, uid := range e.givenUp {
		is := func(u string) bool { return u == uid }
		if n := len(v.of("NodePublishVolume", is)); n > 0 {
			out = append(out, fmt.Sprintf("%d NodePublishVolume calls for pod %s, whose volume was never staged", n, uid))
		}
	}
	out = append(out, oldPodsUnpublished(v)...)
	out = append(out, unstagedBetween(v, time.Time{}, e.scaledDown, 0, "the waiting pods still wanted the volume")...)
	unstaged := unstagedBetween(v, e.scaledDown, e.cleared, 1, "the kubelet gives up the volume when no pod wants it, and its reconstructed device is still uncertain")
	out = append(out, unstaged...)
	if len(unstaged) == 0 {
		if c, ok := v.firstOK("NodeUnstageVolume", nil, e.scaledDown); !ok || c.At.After(e.cleared) {
			out = append(out, "the NodeUnstageVolume after the pods' deletion failed")
		}
	}
	out = append(out, stagedBeforePublished(v, e.cleared)...)
	out = append(out, newPodPublished(v, e.cleared)...)
	return out
}

// hopVolumeCalls are the node's calls for pvs since the hop's kubelet
// started.
func (s *Scenario) hopVolumeCalls() ([]volumeCalls, error) {
	rec, err := s.callRecord()
	if err != nil {
		return nil, err
	}
	byHandle := map[string]int{}
	out := make([]volumeCalls, len(s.volumes.PVs))
	for i, pv := range s.volumes.PVs {
		byHandle[pv.VolumeHandle] = i
		out[i] = volumeCalls{PV: pv.Name, Handle: pv.VolumeHandle, Old: s.oldUIDs}
	}
	for _, c := range rec.CSICalls() {
		i, ok := byHandle[c.VolumeID]
		if !ok || c.Node != s.node.String() || !strings.HasPrefix(c.Method, "Node") || c.Time.Before(s.kubeletUp) {
			continue
		}
		code := c.Code
		if code == "" && c.Err != "" {
			code = codes.Unknown.String()
		}
		out[i].Calls = append(out[i].Calls, csiCall{At: c.Time, Method: c.Method, UID: podUIDOf(c.Path), Code: code, Injected: c.Injected})
	}
	return out, nil
}

// countLogLines counts the lines of log that say lc about the volume.
func countLogLines(log string, lc logCount, v volumeCalls) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, lc.msg) || lc.opFailure && !strings.Contains(line, logRetryLine) {
			continue
		}
		// The unique name is quoted, as \"...\" in a structured line.
		if strings.Contains(line, "^"+v.Handle+`"`) || strings.Contains(line, "^"+v.Handle+`\"`) {
			n++
		}
	}
	return n
}

// judgeLogs checks the kubelet's log since its start against the calls:
// each log count the fault names must match exactly.
func (f *csiErrorFault) judgeLogs(log string, v volumeCalls) (seen, fine []string) {
	for _, lc := range f.logs {
		got, want := countLogLines(log, lc, v), lc.want(v)
		line := fmt.Sprintf("%d kubelet log lines %q for PV %s, %s: %d", got, lc.msg, v.PV, lc.wantDescrib, want)
		if got != want {
			seen = append(seen, line)
		} else {
			fine = append(fine, line)
		}
	}
	return seen, fine
}

// observe clears the hop's knobs, then judges the calls of every volume,
// the kubelet's log (as readFailuresLog read it) and what the fault's own
// steps saw, in words; what they saw left (a given-up volume's global
// mount) goes to the judge as traces, beside the old pods' leftovers the
// judge adds itself.
func (f *csiErrorFault) observe(ctx context.Context, s *Scenario, sc *scenarios.StepContext) (catalogue.Observation, error) {
	if err := s.clearKnobs(ctx, sc); err != nil {
		return catalogue.Observation{}, err
	}
	vols, err := s.hopVolumeCalls()
	if err != nil {
		return catalogue.Observation{}, err
	}
	if !s.errs.logRead {
		_ = readFailuresLog(ctx, s, sc)
	}
	log, logErr := s.errs.log, s.errs.logErr
	seen := append([]string(nil), s.faultSeen...)
	var fine []string
	for _, v := range vols {
		var lines []string
		for _, c := range v.Calls {
			lines = append(lines, c.String())
		}
		sc.Evidence(reports.Evidence{Name: fmt.Sprintf("CSI calls for PV %s (volume %s) since the kubelet's start", v.PV, v.Handle), Kind: "log", Text: strings.Join(lines, "\n") + "\n"})
		for _, p := range f.judge(v, s.errs) {
			seen = append(seen, fmt.Sprintf("PV %s: %s", v.PV, p))
		}
		if logErr != nil {
			sc.Note("the kubelet's log lines for PV %s are not checked: %v", v.PV, logErr)
			continue
		}
		ls, lf := f.judgeLogs(log, v)
		seen, fine = append(seen, ls...), append(fine, lf...)
		sc.Evidence(reports.Evidence{Name: "the kubelet's log lines on PV " + v.PV + "'s failed calls", Kind: "log", Text: errorLogLines(log, f.logs, v)})
		fine = append(fine, fmt.Sprintf("PV %s: %d calls as expected (%d failed by the knob)", v.PV, len(v.Calls), v.injected("NodeStageVolume")+v.injected("NodeUnpublishVolume")))
	}
	o := catalogue.Observation{Detail: strings.Join(fine, "; "), Traces: append([]catalogue.Trace(nil), s.faultTraces...)}
	if len(seen) > 0 {
		o.Seen, o.Detail = true, strings.Join(seen, "; ")
	}
	return o, nil
}

// readFailuresLog reads the kubelet's log once the knobs' failures are
// over (every failed call comes before the old pods' cleanup ends, or
// before a given-up volume's knob is removed), for observe. Not later:
// the metrics step may restart the kubelet to tell the metrics
// registration race from a counter that never moves (witness.go), and
// the log since that start has none of the failures' lines. Nor the
// hop's cached copy (hopKubeletLog), read when the cleanup ended, before
// a given-up volume's failures.
func readFailuresLog(ctx context.Context, s *Scenario, _ *scenarios.StepContext) error {
	s.errs.log, s.errs.logErr, s.errs.logRead = "", errNoKubeletLog, true
	if ln, ok := s.node.(nodes.WithKubeletLog); ok {
		s.errs.log, s.errs.logErr = ln.KubeletLog(ctx)
	}
	return nil
}

// errorLogLines are the lines of log any of lcs counts for the volume.
func errorLogLines(log string, lcs []logCount, v volumeCalls) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		for _, lc := range lcs {
			if countLogLines(line, lc, v) > 0 {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// giveUpFailingStage runs once the old pods are cleaned, with every
// NodeStageVolume of the volumes failing: it waits (bounded) for the
// kubelet to have retried givenUpFailures times on the reconstructed
// device, which must stay mounted once at its global mount; deletes the
// pods that wait on it (the StatefulSet scaled to 0), so that the kubelet
// gives the volume up; waits (bounded) for its NodeUnstageVolume, the
// global mount gone and those pods' dirs removed; then removes the knobs
// and scales the StatefulSet back for the hop's checks.
func giveUpFailingStage(ctx context.Context, s *Scenario, sc *scenarios.StepContext) error {
	timeout := s.scaled(errorsWait)
	var last string
	failing := func(ctx context.Context) (bool, error) {
		vols, err := s.hopVolumeCalls()
		if err != nil {
			return false, err
		}
		var short []string
		for _, v := range vols {
			if _, ok := v.firstOK("NodePublishVolume", v.newPod, time.Time{}); ok {
				// Published without a stage: judged, no use waiting.
				return true, nil
			}
			if n := v.injected("NodeStageVolume"); n < givenUpFailures {
				short = append(short, fmt.Sprintf("PV %s: %d failed NodeStageVolume", v.PV, n))
			}
		}
		last = strings.Join(short, "; ")
		return len(short) == 0, nil
	}
	if err := wait.For(failing, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.faultSeen = append(s.faultSeen, fmt.Sprintf("the kubelet did not retry NodeStageVolume %d times within %s of the old pods' cleanup (%s)", givenUpFailures, timeout, last))
	}
	snap, err := s.snapshot(ctx, sc.QuietNode)
	if err != nil {
		return err
	}
	for _, pv := range s.volumes.PVs {
		if p, n := snap.CSIGlobalMount(pv.Driver, pv.VolumeHandle); n != 1 {
			s.faultSeen = append(s.faultSeen, fmt.Sprintf("the global mount %s of PV %s is mounted %d times while its re-stage fails, want 1 (the reconstructed, uncertain device)", snap.Abs(p), pv.Name, n))
		}
	}
	pods, err := s.listPods(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if slices.Contains(s.oldUIDs, string(p.UID)) {
			continue
		}
		s.errs.givenUp = append(s.errs.givenUp, string(p.UID))
		if p.Status.Phase == corev1.PodRunning {
			s.faultSeen = append(s.faultSeen, fmt.Sprintf("pod %s (uid %s) is Running although its volume's NodeStageVolume never succeeded", p.Name, p.UID))
		}
	}
	sc.Note("the kubelet retried NodeStageVolume on the reconstructed devices (%s); pods waiting on them: %s", orNone(last, "enough failures"), strings.Join(s.errs.givenUp, ", "))

	s.errs.scaledDown = time.Now()
	if err := s.scale(ctx, 0); err != nil {
		return err
	}
	var (
		lastSnap *nodestate.Snapshot
		missing  []string
	)
	givenUp := func(ctx context.Context) (bool, error) {
		vols, err := s.hopVolumeCalls()
		if err != nil {
			return false, err
		}
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil {
			return false, nil
		}
		pods, err := s.listPods(ctx)
		if err != nil {
			return false, nil
		}
		lastSnap, missing = snap, nil
		for _, v := range vols {
			if _, ok := v.firstOK("NodeUnstageVolume", nil, s.errs.scaledDown); !ok {
				missing = append(missing, "no NodeUnstageVolume for PV "+v.PV)
			}
		}
		if len(pods) > 0 {
			missing = append(missing, fmt.Sprintf("%d pods still in the API", len(pods)))
		}
		return len(missing) == 0 && len(s.globalMountTraces(snap)) == 0 && len(snap.Leftovers(s.errs.givenUp)) == 0, nil
	}
	err = wait.For(givenUp, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate())
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch {
	case err != nil && lastSnap != nil:
		// What the kubelet left of the volume it gave up are traces for
		// the judge; the calls it did not make are judged on the call
		// record (judgeGivenUp).
		left := append(s.globalMountTraces(lastSnap), oldPodTraces(lastSnap, lastSnap.Leftovers(s.errs.givenUp))...)
		s.faultTraces = append(s.faultTraces, left...)
		if len(missing) > 0 {
			s.faultSeen = append(s.faultSeen, fmt.Sprintf("%s after the waiting pods were deleted: %s", timeout, strings.Join(missing, "; ")))
		}
		sc.Note("the kubelet did not give the volumes up within %s: %s", timeout, strings.Join(append(missing, joinTraces(left)), "; "))
	case err != nil:
		s.faultSeen = append(s.faultSeen, fmt.Sprintf("the node's state could not be read within %s after the waiting pods were deleted", timeout))
	default:
		sc.Note("StatefulSet scaled to 0: the kubelet unstaged the %d volumes no pod wants, their global mounts and the waiting pods' dirs are gone, %s after", len(s.volumes.PVs), time.Since(s.errs.scaledDown).Round(10*time.Millisecond))
	}
	if err := readFailuresLog(ctx, s, sc); err != nil {
		return err
	}
	if err := s.clearKnobs(ctx, sc); err != nil {
		return err
	}
	s.errs.cleared = time.Now()
	if err := s.scale(ctx, s.cfg.Replicas); err != nil {
		return err
	}
	sc.Note("fail knobs removed; StatefulSet %s scaled back to %d", s.cfg.Name, s.cfg.Replicas)
	return nil
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
