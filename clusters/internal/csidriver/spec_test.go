package csidriver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"sigs.k8s.io/skewtest/clusters/loopdev"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// TestSpecAlreadyExists: the CSI spec's ALREADY_EXISTS answers. Another
// volume staged at a staging path that holds one, and a read-only publish
// onto a target published read-write (and the reverse), are refused, and
// the mounts there are left as they were.
func TestSpecAlreadyExists(t *testing.T) {
	testgate.RequireRoot(t, "stages and publishes volumes with real tmpfs and bind mounts")
	root := newRoot(t)
	d := startDriver(t, root)
	ctx := testCtx(t)
	node := csi.NewNodeClient(dial(t, d.CSIEndpoint()))

	staging := globalMount(root, "vol-a")
	_, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-a", StagingTargetPath: staging, VolumeCapability: mountCap()})
	mustOK(t, "stage vol-a", err)
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-b", StagingTargetPath: staging, VolumeCapability: mountCap()})
	wantCode(t, "stage vol-b where vol-a is staged", err, codes.AlreadyExists)
	if ms := countAt(t, staging); len(ms) != 1 || ms[0].Source != testDriver+"/vol-a" {
		t.Fatalf("staging path after the refused re-stage: %+v, want vol-a's tmpfs only", ms)
	}

	rw := podTarget(t, root, "uid-rw", "pv")
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-a", StagingTargetPath: staging, TargetPath: rw, VolumeCapability: mountCap()})
	mustOK(t, "publish read-write", err)
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-a", StagingTargetPath: staging, TargetPath: rw, VolumeCapability: mountCap(), Readonly: true})
	wantCode(t, "read-only publish onto a read-write target", err, codes.AlreadyExists)
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-a", StagingTargetPath: staging, TargetPath: rw, VolumeCapability: mountCap()})
	mustOK(t, "the same read-write publish again", err)
	if ms := countAt(t, rw); len(ms) != 1 || hasOption(ms[0].Options, "ro") {
		t.Fatalf("target after the refused read-only publish: %+v, want one read-write mount", ms)
	}

	ro := podTarget(t, root, "uid-ro", "pv")
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-a", StagingTargetPath: staging, TargetPath: ro, VolumeCapability: mountCap(), Readonly: true})
	mustOK(t, "publish read-only", err)
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-a", StagingTargetPath: staging, TargetPath: ro, VolumeCapability: mountCap()})
	wantCode(t, "read-write publish onto a read-only target", err, codes.AlreadyExists)

	// Another volume's staging path onto a published target.
	stagingB := globalMount(root, "vol-b")
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-b", StagingTargetPath: stagingB, VolumeCapability: mountCap()})
	mustOK(t, "stage vol-b", err)
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-b", StagingTargetPath: stagingB, TargetPath: rw, VolumeCapability: mountCap()})
	wantCode(t, "publish vol-b onto vol-a's target", err, codes.AlreadyExists)

	for _, tgt := range []string{rw, ro} {
		_, err = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-a", TargetPath: tgt})
		mustOK(t, "unpublish", err)
	}
	for vol, st := range map[string]string{"vol-a": staging, "vol-b": stagingB} {
		_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: st})
		mustOK(t, "unstage", err)
	}
	if ms := mountsUnder(t, root); len(ms) != 0 {
		t.Errorf("mounts left: %+v", ms)
	}
}

// TestSpecFailedPreconditionAfterValidation: publishing an unstaged volume
// (staging path not mounted) is FAILED_PRECONDITION, as is one without a
// staging path; a request that is also invalid is INVALID_ARGUMENT.
func TestSpecFailedPreconditionAfterValidation(t *testing.T) {
	testgate.RequireRoot(t, "a refused publish must leave no mount, and only root could make one")
	root := newRoot(t)
	d := startDriver(t, root)
	ctx := testCtx(t)
	node := csi.NewNodeClient(dial(t, d.CSIEndpoint()))
	target := podTarget(t, root, "uid", "pv")
	missing := filepath.Join(root, "no", "such", "globalmount")
	cases := []struct {
		name string
		req  *csi.NodePublishVolumeRequest
		want codes.Code
	}{
		{"staging path that does not exist", &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: missing, TargetPath: target, VolumeCapability: mountCap()}, codes.FailedPrecondition},
		{"no staging path", &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: target, VolumeCapability: mountCap()}, codes.FailedPrecondition},
		{"missing staging path and no volume_id", &csi.NodePublishVolumeRequest{StagingTargetPath: missing, TargetPath: target, VolumeCapability: mountCap()}, codes.InvalidArgument},
		{"missing staging path and no target", &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: missing, VolumeCapability: mountCap()}, codes.InvalidArgument},
		{"missing staging path and no capability", &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: missing, TargetPath: target}, codes.InvalidArgument},
		{"missing staging path and a block capability (tmpfs mode)", &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: missing, TargetPath: target, VolumeCapability: blockCap()}, codes.InvalidArgument},
	}
	for _, c := range cases {
		_, err := node.NodePublishVolume(ctx, c.req)
		wantCode(t, c.name, err, c.want)
	}
	if ms := mountsUnder(t, root); len(ms) != 0 {
		t.Errorf("refused publishes left mounts: %+v", ms)
	}
}

func blockCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

// TestEphemeralVolume publishes a CSI inline ephemeral volume: a tmpfs of
// the asked size straight at the target, no staging, gone on unpublish.
func TestEphemeralVolume(t *testing.T) {
	testgate.RequireRoot(t, "mounts an ephemeral volume's tmpfs at its target")
	root := newRoot(t)
	d := startDriver(t, root)
	ctx := testCtx(t)
	node := csi.NewNodeClient(dial(t, d.CSIEndpoint()))
	target := podTarget(t, root, "uid-e", "inline")
	req := &csi.NodePublishVolumeRequest{VolumeId: "csi-abc", TargetPath: target, VolumeCapability: mountCap(),
		VolumeContext: map[string]string{EphemeralContextKey: "true", VolumeContextCapacity: "8Mi"}}
	for i := range 2 {
		_, err := node.NodePublishVolume(ctx, req)
		mustOK(t, "publish ephemeral", err)
		ms := countAt(t, target)
		if len(ms) != 1 || ms[0].FSType != "tmpfs" || ms[0].Source != testDriver+"/ephemeral/csi-abc" {
			t.Fatalf("publish %d: mounts at target %+v, want one tmpfs", i+1, ms)
		}
	}
	var st unix.Statfs_t
	mustOK(t, "statfs", unix.Statfs(target, &st))
	if size := int64(st.Blocks) * st.Bsize; size != 8<<20 {
		t.Errorf("ephemeral tmpfs size %d, want %d", size, 8<<20)
	}
	_, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-abc", TargetPath: target})
	mustOK(t, "unpublish ephemeral", err)
	if ms := mountsUnder(t, root); len(ms) != 0 {
		t.Errorf("mounts left: %+v", ms)
	}
}

// TestStall: while <stall dir>/NodePublishVolume exists, publishes wait
// (until the caller gives up); once it is removed they go on.
func TestStall(t *testing.T) {
	testgate.RequireRoot(t, "stages and publishes a volume with real mounts while publishes stall")
	root := newRoot(t)
	stall := t.TempDir()
	d, err := New(Config{DriverName: testDriver, NodeID: "node-1", KubeletRoot: root, StallDir: stall, CallsFile: filepath.Join(t.TempDir(), "calls.jsonl")})
	mustOK(t, "New", err)
	mustOK(t, "Start", d.Start(testCtx(t)))
	t.Cleanup(d.Stop)
	ctx := testCtx(t)
	node := csi.NewNodeClient(dial(t, d.CSIEndpoint()))
	staging := globalMount(root, "v")
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: staging, VolumeCapability: mountCap()})
	mustOK(t, "stage", err)
	target := podTarget(t, root, "uid", "pv")
	pub := &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap()}

	mustOK(t, "stall file", os.WriteFile(filepath.Join(stall, "NodePublishVolume"), nil, 0o644))
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	start := time.Now()
	_, err = node.NodePublishVolume(short, pub)
	cancel()
	if err == nil || time.Since(start) < 400*time.Millisecond {
		t.Fatalf("stalled publish returned %v after %s, want a deadline error after 500ms", err, time.Since(start))
	}
	if ms := countAt(t, target); len(ms) != 0 {
		t.Fatalf("a stalled publish mounted: %+v", ms)
	}
	done := make(chan error, 1)
	go func() { _, err := node.NodePublishVolume(ctx, pub); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("publish returned (%v) while the stall file exists", err)
	case <-time.After(300 * time.Millisecond):
	}
	// While it waits, the call says so, with its target path.
	marker := filepath.Join(stall, "NodePublishVolume"+StalledSuffix)
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != target {
		t.Fatalf("stalled call's marker %s = %q, %v; want the target path %s", marker, b, err, target)
	}
	mustOK(t, "release", os.Remove(filepath.Join(stall, "NodePublishVolume")))
	mustOK(t, "publish after release", <-done)
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("stalled call's marker still there after its release: %v", err)
	}
	if ms := countAt(t, target); len(ms) != 1 {
		t.Fatalf("after release, mounts at target: %+v", ms)
	}
	calls, err := ReadCalls(d.cfg.CallsFile)
	mustOK(t, "ReadCalls", err)
	var methods []string
	for _, c := range calls {
		methods = append(methods, c.Method)
	}
	if got := strings.Join(methods, " "); got != "NodeStageVolume NodePublishVolume NodePublishVolume" {
		t.Errorf("calls file: %s", got)
	}
	releaseVolume(ctx, t, node, root, "v", staging, target)
}

