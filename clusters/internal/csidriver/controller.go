package csidriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"sigs.k8s.io/skewtest/clusters/loopdev"
)

// The controller's state directory (Config.StateDir).
const (
	// volumesDir holds one sparse file per volume, <escaped id>.img.
	volumesDir = "volumes"
	// attachmentsDir holds one record per attached volume (ModeEBS),
	// <escaped id>.json, written before the loop device is made so that
	// teardown can always find it.
	attachmentsDir = "attachments"
)

// PublishContextDevicePath is the publish context key carrying the loop
// device ControllerPublishVolume attached (ModeEBS).
const PublishContextDevicePath = "devicePath"

// attachment is an attachment record: the volume's loop device on a node.
type attachment struct {
	VolumeID string `json:"volumeID"`
	NodeID   string `json:"nodeID"`
	Device   string `json:"device,omitempty"`
	Backing  string `json:"backingFile"`
	Readonly bool   `json:"readonly"`
}

type controllerServer struct {
	csi.UnimplementedControllerServer
	d *Driver
}

func (s *controllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	types := []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}
	if s.d.cfg.Mode == ModeEBS {
		types = append(types, csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME)
	}
	var caps []*csi.ControllerServiceCapability
	for _, t := range types {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// backingFile is where volume id's sparse file lives. Volume IDs are the
// CreateVolume names (so a pre-created PV's handle can be made with
// CreateVolume), escaped to one path element.
func (d *Driver) backingFile(id string) string {
	return filepath.Join(d.cfg.StateDir, volumesDir, url.PathEscape(id)+".img")
}

func (d *Driver) attachmentFile(id string) string {
	return filepath.Join(d.cfg.StateDir, attachmentsDir, url.PathEscape(id)+".json")
}

// CreateVolume makes a sparse file of the requested size (DefaultCapacity
// without one). The volume ID is the name, so the call is idempotent; the
// same name with another size is ALREADY_EXISTS.
func (s *controllerServer) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "name is missing")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume_capabilities are missing")
	}
	for _, c := range req.GetVolumeCapabilities() {
		if err := s.d.checkCapability(c); err != nil {
			return nil, err
		}
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volume content sources (snapshots, clones) are not supported")
	}
	size := req.GetCapacityRange().GetRequiredBytes()
	if size == 0 {
		size = DefaultCapacity
	}
	if limit := req.GetCapacityRange().GetLimitBytes(); limit > 0 && size > limit {
		return nil, status.Errorf(codes.OutOfRange, "required_bytes %d exceeds limit_bytes %d", size, limit)
	}

	s.d.opMu.Lock()
	defer s.d.opMu.Unlock()
	file := s.d.backingFile(name)
	if fi, err := os.Stat(file); err == nil {
		if fi.Size() != size {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with %d bytes, not the %d asked for", name, fi.Size(), size)
		}
	} else {
		f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "creating backing file %s: %v", file, err)
		}
		err = f.Truncate(size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(file)
			return nil, status.Errorf(codes.Internal, "sizing backing file %s: %v", file, err)
		}
		s.d.log.Info("created volume", "volume", name, "file", file, "size", size)
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:      name,
		CapacityBytes: size,
		VolumeContext: map[string]string{VolumeContextCapacity: strconv.FormatInt(size, 10)},
	}}, nil
}

// DeleteVolume removes the backing file; an unknown volume is success. An
// attached volume is FAILED_PRECONDITION.
func (s *controllerServer) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	s.d.opMu.Lock()
	defer s.d.opMu.Unlock()
	if a, err := s.d.readAttachment(id); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	} else if a != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q is attached to node %q as %s; ControllerUnpublishVolume first", id, a.NodeID, a.Device)
	}
	if err := os.Remove(s.d.backingFile(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing backing file: %v", err)
	}
	s.d.log.Info("deleted volume", "volume", id)
	return &csi.DeleteVolumeResponse{}, nil
}

func (s *controllerServer) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume_capabilities are missing")
	}
	if _, err := os.Stat(s.d.backingFile(id)); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", id)
	}
	for _, c := range req.GetVolumeCapabilities() {
		if err := s.d.checkCapability(c); err != nil {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
		}
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}

