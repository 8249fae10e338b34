package csidriver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"
)

// maxUnmounts bounds the unmount loop on one path (stacked mounts).
const maxUnmounts = 64

type nodeServer struct {
	csi.UnimplementedNodeServer
	d *Driver
}

func (s *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: s.d.cfg.NodeID, MaxVolumesPerNode: 0}, nil
}

func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{
			Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		}},
	}}}, nil
}

// NodeStageVolume mounts a fresh tmpfs at the staging path, or does nothing
// if the path is already a mount point (the kubelet re-stages after every
// restart).
func (s *nodeServer) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	staging := req.GetStagingTargetPath()
	if staging == "" {
		return nil, status.Error(codes.InvalidArgument, "staging_target_path is missing")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	size, err := capacity(req.GetVolumeContext())
	if err != nil {
		return nil, err
	}

	s.d.opMu.Lock()
	defer s.d.opMu.Unlock()

	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "creating staging path %s: %v", staging, err)
	}
	mounted, err := isMountPoint(staging)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "checking staging path %s: %v", staging, err)
	}
	if mounted {
		s.d.log.Info("staging path already mounted", "volume", req.GetVolumeId(), "path", staging)
		return &csi.NodeStageVolumeResponse{}, nil
	}
	source := s.d.cfg.DriverName + "/" + req.GetVolumeId()
	opts := fmt.Sprintf("size=%d,mode=0777", size)
	if err := unix.Mount(source, staging, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return nil, status.Errorf(codes.Internal, "mounting tmpfs (%s) at staging path %s: %v", opts, staging, err)
	}
	s.d.log.Info("staged volume", "volume", req.GetVolumeId(), "path", staging, "size", size)
	return &csi.NodeStageVolumeResponse{}, nil
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

// NodePublishVolume creates the target directory (the kubelet creates only
// its parent) and bind-mounts the staging path onto it, read-only if asked;
// success if the target is already a mount point.
func (s *nodeServer) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	staging := req.GetStagingTargetPath()
	if staging == "" {
		return nil, status.Error(codes.InvalidArgument, "staging_target_path is missing (the driver has STAGE_UNSTAGE_VOLUME)")
	}
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target_path is missing")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}

	s.d.opMu.Lock()
	defer s.d.opMu.Unlock()

	staged, err := isMountPoint(staging)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "checking staging path %s: %v", staging, err)
	}
	if !staged {
		return nil, status.Errorf(codes.FailedPrecondition, "staging path %s is not mounted; NodeStageVolume first", staging)
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "creating target path %s: %v", target, err)
	}
	mounted, err := isMountPoint(target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "checking target path %s: %v", target, err)
	}
	if mounted {
		s.d.log.Info("target path already mounted", "volume", req.GetVolumeId(), "path", target)
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := unix.Mount(staging, target, "", unix.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind-mounting %s at target path %s: %v", staging, target, err)
	}
	if req.GetReadonly() {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			uerr := unix.Unmount(target, 0)
			return nil, status.Errorf(codes.Internal, "remounting target path %s read-only: %v (undoing the bind mount: %v)", target, err, uerr)
		}
	}
	s.d.log.Info("published volume", "volume", req.GetVolumeId(), "path", target, "readonly", req.GetReadonly())
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target path (every stacked mount) and
// removes the directory; success if it does not exist. It needs only
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

// checkCapability accepts a filesystem (mount) volume capability. fs_type
// and mount flags are ignored: every volume is a tmpfs.
func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return status.Error(codes.InvalidArgument, "volume_capability is missing")
	}
	if c.GetBlock() != nil {
		return status.Error(codes.InvalidArgument, "block volumes are not supported")
	}
	if c.GetMount() == nil {
		return status.Error(codes.InvalidArgument, "volume_capability has no access type (mount expected)")
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
