package csidriver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"sigs.k8s.io/skewtest/internal/testgate"
)

// writeFail writes knob f into the knob directory dir, as a scenario does.
func writeFail(t *testing.T, dir string, f Fail) {
	t.Helper()
	mustOK(t, "validate "+f.Method, f.Validate())
	p := f.Path(dir)
	mustOK(t, "knob dir", os.MkdirAll(filepath.Dir(p), 0o755))
	mustOK(t, "knob file", os.WriteFile(p, []byte(f.Content()), 0o644))
}

// knobDriver starts a node service with a knob directory and a calls file.
func knobDriver(t *testing.T) (*Driver, csi.NodeClient, string, string) {
	t.Helper()
	root, knobs := newRoot(t), t.TempDir()
	d, err := New(Config{DriverName: testDriver, NodeID: "node-1", KubeletRoot: root, StallDir: knobs, CallsFile: filepath.Join(t.TempDir(), "calls.jsonl")})
	mustOK(t, "New", err)
	mustOK(t, "Start", d.Start(testCtx(t)))
	t.Cleanup(d.Stop)
	return d, csi.NewNodeClient(dial(t, d.CSIEndpoint())), root, knobs
}

// TestFailKnobCounts: a knob for NodeUnpublishVolume of one volume fails
// that volume's calls the given number of times with the given code, then
// lets them through; another volume's calls and other methods are never
// touched; the call record shows which calls the knob failed, with their
// code. Writing the knob again counts afresh.
func TestFailKnobCounts(t *testing.T) {
	d, node, root, knobs := knobDriver(t)
	ctx := testCtx(t)
	target := podTarget(t, root, "uid-1", "pv-1")
	other := podTarget(t, root, "uid-2", "pv-2")
	knob := Fail{Method: "NodeUnpublishVolume", VolumeID: "vol-1", Code: codes.FailedPrecondition, Times: 2}
	writeFail(t, knobs, knob)

	unpublish := func(vol, path string) error {
		_, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: path})
		return err
	}
	for i := range 2 {
		err := unpublish("vol-1", target)
		wantCode(t, "knobbed unpublish", err, codes.FailedPrecondition)
		if !strings.Contains(status.Convert(err).Message(), knob.Path(knobs)) {
			t.Errorf("failure %d does not name the knob's file: %v", i+1, err)
		}
		mustOK(t, "another volume's unpublish", unpublish("vol-2", other))
	}
	mustOK(t, "third unpublish, the knob spent", unpublish("vol-1", target))
	mustOK(t, "fourth unpublish", unpublish("vol-1", target))
	// Another method of the same volume is not the knob's.
	_, err := node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: globalMount(root, "vol-1")})
	mustOK(t, "unstage of the knobbed volume", err)

	// The same knob written again is a new knob: it fails twice more.
	mustOK(t, "remove the knob", os.Remove(knob.Path(knobs)))
	writeFail(t, knobs, knob)
	wantCode(t, "rewritten knob", unpublish("vol-1", target), codes.FailedPrecondition)
	wantCode(t, "rewritten knob", unpublish("vol-1", target), codes.FailedPrecondition)
	mustOK(t, "rewritten knob spent", unpublish("vol-1", target))

	calls, err := ReadCalls(d.cfg.CallsFile)
	mustOK(t, "ReadCalls", err)
	var got []string
	for _, c := range calls {
		s := c.Method + " " + c.VolumeID
		if c.Injected {
			s += " injected " + c.Code
		} else if c.Err != "" {
			s += " failed " + c.Code
		}
		got = append(got, s)
	}
	want := []string{
		"NodeUnpublishVolume vol-1 injected FailedPrecondition", "NodeUnpublishVolume vol-2",
		"NodeUnpublishVolume vol-1 injected FailedPrecondition", "NodeUnpublishVolume vol-2",
		"NodeUnpublishVolume vol-1", "NodeUnpublishVolume vol-1", "NodeUnstageVolume vol-1",
		"NodeUnpublishVolume vol-1 injected FailedPrecondition", "NodeUnpublishVolume vol-1 injected FailedPrecondition", "NodeUnpublishVolume vol-1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("call record:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(d.Calls()) != len(calls) {
		t.Errorf("the driver's record has %d calls, its file %d", len(d.Calls()), len(calls))
	}
}

