package reconstruction

import (
	"strings"
	"testing"
	"time"
)

// calls builds a volume's call record from lines "method uid result",
// result "ok", "knob" (failed by the fail knob) or a gRPC code, one
// second apart from t0.
func calls(t0 time.Time, lines ...string) []csiCall {
	var out []csiCall
	for i, l := range lines {
		f := strings.Fields(l)
		c := csiCall{At: t0.Add(time.Duration(i) * time.Second), Method: f[0]}
		if f[1] != "-" {
			c.UID = f[1]
		}
		switch f[2] {
		case "ok":
		case "knob":
			c.Code, c.Injected = "FailedPrecondition", true
		default:
			c.Code = f[2]
		}
		out = append(out, c)
	}
	return out
}

var t0 = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

func vol(lines ...string) volumeCalls {
	return volumeCalls{PV: "pv-0", Handle: "h-0", Old: []string{"old"}, Calls: calls(t0, lines...)}
}

func wantProblems(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if len(want) == 0 {
		if len(got) > 0 {
			t.Errorf("%s: problems %q, want none", what, got)
		}
		return
	}
	all := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("%s: problems\n%s\nwant one saying %q", what, all, w)
		}
	}
}

// An old pod's unpublish fails twice and then goes through; a kubelet
// that takes the failed unpublish as done calls it once.
func TestJudgeUnpublish(t *testing.T) {
	good := vol("NodeStageVolume - ok", "NodeUnpublishVolume old knob", "NodePublishVolume new ok", "NodeUnpublishVolume old knob", "NodeUnpublishVolume old ok")
	wantProblems(t, "v1.37.2", judgeUnpublish(good, errorsState{}))
	takenAsDone := vol("NodeStageVolume - ok", "NodeUnpublishVolume old knob", "NodePublishVolume new ok")
	wantProblems(t, "failed unpublish taken as done", judgeUnpublish(takenAsDone, errorsState{}),
		"NodeUnpublishVolume of the old pod old: [failed by the knob], want [failed by the knob, failed by the knob, ok]")
	noRestage := vol("NodeUnpublishVolume old knob", "NodeUnpublishVolume old knob", "NodeUnpublishVolume old ok", "NodePublishVolume new ok")
	wantProblems(t, "uncertain device not staged again", judgeUnpublish(noRestage, errorsState{}), "no successful NodeStageVolume")
}

// Every re-stage fails until the pods are deleted: the kubelet must then
// unstage the uncertain device, once; a kubelet that forgot the device on
// the first failure never does.
func TestJudgeGivenUp(t *testing.T) {
	e := errorsState{givenUp: []string{"waiting"}, scaledDown: t0.Add(4500 * time.Millisecond), cleared: t0.Add(5500 * time.Millisecond)}
	good := vol("NodeStageVolume - knob", "NodeUnpublishVolume old ok", "NodeStageVolume - knob", "NodeStageVolume - knob",
		"NodeStageVolume - knob", "NodeUnstageVolume - ok", "NodeStageVolume - ok", "NodePublishVolume new ok")
	wantProblems(t, "v1.37.2", judgeGivenUp(good, e))

	forgotten := vol("NodeStageVolume - knob", "NodeUnpublishVolume old ok", "NodeStageVolume - knob", "NodeStageVolume - knob",
		"NodeStageVolume - knob", "NodeStageVolume - ok", "NodeStageVolume - ok", "NodePublishVolume new ok")
	wantProblems(t, "device forgotten", judgeGivenUp(forgotten, e), "0 NodeUnstageVolume calls between 10:00:04.500 and 10:00:05.500, want 1")

	publishedUnstaged := vol("NodeStageVolume - knob", "NodePublishVolume waiting ok", "NodeUnpublishVolume old ok", "NodeStageVolume - knob",
		"NodeStageVolume - knob", "NodeUnstageVolume - ok", "NodeStageVolume - ok", "NodePublishVolume new ok")
	wantProblems(t, "published on a failed stage", judgeGivenUp(publishedUnstaged, e), "1 NodePublishVolume calls for pod waiting, whose volume was never staged")

	wantProblems(t, "fault cut short", judgeGivenUp(good, errorsState{}), "did not get to delete the waiting pods")
}

