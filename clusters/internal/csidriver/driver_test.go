package csidriver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"sigs.k8s.io/skewtest/clusters/mountinfo"
	"sigs.k8s.io/skewtest/internal/testgate"
)

const testDriver = "csi.skewtest.k8s.io"

// newRoot makes a kubelet root dir and registers a cleanup that unmounts
// everything under it before t.TempDir removes it, even if the test failed.
func newRoot(t *testing.T) string {
	t.Helper()
	root := canonical(t.TempDir())
	t.Cleanup(func() {
		if n := unmountUnder(t, root); n > 0 {
			t.Logf("cleanup: unmounted %d leftover mounts under %s", n, root)
		}
	})
	return root
}

// mountsUnder returns the mount points at or below dir.
func mountsUnder(t *testing.T, dir string) []mountinfo.Mount {
	t.Helper()
	all, err := readMountInfo()
	if err != nil {
		t.Fatalf("reading mountinfo: %v", err)
	}
	return mountinfo.Under(all, dir)
}

func unmountUnder(t *testing.T, dir string) int {
	n := 0
	for range 100 {
		ms := mountsUnder(t, dir)
		if len(ms) == 0 {
			return n
		}
		sort.Slice(ms, func(i, j int) bool { return len(ms[i].MountPoint) > len(ms[j].MountPoint) })
		if err := unix.Unmount(ms[0].MountPoint, unix.MNT_DETACH); err != nil {
			t.Errorf("cleanup: umount %s: %v", ms[0].MountPoint, err)
			return n
		}
		n++
	}
	t.Errorf("cleanup: mounts still under %s after 100 unmounts", dir)
	return n
}

func startDriver(t *testing.T, root string) *Driver {
	t.Helper()
	d, err := New(Config{DriverName: testDriver, NodeID: "node-1", KubeletRoot: root})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(d.Stop)
	return d
}