func requireEBSTools(t *testing.T) {
	t.Helper()
	testgate.RequireRoot(t, "the EBS mode attaches loop devices and mounts ext4 on them")
	testgate.RequireTools(t, "losetup", "blkid", "mkfs.ext4") // util-linux, e2fsprogs
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		testgate.SkipOrFail(t, fmt.Sprintf("the EBS mode needs loop devices (/dev/loop-control): %v", err),
			"load the loop module (modprobe loop); in a container, run it privileged or pass /dev/loop-control and the /dev/loop* devices in")
	}
}

// startEBS starts an EBS-mode driver with both services and registers
// cleanups that detach its loop devices.
func startEBS(t *testing.T, root string) (*Driver, csi.ControllerClient, csi.NodeClient) {
	t.Helper()
	state := canonical(t.TempDir())
	d, err := New(Config{DriverName: testDriver, Mode: ModeEBS, NodeID: "node-1", KubeletRoot: root,
		ControllerEndpoint: filepath.Join(state, "c.sock"), StateDir: state, Nodes: []string{"node-1"}})
	mustOK(t, "New", err)
	t.Cleanup(func() {
		// After newRoot's unmount (cleanups run last-in first-out).
		if err := loopdev.DetachUnder(context.Background(), state, 10*time.Second); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	mustOK(t, "Start", d.Start(testCtx(t)))
	t.Cleanup(d.Stop)
	return d, csi.NewControllerClient(dial(t, d.ControllerEndpoint())), csi.NewNodeClient(dial(t, d.CSIEndpoint()))
}

// TestEBSFilesystemLifecycle: create, attach (a loop device over the
// sparse file), stage (ext4, formatted once), publish, write; then tear
// down and attach again: the data is still there and nothing is
// reformatted; detach removes the loop device.
func TestEBSFilesystemLifecycle(t *testing.T) {
	requireEBSTools(t)
	root := newRoot(t)
	d, ctrl, node := startEBS(t, root)
	ctx := testCtx(t)

	vol, err := ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "vol-ebs", CapacityRange: &csi.CapacityRange{RequiredBytes: 32 << 20}, VolumeCapabilities: []*csi.VolumeCapability{mountCap()}})
	mustOK(t, "CreateVolume", err)
	file := d.backingFile("vol-ebs")
	var st unix.Stat_t
	mustOK(t, "stat backing file", unix.Stat(file, &st))
	if st.Size != 32<<20 || st.Blocks*512 >= 32<<20 {
		t.Fatalf("backing file: size %d, %d bytes allocated; want a sparse 32Mi file", st.Size, st.Blocks*512)
	}
	_, err = ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "vol-ebs", CapacityRange: &csi.CapacityRange{RequiredBytes: 64 << 20}, VolumeCapabilities: []*csi.VolumeCapability{mountCap()}})
	wantCode(t, "CreateVolume with the same name and another size", err, codes.AlreadyExists)

	staging := globalMount(root, "vol-ebs")
	for round := range 2 {
		pub, err := ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "vol-ebs", NodeId: "node-1", VolumeCapability: mountCap(), VolumeContext: vol.GetVolume().GetVolumeContext()})
		mustOK(t, "ControllerPublishVolume", err)
		dev := pub.GetPublishContext()[PublishContextDevicePath]
		if loopdev.BackingFile(dev) != file {
			t.Fatalf("round %d: device %q is backed by %q, want %q", round, dev, loopdev.BackingFile(dev), file)
		}
		again, err := ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "vol-ebs", NodeId: "node-1", VolumeCapability: mountCap()})
		mustOK(t, "ControllerPublishVolume again", err)
		if again.GetPublishContext()[PublishContextDevicePath] != dev {
			t.Errorf("a repeated attach returned %v, want %s", again.GetPublishContext(), dev)
		}
		if loops, _ := loopdev.BackedUnder(filepath.Dir(file)); len(loops) != 1 {
			t.Errorf("round %d: loop devices over the volume: %+v, want 1", round, loops)
		}

		stage := &csi.NodeStageVolumeRequest{VolumeId: "vol-ebs", StagingTargetPath: staging, VolumeCapability: mountCap(), PublishContext: pub.GetPublishContext()}
		for range 2 {
			_, err = node.NodeStageVolume(ctx, stage)
			mustOK(t, "NodeStageVolume", err)
		}
		ms := countAt(t, staging)
		if len(ms) != 1 || ms[0].FSType != "ext4" || ms[0].Source != dev {
			t.Fatalf("round %d: staging mounts %+v, want %s as ext4 once", round, ms, dev)
		}
		target := podTarget(t, root, "uid-ebs", "pv")
		_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-ebs", StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap(), PublishContext: pub.GetPublishContext()})
		mustOK(t, "NodePublishVolume", err)
		if round == 0 {
			mustOK(t, "write", os.WriteFile(filepath.Join(target, "data"), []byte("survives detach"), 0o644))
		} else if b, err := os.ReadFile(filepath.Join(target, "data")); err != nil || string(b) != "survives detach" {
			t.Fatalf("after detach and attach: %q, %v (reformatted?)", b, err)
		}
		releaseVolume(ctx, t, node, root, "vol-ebs", staging, target)

		_, err = ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-ebs"})
		wantCode(t, "DeleteVolume of an attached volume", err, codes.FailedPrecondition)
		for range 2 {
			_, err = ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-ebs", NodeId: "node-1"})
			mustOK(t, "ControllerUnpublishVolume", err)
		}
		wantDetached(t, fmt.Sprintf("round %d", round), dev, file)
	}
	_, err = ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-ebs"})
	mustOK(t, "DeleteVolume", err)
	if _, err := os.Stat(file); err == nil {
		t.Errorf("backing file %s left after DeleteVolume", file)
	}
}