// TestFailKnobUntilRemoved: a knob without a count fails every call, here
// with a code the kubelet takes as uncertain, until its file is removed;
// then the call does its work (a real stage: a tmpfs at the staging
// path), and a failed call did none.
func TestFailKnobUntilRemoved(t *testing.T) {
	testgate.RequireRoot(t, "stages a volume with a real tmpfs once the knob is removed")
	d, node, root, knobs := knobDriver(t)
	ctx := testCtx(t)
	staging := globalMount(root, "vol-1")
	knob := Fail{Method: "NodeStageVolume", VolumeID: "vol-1", Code: codes.Unavailable}
	writeFail(t, knobs, knob)
	stage := &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, VolumeCapability: mountCap()}
	for range 5 {
		_, err := node.NodeStageVolume(ctx, stage)
		wantCode(t, "stage under a knob without a count", err, codes.Unavailable)
	}
	if ms := countAt(t, staging); len(ms) != 0 {
		t.Fatalf("a failed stage mounted: %+v", ms)
	}
	mustOK(t, "remove the knob", os.Remove(knob.Path(knobs)))
	_, err := node.NodeStageVolume(ctx, stage)
	mustOK(t, "stage once the knob is gone", err)
	if ms := countAt(t, staging); len(ms) != 1 || ms[0].FSType != "tmpfs" {
		t.Fatalf("after the knob, mounts at the staging path: %+v", ms)
	}
	_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging})
	mustOK(t, "unstage", err)
	injected := 0
	for _, c := range d.Calls() {
		if c.Injected {
			injected++
			if c.Code != "Unavailable" || !strings.Contains(c.Err, "until the knob is removed") {
				t.Errorf("injected call %+v: want code Unavailable and the knob's words", c)
			}
		}
	}
	if injected != 5 {
		t.Errorf("%d calls recorded as injected, want 5", injected)
	}
}

// A knob file the driver cannot read as one fails the call loudly, naming
// the file and the format, rather than letting the call through.
func TestFailKnobMalformed(t *testing.T) {
	_, node, root, knobs := knobDriver(t)
	p := Fail{Method: "NodeUnpublishVolume", VolumeID: "vol-1"}.Path(knobs)
	mustOK(t, "knob dir", os.MkdirAll(filepath.Dir(p), 0o755))
	mustOK(t, "knob file", os.WriteFile(p, []byte("Sometimes twice\n"), 0o644))
	_, err := node.NodeUnpublishVolume(testCtx(t), &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: podTarget(t, root, "u", "pv")})
	wantCode(t, "malformed knob", err, codes.Internal)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, p) || !strings.Contains(msg, "not a gRPC error code") {
		t.Errorf("malformed knob's error %q names neither the file nor the problem", msg)
	}
}

func TestFailContentRoundTrips(t *testing.T) {
	for _, f := range []Fail{
		{Method: "NodeStageVolume", VolumeID: "a/b c", Code: codes.FailedPrecondition, Times: 2},
		{Method: "NodePublishVolume", VolumeID: "v", Code: codes.Canceled},
		{Method: "NodeUnstageVolume", VolumeID: "v", Code: codes.Unauthenticated, Times: 1},
	} {
		code, times, err := parseFail([]byte(f.Content()))
		if err != nil || code != f.Code || times != f.Times {
			t.Errorf("%q read back as %v %d %v", f.Content(), code, times, err)
		}
		if base := filepath.Base(f.Path("/k")); strings.Contains(base, "/") || filepath.Dir(f.Path("/k")) != "/k/"+f.Method+FailSuffix {
			t.Errorf("%+v: path %s", f, f.Path("/k"))
		}
	}
	for _, bad := range []string{"", "FailedPrecondition", "OK 1", "FailedPrecondition 0", "FailedPrecondition -1", "Nope 2", "FailedPrecondition 2 3"} {
		if _, _, err := parseFail([]byte(bad)); err == nil {
			t.Errorf("parseFail(%q) accepted it", bad)
		}
	}
	for _, bad := range []Fail{{VolumeID: "v", Code: codes.Internal}, {Method: "NodeStageVolume", Code: codes.Internal},
		{Method: "NodeStageVolume", VolumeID: "v"}, {Method: "NodeStageVolume", VolumeID: "v", Code: codes.Internal, Times: -1}} {
		if bad.Validate() == nil {
			t.Errorf("Validate accepted %+v", bad)
		}
	}
}

// The codes the kubelet's CSI plugin treats as uncertain (isFinalError in
// pkg/volume/csi/csi_client.go); every other error code is final.
func TestFinalForKubelet(t *testing.T) {
	uncertain := map[codes.Code]bool{codes.Canceled: true, codes.DeadlineExceeded: true, codes.Unavailable: true, codes.ResourceExhausted: true, codes.Aborted: true}
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		if FinalForKubelet(c) == uncertain[c] {
			t.Errorf("FinalForKubelet(%s) = %v", c, FinalForKubelet(c))
		}
	}
}