// ControllerPublishVolume attaches the volume to the node as a loop device
// over its backing file (ModeEBS), and returns the device in the publish
// context. Repeated for the same node, it returns the same device;
// another node is FAILED_PRECONDITION (the volumes are single-attach, like
// EBS), a different read-only flag ALREADY_EXISTS.
func (s *controllerServer) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if s.d.cfg.Mode != ModeEBS {
		return nil, status.Errorf(codes.Unimplemented, "ControllerPublishVolume: mode %s has no attach step", s.d.cfg.Mode)
	}
	id, node := req.GetVolumeId(), req.GetNodeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	if node == "" {
		return nil, status.Error(codes.InvalidArgument, "node_id is missing")
	}
	if err := s.d.checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}

	s.d.opMu.Lock()
	defer s.d.opMu.Unlock()
	file := s.d.backingFile(id)
	if _, err := os.Stat(file); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist (no %s); CreateVolume first", id, file)
	}
	if len(s.d.cfg.Nodes) > 0 && !slices.Contains(s.d.cfg.Nodes, node) {
		return nil, status.Errorf(codes.NotFound, "node %q is not one of this cluster's nodes %v", node, s.d.cfg.Nodes)
	}
	a, err := s.d.readAttachment(id)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if a != nil && a.NodeID != node {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q is attached to node %q; ControllerUnpublishVolume there first", id, a.NodeID)
	}
	if a != nil && a.Readonly != req.GetReadonly() {
		return nil, status.Errorf(codes.AlreadyExists, "volume %q is attached to node %q with readonly=%t, not %t", id, node, a.Readonly, req.GetReadonly())
	}
	if a != nil && a.Device != "" && loopdev.BackingFile(a.Device) == file {
		return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{PublishContextDevicePath: a.Device}}, nil
	}
	// The record first (without a device), so that a controller killed
	// between the two steps leaves something teardown can find.
	rec := attachment{VolumeID: id, NodeID: node, Backing: file, Readonly: req.GetReadonly()}
	if err := s.d.writeAttachment(rec); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	dev, err := loopdev.Attach(ctx, file)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "attaching volume %q: %v", id, err)
	}
	rec.Device = dev
	if err := s.d.writeAttachment(rec); err != nil {
		_ = loopdev.Detach(context.WithoutCancel(ctx), dev)
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	s.d.log.Info("attached volume", "volume", id, "node", node, "device", dev, "file", file)
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{PublishContextDevicePath: dev}}, nil
}

// ControllerUnpublishVolume detaches the volume's loop device and removes
// its record; a volume that is not attached (to that node) is success.
func (s *controllerServer) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if s.d.cfg.Mode != ModeEBS {
		return nil, status.Errorf(codes.Unimplemented, "ControllerUnpublishVolume: mode %s has no attach step", s.d.cfg.Mode)
	}
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	s.d.opMu.Lock()
	defer s.d.opMu.Unlock()
	a, err := s.d.readAttachment(id)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if a == nil || (req.GetNodeId() != "" && a.NodeID != req.GetNodeId()) {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if a.Device != "" && loopdev.BackingFile(a.Device) == a.Backing {
		if err := loopdev.Detach(ctx, a.Device); err != nil {
			return nil, status.Errorf(codes.Internal, "detaching volume %q: %v", id, err)
		}
	}
	if err := os.Remove(s.d.attachmentFile(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing attachment record: %v", err)
	}
	s.d.log.Info("detached volume", "volume", id, "node", a.NodeID, "device", a.Device)
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (d *Driver) readAttachment(id string) (*attachment, error) {
	b, err := os.ReadFile(d.attachmentFile(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading attachment record of %q: %w", id, err)
	}
	var a attachment
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("attachment record %s: %w", d.attachmentFile(id), err)
	}
	return &a, nil
}

func (d *Driver) writeAttachment(a attachment) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	file := d.attachmentFile(a.VolumeID)
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing attachment record: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("writing attachment record: %w", err)
	}
	return nil
}