// TestEBSBlockVolume serves volumeMode Block as the CSI block contract
// says: NodeStageVolume mounts nothing; NodePublishVolume creates the
// target file and bind-mounts the device node onto it; data written through
// it is on the backing file.
// detachWait bounds the wait for a detached loop device to let go of its
// file: a device still open when it is detached is cleared at its last
// close, as losetup -d does.
const detachWait = 10 * time.Second

// wantDetached fails t unless dev lets go of backing within detachWait. It
// asks whether dev is still attached to backing, not whether it is
// attached at all: other packages' tests attach loop devices at the same
// time, and losetup --find hands one of them the device just freed.
func wantDetached(t *testing.T, what, dev, backing string) {
	t.Helper()
	deadline := time.Now().Add(detachWait)
	for loopdev.BackingFile(dev) == backing {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s still attached to %s %s after ControllerUnpublishVolume", what, dev, backing, detachWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestEBSBlockVolume(t *testing.T) {
	requireEBSTools(t)
	root := newRoot(t)
	d, ctrl, node := startEBS(t, root)
	ctx := testCtx(t)
	_, err := ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "blk", VolumeCapabilities: []*csi.VolumeCapability{blockCap()}})
	mustOK(t, "CreateVolume", err)
	pub, err := ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "blk", NodeId: "node-1", VolumeCapability: blockCap()})
	mustOK(t, "ControllerPublishVolume", err)
	_, err = ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "blk", NodeId: "node-2", VolumeCapability: blockCap()})
	wantCode(t, "attach to a node not in the cluster", err, codes.NotFound)
	dev := pub.GetPublishContext()[PublishContextDevicePath]

	// Kubelet-style block paths.
	staging := filepath.Join(root, "plugins", "kubernetes.io", "csi", "volumeDevices", "staging", "pv-blk")
	target := filepath.Join(root, "plugins", "kubernetes.io", "csi", "volumeDevices", "publish", "pv-blk", "uid-b")
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "blk", StagingTargetPath: staging, VolumeCapability: blockCap(), PublishContext: pub.GetPublishContext()})
	mustOK(t, "NodeStageVolume", err)
	if ms := mountsUnder(t, root); len(ms) != 0 {
		t.Fatalf("block stage mounted %+v, want nothing", ms)
	}
	for range 2 {
		_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "blk", StagingTargetPath: staging, TargetPath: target, VolumeCapability: blockCap(), PublishContext: pub.GetPublishContext()})
		mustOK(t, "NodePublishVolume", err)
	}
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "blk", StagingTargetPath: staging, TargetPath: target, VolumeCapability: blockCap(), PublishContext: pub.GetPublishContext(), Readonly: true})
	wantCode(t, "read-only block publish onto a read-write target", err, codes.AlreadyExists)
	if ms := countAt(t, target); len(ms) != 1 {
		t.Fatalf("mounts at the block target: %+v, want 1", ms)
	}
	var tst, dst unix.Stat_t
	mustOK(t, "stat target", unix.Stat(target, &tst))
	mustOK(t, "stat device", unix.Stat(dev, &dst))
	if tst.Mode&unix.S_IFMT != unix.S_IFBLK || tst.Rdev != dst.Rdev {
		t.Fatalf("target is mode %o rdev %d, want the block device %s (rdev %d)", tst.Mode, tst.Rdev, dev, dst.Rdev)
	}
	f, err := os.OpenFile(target, os.O_WRONLY, 0)
	mustOK(t, "open the block target", err)
	_, err = f.WriteAt([]byte("raw block"), 4096)
	mustOK(t, "write", err)
	mustOK(t, "fsync", f.Sync())
	f.Close()
	b := make([]byte, 9)
	bf, err := os.Open(d.backingFile("blk"))
	mustOK(t, "open backing file", err)
	_, err = bf.ReadAt(b, 4096)
	bf.Close()
	if err != nil || string(b) != "raw block" {
		t.Fatalf("backing file at 4096: %q, %v", b, err)
	}
	_, err = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "blk", TargetPath: target})
	mustOK(t, "NodeUnpublishVolume", err)
	if _, err := os.Lstat(target); err == nil {
		t.Errorf("block target file %s not removed", target)
	}
	_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "blk", StagingTargetPath: staging})
	mustOK(t, "NodeUnstageVolume", err)
	_, err = ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "blk", NodeId: "node-1"})
	mustOK(t, "ControllerUnpublishVolume", err)
	wantDetached(t, "block volume", dev, d.backingFile("blk"))
}

