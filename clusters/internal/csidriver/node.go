package csidriver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec" // blkid and mkfs in the driver process itself, as a CSI node plugin runs them
	"path/filepath"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"

	"sigs.k8s.io/skewtest/clusters/loopdev"
)

// maxUnmounts bounds the unmount loop on one path (stacked mounts).
const maxUnmounts = 64

// MaxVolumesPerNode is how many of the driver's volumes one node takes,
// as NodeGetInfo tells the kubelet (which publishes it in CSINode, where
// the scheduler counts against it). A real disk driver has a limit: EBS's
// 39 (or fewer on Nitro instances), Compute Engine's 128 disks per VM.
// skewtest's loop devices and tmpfs mounts have none of their own, and a
// busy node of 100 pods with a volume each must fit, so the driver
// takes Compute Engine's 128.
const MaxVolumesPerNode = 128

type nodeServer struct {
	csi.UnimplementedNodeServer
	d *Driver
}

func (s *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: s.d.cfg.NodeID, MaxVolumesPerNode: MaxVolumesPerNode}, nil
}

func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{
			Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		}},
	}}}, nil
}

// EphemeralContextKey is the volume context key the kubelet sets to "true"
// on NodePublishVolume of a CSI inline ephemeral volume, when the CSIDriver
// has podInfoOnMount (Object sets it).
const EphemeralContextKey = "csi.storage.k8s.io/ephemeral"

// NodeStageVolume stages the volume at the staging path, or does nothing
// if the same volume is already staged there (the kubelet re-stages after
// every restart). ModeTmpfs mounts a fresh tmpfs. ModeEBS takes the loop
// device from the publish context: for a filesystem it formats it ext4 on
// first use and mounts it; for a raw block volume it mounts nothing (the CSI
// block contract: NodePublishVolume maps the device). Another volume
// already staged at the path is ALREADY_EXISTS.
func (s *nodeServer) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	staging := req.GetStagingTargetPath()
	if staging == "" {
		return nil, status.Error(codes.InvalidArgument, "staging_target_path is missing")
	}
	capab := req.GetVolumeCapability()
	if err := s.d.checkCapability(capab); err != nil {
		return nil, err
	}
	var size int64
	var device string
	if s.d.cfg.Mode == ModeEBS {
		var err error
		if device, err = attachedDevice(req.GetVolumeId(), req.GetPublishContext()); err != nil {
			return nil, err
		}
	} else {
		var err error
		if size, err = capacity(req.GetVolumeContext()); err != nil {
			return nil, err
		}
	}

	s.d.opMu.Lock()
	defer s.d.opMu.Unlock()

	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "creating staging path %s: %v", staging, err)
	}
	if capab.GetBlock() != nil {
		s.d.log.Info("staged block volume (nothing to mount)", "volume", req.GetVolumeId(), "path", staging, "device", device)
		return &csi.NodeStageVolumeResponse{}, nil
	}
	ms, err := mountsAt(staging)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "checking staging path %s: %v", staging, err)
	}
	source := s.d.cfg.DriverName + "/" + req.GetVolumeId()
	if device != "" {
		source = device
	}
	if len(ms) > 0 {
		if got := ms[len(ms)-1].Source; got != source {
			return nil, status.Errorf(codes.AlreadyExists, "staging path %s already has %s mounted, not volume %q (%s)", staging, got, req.GetVolumeId(), source)
		}
		s.d.log.Info("staging path already mounted", "volume", req.GetVolumeId(), "path", staging)
		return &csi.NodeStageVolumeResponse{}, nil
	}
	if device != "" {
		formatted, err := ensureExt4(ctx, device)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %q: %v", req.GetVolumeId(), err)
		}
		if err := unix.Mount(device, staging, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return nil, status.Errorf(codes.Internal, "mounting %s (ext4) at staging path %s: %v", device, staging, err)
		}
		// A fresh ext4 root belongs to root with mode 0755: let the
		// workload's non-root users write, as the tmpfs mode does.
		if formatted {
			if err := os.Chmod(staging, 0o777); err != nil {
				return nil, status.Errorf(codes.Internal, "chmod %s: %v", staging, err)
			}
		}
		s.d.log.Info("staged volume", "volume", req.GetVolumeId(), "path", staging, "device", device, "formatted", formatted)
		return &csi.NodeStageVolumeResponse{}, nil
	}
	opts := fmt.Sprintf("size=%d,mode=0777", size)
	if err := unix.Mount(source, staging, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return nil, status.Errorf(codes.Internal, "mounting tmpfs (%s) at staging path %s: %v", opts, staging, err)
	}
	s.d.log.Info("staged volume", "volume", req.GetVolumeId(), "path", staging, "size", size)
	return &csi.NodeStageVolumeResponse{}, nil
}