func dial(t *testing.T, sock string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dialing %s: %v", sock, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mountCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

// kubelet-style paths.
func globalMount(root, volumeID string) string {
	sum := sha256.Sum256([]byte(volumeID))
	return filepath.Join(root, "plugins", "kubernetes.io", "csi", testDriver, hex.EncodeToString(sum[:]), "globalmount")
}

// podTarget creates the target's parent (as the kubelet does, with
// vol_data.json) and returns the target path, which does not exist yet.
func podTarget(t *testing.T, root, uid, pv string) string {
	t.Helper()
	parent := filepath.Join(root, "pods", uid, "volumes", "kubernetes.io~csi", pv)
	if err := os.MkdirAll(parent, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "vol_data.json"), []byte(`{"volumeHandle":"vol-1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(parent, "mount")
}

func countAt(t *testing.T, path string) []mountinfo.Mount {
	t.Helper()
	ms, err := mountsAt(path)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: got %v (code %s), want code %s", what, err, status.Code(err), code)
	}
}

// releaseVolume unpublishes and unstages vol and checks that no mount is
// left under root.
func releaseVolume(ctx context.Context, t *testing.T, node csi.NodeClient, root, vol, staging, target string) {
	t.Helper()
	_, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: target})
	mustOK(t, "unpublish", err)
	_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging})
	mustOK(t, "unstage", err)
	if ms := mountsUnder(t, root); len(ms) != 0 {
		t.Errorf("mounts left: %+v", ms)
	}
}

func mustOK(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestRegistrationIdentityAndStop(t *testing.T) {
	testgate.RequireRoot(t, "the driver's registration and identity services, run as the node plugin runs: as root")
	root := newRoot(t)

	// A stale socket file from a previous run must not stop the driver.
	stale := filepath.Join(root, "plugins_registry", testDriver+"-reg.sock")
	if err := os.MkdirAll(filepath.Dir(stale), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	d := startDriver(t, root)
	if d.RegistrationEndpoint() != stale {
		t.Errorf("RegistrationEndpoint = %q, want %q", d.RegistrationEndpoint(), stale)
	}
	wantCSI := filepath.Join(root, "plugins", testDriver, "csi.sock")
	if d.CSIEndpoint() != wantCSI {
		t.Errorf("CSIEndpoint = %q, want %q", d.CSIEndpoint(), wantCSI)
	}
	for _, p := range []string{d.CSIEndpoint(), d.RegistrationEndpoint()} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode()&fs.ModeSocket == 0 {
			t.Errorf("%s is not a socket: %v %v", p, fi, err)
		}
	}
	ctx := testCtx(t)

	reg := registerapi.NewRegistrationClient(dial(t, d.RegistrationEndpoint()))
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	mustOK(t, "GetInfo", err)
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != testDriver || info.GetEndpoint() != d.CSIEndpoint() ||
		len(info.GetSupportedVersions()) != 1 || info.GetSupportedVersions()[0] != "1.0.0" {
		t.Errorf("GetInfo = %v", info)
	}
	if ok, _ := d.Registered(); ok {
		t.Errorf("Registered before NotifyRegistrationStatus")
	}

	// The kubelet dials the endpoint GetInfo returned.
	conn := dial(t, info.GetEndpoint())
	id := csi.NewIdentityClient(conn)
	pi, err := id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	mustOK(t, "GetPluginInfo", err)
	if pi.GetName() != testDriver || pi.GetVendorVersion() == "" {
		t.Errorf("GetPluginInfo = %v", pi)
	}
	_, err = id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	mustOK(t, "GetPluginCapabilities", err)
	pr, err := id.Probe(ctx, &csi.ProbeRequest{})
	mustOK(t, "Probe", err)
	if !pr.GetReady().GetValue() {
		t.Errorf("Probe not ready: %v", pr)
	}
	node := csi.NewNodeClient(conn)
	ni, err := node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	mustOK(t, "NodeGetInfo", err)
	if ni.GetNodeId() != "node-1" || ni.GetMaxVolumesPerNode() != MaxVolumesPerNode {
		t.Errorf("NodeGetInfo = %v", ni)
	}
	nc, err := node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	mustOK(t, "NodeGetCapabilities", err)
	if len(nc.GetCapabilities()) != 1 || nc.GetCapabilities()[0].GetRpc().GetType() != csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME {
		t.Errorf("NodeGetCapabilities = %v", nc)
	}

	_, err = reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "boom"})
	mustOK(t, "NotifyRegistrationStatus(false)", err)
	if ok, msg := d.Registered(); ok || msg != "boom" {
		t.Errorf("Registered = %v, %q after a failure notice", ok, msg)
	}
	_, err = reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true})
	mustOK(t, "NotifyRegistrationStatus(true)", err)
	if ok, msg := d.Registered(); !ok || msg != "" {
		t.Errorf("Registered = %v, %q after success", ok, msg)
	}

	var methods []string
	for _, c := range d.Calls() {
		methods = append(methods, c.Method)
		if c.Time.IsZero() {
			t.Errorf("call %s has no time", c.Method)
		}
		if c.Node != "node-1" {
			t.Errorf("call %s names node %q, want the driver's node ID node-1", c.Method, c.Node)
		}
	}
	want := "GetInfo GetPluginInfo GetPluginCapabilities Probe NodeGetInfo NodeGetCapabilities NotifyRegistrationStatus NotifyRegistrationStatus"
	if got := strings.Join(methods, " "); got != want {
		t.Errorf("Calls methods:\n got %s\nwant %s", got, want)
	}
	if calls := d.Calls(); !strings.Contains(calls[6].Err, "boom") || calls[7].Err != "" {
		t.Errorf("NotifyRegistrationStatus calls: %+v %+v", calls[6], calls[7])
	}

	d.Stop()
	d.Stop() // idempotent
	for _, p := range []string{d.CSIEndpoint(), d.RegistrationEndpoint()} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after Stop, %s: %v (want it removed)", p, err)
		}
	}
	if err := d.Start(ctx); err == nil {
		t.Errorf("Start after Stop succeeded")
	}
}

func TestNodeLifecycle(t *testing.T) {
	testgate.RequireRoot(t, "stages and publishes a volume with real tmpfs and bind mounts")
	root := newRoot(t)
	d := startDriver(t, root)
	ctx := testCtx(t)
	node := csi.NewNodeClient(dial(t, d.CSIEndpoint()))

	const vol = "vol-1"
	staging := globalMount(root, vol)
	// The kubelet creates the sha dir and vol_data.json; the driver must
	// create globalmount if it is missing.
	stageReq := &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: staging, VolumeCapability: mountCap()}
	_, err := node.NodeStageVolume(ctx, stageReq)
	mustOK(t, "NodeStageVolume", err)
	ms := countAt(t, staging)
	if len(ms) != 1 || ms[0].FSType != "tmpfs" {
		t.Fatalf("after stage, mounts at %s: %+v (want one tmpfs)", staging, ms)
	}
	if !strings.Contains(ms[0].SuperOptions, "size=16384k") || !strings.Contains(ms[0].SuperOptions, "mode=777") {
		t.Errorf("staging tmpfs options %q, want size=16384k and mode=777", ms[0].SuperOptions)
	}
	fi, err := os.Stat(staging)
	mustOK(t, "stat staging", err)
	if fi.Mode().Perm() != 0o777 {
		t.Errorf("staging mode %v, want 0777", fi.Mode().Perm())
	}

	// Re-staging (as after every kubelet restart) must not stack a mount.
	for range 3 {
		_, err = node.NodeStageVolume(ctx, stageReq)
		mustOK(t, "NodeStageVolume again", err)
	}
	if ms := countAt(t, staging); len(ms) != 1 {
		t.Fatalf("after re-stage, %d mounts at %s, want 1", len(ms), staging)
	}

	target1 := podTarget(t, root, "uid-1", "pv1")
	target2 := podTarget(t, root, "uid-2", "pv1")
	for _, target := range []string{target1, target2} {
		req := &csi.NodePublishVolumeRequest{VolumeId: vol, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap()}
		_, err = node.NodePublishVolume(ctx, req)
		mustOK(t, "NodePublishVolume "+target, err)
		_, err = node.NodePublishVolume(ctx, req)
		mustOK(t, "NodePublishVolume again "+target, err)
		if ms := countAt(t, target); len(ms) != 1 || ms[0].FSType != "tmpfs" {
			t.Fatalf("mounts at %s: %+v, want one tmpfs bind", target, ms)
		}
	}

	// Data written through a target is visible at the staging path and the
	// other target.
	if err := os.WriteFile(filepath.Join(target1, "data"), []byte("hello"), 0o644); err != nil {
		t.Fatalf("writing through target: %v", err)
	}
	for _, p := range []string{staging, target2} {
		b, err := os.ReadFile(filepath.Join(p, "data"))
		if err != nil || string(b) != "hello" {
			t.Fatalf("reading %s/data: %q, %v", p, b, err)
		}
	}

	// Unpublish with only volume_id and target_path, twice.
	for i := range 2 {
		_, err = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: target1})
		mustOK(t, "NodeUnpublishVolume", err)
		if _, err := os.Lstat(target1); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after unpublish %d, target %s: %v (want removed)", i+1, target1, err)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(target1), "vol_data.json")); err != nil {
		t.Errorf("unpublish touched the kubelet's vol_data.json: %v", err)
	}
	if ms := countAt(t, staging); len(ms) != 1 {
		t.Fatalf("after unpublish, %d mounts at staging, want 1", len(ms))
	}
	if b, err := os.ReadFile(filepath.Join(staging, "data")); err != nil || string(b) != "hello" {
		t.Fatalf("data after unpublish: %q, %v", b, err)
	}

	_, err = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: target2})
	mustOK(t, "NodeUnpublishVolume target2", err)
	for i := range 2 {
		_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging})
		mustOK(t, "NodeUnstageVolume", err)
		if ms := mountsUnder(t, root); len(ms) != 0 {
			t.Fatalf("after unstage %d, mounts left under root: %+v", i+1, ms)
		}
	}

	// Unpublish and unstage of paths that never existed succeed.
	_, err = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: filepath.Join(root, "nope", "mount")})
	mustOK(t, "NodeUnpublishVolume of a missing path", err)
	_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: filepath.Join(root, "nope", "globalmount")})
	mustOK(t, "NodeUnstageVolume of a missing path", err)

	// The record names every node call with its path.
	var got []string
	for _, c := range d.Calls() {
		if c.Err != "" {
			t.Errorf("call %+v failed", c)
		}
		if c.VolumeID != vol || c.Path == "" {
			t.Errorf("call %+v: want volume %s and a path", c, vol)
		}
		got = append(got, c.Method)
	}
	want := strings.Repeat("NodeStageVolume ", 4) + strings.Repeat("NodePublishVolume ", 4) + strings.Repeat("NodeUnpublishVolume ", 3) +
		"NodeUnstageVolume NodeUnstageVolume NodeUnpublishVolume NodeUnstageVolume"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("calls:\n got %s\nwant %s", g, want)
	}
	if c := d.Calls()[0]; c.Path != staging {
		t.Errorf("stage call path %q, want %q", c.Path, staging)
	}
	if c := d.Calls()[4]; c.Path != target1 {
		t.Errorf("publish call path %q, want %q", c.Path, target1)
	}
}

func TestInvalidArguments(t *testing.T) {
	testgate.RequireRoot(t, "a refused node call must leave no mount, and only root could make one")
	root := newRoot(t)
	d := startDriver(t, root)
	ctx := testCtx(t)
	node := csi.NewNodeClient(dial(t, d.CSIEndpoint()))
	staging := globalMount(root, "v")
	target := podTarget(t, root, "uid", "pv")
	block := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}

	stage := func(r *csi.NodeStageVolumeRequest) error { _, err := node.NodeStageVolume(ctx, r); return err }
	publish := func(r *csi.NodePublishVolumeRequest) error { _, err := node.NodePublishVolume(ctx, r); return err }
	wantCode(t, "stage without volume_id", stage(&csi.NodeStageVolumeRequest{StagingTargetPath: staging, VolumeCapability: mountCap()}), codes.InvalidArgument)
	wantCode(t, "stage without staging path", stage(&csi.NodeStageVolumeRequest{VolumeId: "v", VolumeCapability: mountCap()}), codes.InvalidArgument)
	wantCode(t, "stage without capability", stage(&csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: staging}), codes.InvalidArgument)
	wantCode(t, "stage block", stage(&csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: staging, VolumeCapability: block}), codes.InvalidArgument)
	wantCode(t, "stage bad capacity", stage(&csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: staging, VolumeCapability: mountCap(),
		VolumeContext: map[string]string{VolumeContextCapacity: "lots"}}), codes.InvalidArgument)
	wantCode(t, "publish without volume_id", publish(&csi.NodePublishVolumeRequest{StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap()}), codes.InvalidArgument)
	wantCode(t, "publish without target", publish(&csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: staging, VolumeCapability: mountCap()}), codes.InvalidArgument)
	// A missing staging path is FAILED_PRECONDITION (the volume is not
	// staged), but only once volume_id, target_path and the capability
	// passed: each of those missing too is INVALID_ARGUMENT.
	wantCode(t, "publish without staging path", publish(&csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: target, VolumeCapability: mountCap()}), codes.FailedPrecondition)
	wantCode(t, "publish without staging path nor volume_id", publish(&csi.NodePublishVolumeRequest{TargetPath: target, VolumeCapability: mountCap()}), codes.InvalidArgument)
	wantCode(t, "publish without staging path nor target", publish(&csi.NodePublishVolumeRequest{VolumeId: "v", VolumeCapability: mountCap()}), codes.InvalidArgument)
	wantCode(t, "publish without staging path nor capability", publish(&csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: target}), codes.InvalidArgument)
	wantCode(t, "publish without capability", publish(&csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: staging, TargetPath: target}), codes.InvalidArgument)
	_, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{TargetPath: target})
	wantCode(t, "unpublish without volume_id", err, codes.InvalidArgument)
	_, err = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "v"})
	wantCode(t, "unpublish without target", err, codes.InvalidArgument)
	_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{StagingTargetPath: staging})
	wantCode(t, "unstage without volume_id", err, codes.InvalidArgument)
	_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "v"})
	wantCode(t, "unstage without staging path", err, codes.InvalidArgument)

	// Publishing before staging is refused and mounts nothing.
	wantCode(t, "publish of an unstaged volume",
		publish(&csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap()}), codes.FailedPrecondition)
	if ms := mountsUnder(t, root); len(ms) != 0 {
		t.Errorf("invalid calls left mounts: %+v", ms)
	}
	for _, c := range d.Calls() {
		if c.Err == "" {
			t.Errorf("call %+v recorded without its error", c)
		}
	}
}

func TestCapacityAndReadOnly(t *testing.T) {
	testgate.RequireRoot(t, "mounts a sized tmpfs and a read-only bind mount")
	root := newRoot(t)
	d := startDriver(t, root)
	ctx := testCtx(t)
	node := csi.NewNodeClient(dial(t, d.CSIEndpoint()))

	staging := globalMount(root, "big")
	_, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "big", StagingTargetPath: staging, VolumeCapability: mountCap(),
		VolumeContext: map[string]string{VolumeContextCapacity: "32Mi"}})
	mustOK(t, "NodeStageVolume", err)
	var st unix.Statfs_t
	mustOK(t, "statfs", unix.Statfs(staging, &st))
	if size := int64(st.Blocks) * st.Bsize; size != 32<<20 {
		t.Errorf("tmpfs size %d, want %d", size, 32<<20)
	}
	mustOK(t, "seed", os.WriteFile(filepath.Join(staging, "seed"), []byte("x"), 0o644))

	target := podTarget(t, root, "uid-ro", "big")
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "big", StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: mountCap(), Readonly: true})
	mustOK(t, "NodePublishVolume readonly", err)
	if err := os.WriteFile(filepath.Join(target, "w"), []byte("x"), 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("write to a read-only target: %v, want EROFS", err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "seed")); err != nil || string(b) != "x" {
		t.Errorf("read through read-only target: %q, %v", b, err)
	}
	// The staging mount stays writable.
	mustOK(t, "write to staging", os.WriteFile(filepath.Join(staging, "w"), []byte("x"), 0o644))

	releaseVolume(ctx, t, node, root, "big", staging, target)
}

// TestRestartKeepsMounts stops the driver with volumes mounted, as when the
// DaemonSet pod restarts, and starts a new one on the same root: the mounts
// stay, and the new driver re-stages and re-publishes without stacking.
func TestRestartKeepsMounts(t *testing.T) {
	testgate.RequireRoot(t, "restarts the driver over real tmpfs and bind mounts")
	root := newRoot(t)
	d1 := startDriver(t, root)
	ctx := testCtx(t)
	node := csi.NewNodeClient(dial(t, d1.CSIEndpoint()))

	staging := globalMount(root, "vol")
	target := podTarget(t, root, "uid-a", "pv")
	stage := &csi.NodeStageVolumeRequest{VolumeId: "vol", StagingTargetPath: staging, VolumeCapability: mountCap()}
	publish := &csi.NodePublishVolumeRequest{VolumeId: "vol", StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap()}
	_, err := node.NodeStageVolume(ctx, stage)
	mustOK(t, "stage", err)
	_, err = node.NodePublishVolume(ctx, publish)
	mustOK(t, "publish", err)
	mustOK(t, "write", os.WriteFile(filepath.Join(target, "data"), []byte("kept"), 0o644))

	d1.Stop()
	if len(countAt(t, staging)) != 1 || len(countAt(t, target)) != 1 {
		t.Fatalf("Stop changed the mounts: staging %v, target %v", countAt(t, staging), countAt(t, target))
	}

	d2 := startDriver(t, root)
	if len(d2.Calls()) != 0 {
		t.Errorf("new driver has calls: %v", d2.Calls())
	}
	node = csi.NewNodeClient(dial(t, d2.CSIEndpoint()))
	_, err = node.NodeStageVolume(ctx, stage)
	mustOK(t, "re-stage", err)
	_, err = node.NodePublishVolume(ctx, publish)
	mustOK(t, "re-publish", err)
	if len(countAt(t, staging)) != 1 || len(countAt(t, target)) != 1 {
		t.Fatalf("restart stacked mounts: staging %v, target %v", countAt(t, staging), countAt(t, target))
	}
	if b, err := os.ReadFile(filepath.Join(staging, "data")); err != nil || string(b) != "kept" {
		t.Fatalf("data after restart: %q, %v", b, err)
	}
	releaseVolume(ctx, t, node, root, "vol", staging, target)
}

// TestStackedMountsAndEscapes unpublishes a target with several mounts on
// it, and uses paths with spaces (\040 in mountinfo).
func TestStackedMountsAndEscapes(t *testing.T) {
	testgate.RequireRoot(t, "stacks real bind mounts on one target, under paths with spaces")
	root := newRoot(t)
	d := startDriver(t, root)
	ctx := testCtx(t)
	node := csi.NewNodeClient(dial(t, d.CSIEndpoint()))

	staging := filepath.Join(root, "global mount\twith tab")
	target := filepath.Join(root, "pods", "uid s", "volumes", "kubernetes.io~csi", "pv x", "mount")
	mustOK(t, "mkdir parent", os.MkdirAll(filepath.Dir(target), 0o750))
	_, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: staging, VolumeCapability: mountCap()})
	mustOK(t, "stage", err)
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: staging, VolumeCapability: mountCap()})
	mustOK(t, "re-stage", err)
	if ms := countAt(t, staging); len(ms) != 1 {
		t.Fatalf("mounts at %q: %+v, want 1 (escape handling?)", staging, ms)
	}
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap()})
	mustOK(t, "publish", err)
	// Stack two more mounts on the target, as a confused retry might.
	mustOK(t, "bind", unix.Mount(staging, target, "", unix.MS_BIND, ""))
	mustOK(t, "tmpfs", unix.Mount("extra", target, "tmpfs", 0, "size=1m"))
	if ms := countAt(t, target); len(ms) != 3 {
		t.Fatalf("mounts at %q: %d, want 3", target, len(ms))
	}
	_, err = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: target})
	mustOK(t, "unpublish", err)
	if ms := countAt(t, target); len(ms) != 0 {
		t.Fatalf("after unpublish, mounts at target: %+v", ms)
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("target not removed: %v", err)
	}
	_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "v", StagingTargetPath: staging})
	mustOK(t, "unstage", err)
	if ms := mountsUnder(t, root); len(ms) != 0 {
		t.Errorf("mounts left: %+v", ms)
	}
}

func TestNewRejectsLongSocketPath(t *testing.T) {
	root := "/" + strings.Repeat("k", 90)
	_, err := New(Config{DriverName: testDriver, NodeID: "n", KubeletRoot: root})
	if err == nil || !strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), "sock") {
		t.Fatalf("New with a %d-byte root: %v, want an error naming the socket path", len(root), err)
	}
	for _, cfg := range []Config{{NodeID: "n", KubeletRoot: "/r"}, {DriverName: "d", KubeletRoot: "/r"}, {DriverName: "d", NodeID: "n"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}
