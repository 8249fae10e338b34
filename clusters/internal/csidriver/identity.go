package csidriver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// registerIdentity registers the Identity service on srv: every socket
// serves it.
func registerIdentity(srv *grpc.Server, d *Driver) {
	csi.RegisterIdentityServer(srv, &identityServer{d: d})
}

// registerNode registers the Node service on srv.
func registerNode(srv *grpc.Server, d *Driver) {
	csi.RegisterNodeServer(srv, &nodeServer{d: d})
}

// registerController registers the Controller service on srv.
func registerController(srv *grpc.Server, d *Driver) {
	csi.RegisterControllerServer(srv, &controllerServer{d: d})
}

// registerRegistration registers the kubelet plugin Registration service.
func registerRegistration(srv *grpc.Server, d *Driver) {
	registerapi.RegisterRegistrationServer(srv, &registrationServer{d: d})
}

type identityServer struct {
	csi.UnimplementedIdentityServer
	d *Driver
}

func (s *identityServer) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: s.d.cfg.DriverName, VendorVersion: VendorVersion}, nil
}

// GetPluginCapabilities reports the controller service from every socket,
// as a real driver whose node and controller run the same binary does: the
// driver has one, wherever it runs.
func (s *identityServer) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

func (s *identityServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// registrationServer is the kubelet plugin watcher's side: the kubelet calls
// GetInfo, then the CSI NodeGetInfo, then NotifyRegistrationStatus.
type registrationServer struct {
	registerapi.UnimplementedRegistrationServer
	d *Driver
}

func (s *registrationServer) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.d.cfg.DriverName,
		Endpoint:          s.d.csiSock,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (s *registrationServer) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	s.d.mu.Lock()
	s.d.registered = st.GetPluginRegistered()
	s.d.regError = st.GetError()
	s.d.mu.Unlock()
	if st.GetPluginRegistered() {
		s.d.log.Info("registered with the kubelet")
	} else {
		s.d.log.Error("kubelet failed to register the plugin", "err", st.GetError())
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