// attachedDevice is the loop device ControllerPublishVolume put in the
// publish context (ModeEBS); without one the volume is not attached.
func attachedDevice(volumeID string, pc map[string]string) (string, error) {
	dev := pc[PublishContextDevicePath]
	if dev == "" {
		return "", status.Errorf(codes.FailedPrecondition, "volume %q has no %s in its publish context: not attached (ControllerPublishVolume first)", volumeID, PublishContextDevicePath)
	}
	if loopdev.BackingFile(dev) == "" {
		return "", status.Errorf(codes.FailedPrecondition, "volume %q: %s=%s is not an attached loop device", volumeID, PublishContextDevicePath, dev)
	}
	return dev, nil
}

// NodeUnstageVolume unmounts the staging path; success if it is not mounted.
// The kubelet removes the directory itself.
func (s *nodeServer) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	staging := req.GetStagingTargetPath()
	if staging == "" {
		return nil, status.Error(codes.InvalidArgument, "staging_target_path is missing")
	}

	s.d.opMu.Lock()
	defer s.d.opMu.Unlock()

	n, err := unmountAll(staging)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "unmounting staging path %s: %v", staging, err)
	}
	s.d.log.Info("unstaged volume", "volume", req.GetVolumeId(), "path", staging, "unmounted", n)
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume publishes the volume at the target path, read-only if
// asked; success if it is already published there the same way.
//   - A filesystem volume: the target directory is created (the kubelet
//     creates only its parent) and the staging path bind-mounted onto it.
//   - A raw block volume (ModeEBS): the target file is created and the
//     loop device node bind-mounted onto it.
//   - An inline ephemeral volume: a fresh tmpfs is mounted at the target.
//
// volume_id, target_path and the capability are checked first
// (INVALID_ARGUMENT); then a persistent volume that is not staged, or has
// no staging path, is FAILED_PRECONDITION. A target that already holds
// the volume published the other way (read-only against read-write) or
// another volume is ALREADY_EXISTS.
func (s *nodeServer) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target_path is missing")
	}
	capab := req.GetVolumeCapability()
	if err := s.d.checkCapability(capab); err != nil {
		return nil, err
	}
	ephemeral := req.GetVolumeContext()[EphemeralContextKey] == "true"
	if ephemeral && capab.GetBlock() != nil {
		return nil, status.Error(codes.InvalidArgument, "inline ephemeral volumes are filesystems; a block capability is not supported")
	}
	staging := req.GetStagingTargetPath()
	if !ephemeral && staging == "" {
		return nil, status.Error(codes.FailedPrecondition, "staging_target_path is missing: the driver has STAGE_UNSTAGE_VOLUME, NodeStageVolume first")
	}
	var device string
	var size int64
	switch {
	case ephemeral:
		var err error
		if size, err = capacity(req.GetVolumeContext()); err != nil {
			return nil, err
		}
	case capab.GetBlock() != nil:
		var err error
		if device, err = attachedDevice(req.GetVolumeId(), req.GetPublishContext()); err != nil {
			return nil, err
		}
	}

	s.d.opMu.Lock()
	defer s.d.opMu.Unlock()

	var source string // what the target must show once published
	switch {
	case ephemeral:
		source = s.d.cfg.DriverName + "/ephemeral/" + req.GetVolumeId()
	case device != "":
		if _, err := os.Stat(staging); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "staging path %s: %v; NodeStageVolume first", staging, err)
		}
	default:
		ms, err := mountsAt(staging)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "checking staging path %s: %v", staging, err)
		}
		if len(ms) == 0 {
			return nil, status.Errorf(codes.FailedPrecondition, "staging path %s is not mounted; NodeStageVolume first", staging)
		}
		source = ms[len(ms)-1].Source
	}

	if device != "" {
		if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "creating the target's directory: %v", err)
		}
		f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o640)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "creating target file %s: %v", target, err)
		}
		f.Close()
	} else if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "creating target path %s: %v", target, err)
	}
	ms, err := mountsAt(target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "checking target path %s: %v", target, err)
	}
	if len(ms) > 0 {
		top := ms[len(ms)-1]
		if ro := hasOption(top.Options, "ro"); ro != req.GetReadonly() {
			return nil, status.Errorf(codes.AlreadyExists, "target path %s is already published with readonly=%t, not %t", target, ro, req.GetReadonly())
		}
		if device != "" {
			source = "/" + filepath.Base(device)
			if top.Root != source {
				return nil, status.Errorf(codes.AlreadyExists, "target path %s already holds device %s, not %s", target, top.Root, device)
			}
		} else if top.Source != source {
			return nil, status.Errorf(codes.AlreadyExists, "target path %s already has %s mounted, not volume %q (%s)", target, top.Source, req.GetVolumeId(), source)
		}
		s.d.log.Info("target path already published", "volume", req.GetVolumeId(), "path", target)
		return &csi.NodePublishVolumeResponse{}, nil
	}
	switch {
	case ephemeral:
		opts := fmt.Sprintf("size=%d,mode=0777", size)
		if err := unix.Mount(source, target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return nil, status.Errorf(codes.Internal, "mounting tmpfs (%s) at target path %s: %v", opts, target, err)
		}
	case device != "":
		if err := unix.Mount(device, target, "", unix.MS_BIND, ""); err != nil {
			return nil, status.Errorf(codes.Internal, "bind-mounting device %s at target path %s: %v", device, target, err)
		}
	default:
		if err := unix.Mount(staging, target, "", unix.MS_BIND, ""); err != nil {
			return nil, status.Errorf(codes.Internal, "bind-mounting %s at target path %s: %v", staging, target, err)
		}
	}
	if req.GetReadonly() {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			uerr := unix.Unmount(target, 0)
			return nil, status.Errorf(codes.Internal, "remounting target path %s read-only: %v (undoing the mount: %v)", target, err, uerr)
		}
	}
	s.d.log.Info("published volume", "volume", req.GetVolumeId(), "path", target, "readonly", req.GetReadonly(), "ephemeral", ephemeral, "device", device)
	return &csi.NodePublishVolumeResponse{}, nil
}