// The kubelet's lines are counted per volume, by its unique name (which
// ends with the handle: h-0 is not h-00), a failed operation's only in
// the pending operations' retry line (an event, or the backoff error the
// reconciler does not log, say the same words).
func TestCountLogLines(t *testing.T) {
	log := `I1206 10:00:01.100000 operation_generator.go:690] "MountVolume.markDeviceErrorState leaving volume uncertain" volumeName="kubernetes.io/csi/csi.skewtest.k8s.io^h-0"
E1206 10:00:01.100100 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/csi.skewtest.k8s.io^h-0 podName: nodeName:}" failed. No retries permitted until 2026-12-06 10:00:01.6 (durationBeforeRetry 500ms). Error: MountVolume.MountDevice failed for volume "pv-0" (UniqueName: "kubernetes.io/csi/csi.skewtest.k8s.io^h-0") pod "web-0" (UID: "u") : rpc error: code = FailedPrecondition desc = skewtest fail knob
I1206 10:00:01.100200 operation_generator.go:690] "MountVolume.markDeviceErrorState leaving volume uncertain" volumeName="kubernetes.io/csi/csi.skewtest.k8s.io^h-00"
I1206 10:00:01.100300 event.go:1] "Event occurred" message="MountVolume.MountDevice failed for volume \"pv-0\" (UniqueName: \"kubernetes.io/csi/csi.skewtest.k8s.io^h-0\")"
E1206 10:00:01.200000 reconciler.go:1] Failed to create operation with name "x". An operation with that name failed at 10:00:01. No retries permitted until 10:00:01.6 (500ms). Last error: "MountVolume.MountDevice failed for volume \"pv-0\" (UniqueName: \"kubernetes.io/csi/csi.skewtest.k8s.io^h-0\")".
E1206 10:00:02.100100 nestedpendingoperations.go:348] Operation for "{volumeName:x podName: nodeName:}" failed. No retries permitted until 2026-12-06 10:00:03.1 (durationBeforeRetry 1s). Error: UnmountVolume.TearDown failed for volume "kubernetes.io/csi/csi.skewtest.k8s.io^h-0" (UniqueName: "kubernetes.io/csi/csi.skewtest.k8s.io^h-0") pod "u" (UID: "u") : rpc error
`
	v := volumeCalls{PV: "pv-0", Handle: "h-0"}
	for _, tc := range []struct {
		lc   logCount
		want int
	}{
		{logCount{msg: logLeftUncertain}, 1},
		{logCount{msg: logMountDeviceFailed, opFailure: true}, 1},
		{logCount{msg: logMountDeviceFailed}, 3},
		{logCount{msg: logTearDownFailed, opFailure: true}, 1},
	} {
		if n := countLogLines(log, tc.lc, v); n != tc.want {
			t.Errorf("lines %q (operation failure %v) for h-0: %d, want %d", tc.lc.msg, tc.lc.opFailure, n, tc.want)
		}
	}
	f := &csiErrorFault{logs: []logCount{{msg: logLeftUncertain, want: injectedOf("NodeStageVolume"), wantDescrib: "one per failed NodeStageVolume"}}}
	v.Calls = calls(t0, "NodeStageVolume - knob", "NodeStageVolume - knob", "NodeStageVolume - ok")
	seen, _ := f.judgeLogs(log, v)
	wantProblems(t, "one uncertain line for two failures", seen, `1 kubelet log lines "MountVolume.markDeviceErrorState leaving volume uncertain" for PV pv-0, one per failed NodeStageVolume: 2`)
}

// The faults plant their knobs while the kubelet is down, before the
// kubelet starts; each reads the kubelet's log after the cleanup (the one
// that gives the volume up, after doing so), before the metrics step,
// which may restart the kubelet and with it the log the failures are
// counted in.
func TestErrorFaultSteps(t *testing.T) {
	for name, want := range map[string][]string{
		"unpublish-fails-final": {"force-delete the pods while the kubelet is down", "plant fault unpublish-fails-final", "start kubelet v1.36.3",
			"wait for the node Ready at kubelet v1.36.3", "wait until the old pods' mounts and directories are gone", "fault unpublish-fails-final after the cleanup", "re-created pods Running on the same volumes with their data", "kubelet metrics"},
		"restage-fails-final-until-deleted": {"plant fault restage-fails-final-until-deleted", "start kubelet v1.36.3", "wait for the node Ready at kubelet v1.36.3",
			"wait until the old pods' mounts and directories are gone", "fault restage-fails-final-until-deleted after the cleanup", "re-created pods Running on the same volumes with their data", "kubelet metrics"},
	} {
		f, err := LookupFault(name)
		if err != nil {
			t.Fatal(err)
		}
		got := hop1Steps(t, &f)
		if all := strings.Join(got, "|"); !strings.Contains(all, strings.Join(want, "|")) {
			t.Errorf("%s: hop 1 steps\n%s\nwant in order\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