// TestEBSStageAnotherDevice: staging a volume where another volume's device
// is mounted is ALREADY_EXISTS; a stage without a device in the publish
// context (not attached) is FAILED_PRECONDITION.
func TestEBSStageAnotherDevice(t *testing.T) {
	requireEBSTools(t)
	root := newRoot(t)
	_, ctrl, node := startEBS(t, root)
	ctx := testCtx(t)
	pc := map[string]map[string]string{}
	for _, v := range []string{"a", "b"} {
		_, err := ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: v, VolumeCapabilities: []*csi.VolumeCapability{mountCap()}})
		mustOK(t, "CreateVolume", err)
		pub, err := ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: v, NodeId: "node-1", VolumeCapability: mountCap()})
		mustOK(t, "ControllerPublishVolume", err)
		pc[v] = pub.GetPublishContext()
	}
	staging := globalMount(root, "a")
	_, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "a", StagingTargetPath: staging, VolumeCapability: mountCap()})
	wantCode(t, "stage without a device", err, codes.FailedPrecondition)
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "a", StagingTargetPath: staging, VolumeCapability: mountCap(), PublishContext: pc["a"]})
	mustOK(t, "stage a", err)
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "b", StagingTargetPath: staging, VolumeCapability: mountCap(), PublishContext: pc["b"]})
	wantCode(t, "stage b where a is staged", err, codes.AlreadyExists)
	_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "a", StagingTargetPath: staging})
	mustOK(t, "unstage", err)
	for _, v := range []string{"a", "b"} {
		_, err = ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: v, NodeId: "node-1"})
		mustOK(t, "ControllerUnpublishVolume", err)
	}
}