// hasOption tells whether a comma-separated mount option list has opt.
func hasOption(opts, opt string) bool {
	return slices.Contains(strings.Split(opts, ","), opt)
}

// NodeUnpublishVolume unmounts the target path (every stacked mount) and
// removes the directory (or, for a block volume, the file); success if it
// does not exist. It needs only
// volume_id and target_path.
func (s *nodeServer) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target_path is missing")
	}

	s.d.opMu.Lock()
	defer s.d.opMu.Unlock()

	n, err := unmountAll(target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "unmounting target path %s: %v", target, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing target path %s: %v", target, err)
	}
	s.d.log.Info("unpublished volume", "volume", req.GetVolumeId(), "path", target, "unmounted", n)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// unmountAll unmounts path until it is no longer a mount point and returns
// how many unmounts it made. A missing path is not an error.
func unmountAll(path string) (int, error) {
	n := 0
	for {
		ms, err := mountsAt(path)
		if err != nil {
			return n, err
		}
		if len(ms) == 0 {
			return n, nil
		}
		if n >= maxUnmounts {
			return n, fmt.Errorf("still %d mounts at %s after %d unmounts", len(ms), path, n)
		}
		if err := unix.Unmount(path, 0); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return n, nil
			}
			return n, fmt.Errorf("umount %s (%d mounts there): %w", path, len(ms), err)
		}
		n++
	}
}

// checkCapability accepts a filesystem (mount) volume capability, and in
// ModeEBS a raw block one. ModeTmpfs ignores fs_type and mount flags (every
// volume is a tmpfs); ModeEBS makes ext4 only.
func (d *Driver) checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return status.Error(codes.InvalidArgument, "volume_capability is missing")
	}
	if c.GetBlock() != nil {
		if d.cfg.Mode != ModeEBS {
			return status.Errorf(codes.InvalidArgument, "block volumes are not supported in mode %s (use mode %s)", d.cfg.Mode, ModeEBS)
		}
		return nil
	}
	if c.GetMount() == nil {
		return status.Error(codes.InvalidArgument, "volume_capability has no access type (mount or block expected)")
	}
	if fs := c.GetMount().GetFsType(); d.cfg.Mode == ModeEBS && fs != "" && fs != "ext4" {
		return status.Errorf(codes.InvalidArgument, "fs_type %q is not supported: mode %s makes ext4", fs, ModeEBS)
	}
	return nil
}

// capacity is the tmpfs size for a volume, from its volume context.
func capacity(vc map[string]string) (int64, error) {
	v, ok := vc[VolumeContextCapacity]
	if !ok || strings.TrimSpace(v) == "" {
		return DefaultCapacity, nil
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(v))
	if err != nil {
		return 0, status.Errorf(codes.InvalidArgument, "volume context %s=%q: %v", VolumeContextCapacity, v, err)
	}
	size, ok := q.AsInt64()
	if !ok || size <= 0 {
		return 0, status.Errorf(codes.InvalidArgument, "volume context %s=%q: not a positive byte count", VolumeContextCapacity, v)
	}
	return size, nil
}

// ensureExt4 formats dev ext4 unless it already holds a filesystem (the
// volume keeps its data across detach and attach), and tells whether it
// formatted.
func ensureExt4(ctx context.Context, dev string) (bool, error) {
	out, err := exec.CommandContext(ctx, "blkid", "-p", "-o", "value", "-s", "TYPE", dev).Output()
	fsType := strings.TrimSpace(string(out))
	var ee *exec.ExitError
	switch {
	case err == nil && fsType == "ext4":
		return false, nil
	case err == nil:
		return false, fmt.Errorf("%s holds a %q filesystem, not ext4; not formatting over it", dev, fsType)
	case errors.As(err, &ee) && ee.ExitCode() == 2:
		// blkid: nothing found.
	default:
		return false, fmt.Errorf("blkid -p %s: %v", dev, err)
	}
	// Lazy init: the sparse file stays sparse and mkfs takes a moment.
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-F", "-q", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", dev).CombinedOutput(); err != nil {
		return false, fmt.Errorf("mkfs.ext4 %s: %v: %s", dev, err, strings.TrimSpace(string(out)))
	}
	return true, nil
}
