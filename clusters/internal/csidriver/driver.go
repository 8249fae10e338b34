// Package csidriver is skewtest's own CSI node plugin. It runs as goroutines
// inside the harness process, as a DaemonSet pod would run next to the
// kubelet, and keeps running while the kubelet is stopped and swapped.
//
// It serves the CSI Identity and Node services on
// <kubelet root>/plugins/<driver>/csi.sock and the kubelet plugin
// Registration service on <kubelet root>/plugins_registry/<driver>-reg.sock,
// where the kubelet's plugin watcher finds it. Each staged volume is a fresh
// tmpfs mounted at the staging path; each publish is a bind mount of it. There
// is no controller: PVs are pre-created and the CSIDriver object has
// attachRequired false.
//
// Every operation is idempotent, because the kubelet repeats them after each
// restart (NodeStageVolume on a staging path that is still mounted,
// NodeUnpublishVolume for targets that are already gone). Stop leaves the
// mounts in place, as a restarting DaemonSet pod does; removing them is the
// cluster provider's job.
package csidriver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Name is the driver name skewtest's providers register it under.
const Name = "csi.skewtest.k8s.io"

// Object is the CSIDriver that tells the API server how the plugin behaves:
// no attach step (it implements no controller service), no pod info on
// mount, persistent volumes only.
func Object() *storagev1.CSIDriver {
	return &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: Name},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:       ptr.To(false),
			PodInfoOnMount:       ptr.To(false),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		},
	}
}

// VendorVersion is what GetPluginInfo reports.
const VendorVersion = "0.1.0"

// VolumeContextCapacity is the volume context key (a PV's
// spec.csi.volumeAttributes) holding a volume's size as a Kubernetes
// quantity, e.g. "64Mi". Without it a volume gets DefaultCapacity.
const VolumeContextCapacity = "capacity"

// DefaultCapacity is the tmpfs size of a volume without a capacity in its
// volume context, in bytes (16Mi).
const DefaultCapacity int64 = 16 << 20

// maxSocketPath is the longest unix socket path Linux accepts with a
// terminating NUL: sun_path is 108 bytes.
const maxSocketPath = 107

// Config configures a Driver.
type Config struct {
	// DriverName is the CSI driver name, e.g. "csi.skewtest.k8s.io".
	DriverName string
	// NodeID is what NodeGetInfo reports: the node name.
	NodeID string
	// KubeletRoot is the kubelet's --root-dir. The CSI endpoint is
	// <root>/plugins/<driver>/csi.sock and the registration socket
	// <root>/plugins_registry/<driver>-reg.sock.
	KubeletRoot string
	// Logger receives the driver's log; nil discards it.
	Logger *slog.Logger
}

// Call is one gRPC call the driver served.
type Call struct {
	// Node is the node ID of the driver that served it (Config.NodeID):
	// with one driver per node, the node the call was for.
	Node string
	// Method is the short method name, e.g. "NodeStageVolume", "GetInfo".
	Method string
	// VolumeID is the request's volume_id, if it has one.
	VolumeID string
	// Path is the request's target_path, else its staging_target_path.
	Path string
	// Time is when the call arrived.
	Time time.Time
	// Err is the error returned, empty on success. For
	// NotifyRegistrationStatus it also carries the kubelet's registration
	// error, if the kubelet reported one.
	Err string
}

// Driver is a running (or startable) CSI node plugin.
type Driver struct {
	cfg     Config
	log     *slog.Logger
	csiSock string
	regSock string

	// opMu serialises the node operations: mounts are quick, and one at a
	// time keeps the mount table checks and the mounts consistent.
	opMu sync.Mutex

	mu         sync.Mutex
	started    bool
	stopped    bool
	servers    []*grpc.Server
	wg         sync.WaitGroup
	calls      []Call
	registered bool
	regError   string
}

// New validates cfg and returns a Driver that is not serving yet.
func New(cfg Config) (*Driver, error) {
	if cfg.DriverName == "" {
		return nil, errors.New("csidriver: DriverName is empty")
	}
	if cfg.NodeID == "" {
		return nil, errors.New("csidriver: NodeID is empty")
	}
	if cfg.KubeletRoot == "" {
		return nil, errors.New("csidriver: KubeletRoot is empty")
	}
	root, err := filepath.Abs(cfg.KubeletRoot)
	if err != nil {
		return nil, fmt.Errorf("csidriver: kubelet root %q: %w", cfg.KubeletRoot, err)
	}
	cfg.KubeletRoot = root
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Driver{
		cfg:     cfg,
		log:     log.With("component", "csidriver", "driver", cfg.DriverName),
		csiSock: filepath.Join(root, "plugins", cfg.DriverName, "csi.sock"),
		regSock: filepath.Join(root, "plugins_registry", cfg.DriverName+"-reg.sock"),
	}
	for _, p := range []string{d.csiSock, d.regSock} {
		if len(p) > maxSocketPath {
			return nil, fmt.Errorf("csidriver: unix socket path %q is %d bytes, longer than the %d bytes Linux allows; use a shorter kubelet root or driver name", p, len(p), maxSocketPath)
		}
	}
	return d, nil
}

// CSIEndpoint is the path of the CSI socket (Identity and Node services).
func (d *Driver) CSIEndpoint() string { return d.csiSock }

// RegistrationEndpoint is the path of the kubelet plugin registration socket.
func (d *Driver) RegistrationEndpoint() string { return d.regSock }

// Start creates the socket directories, removes stale sockets, listens on
// both sockets and serves them in goroutines. It returns once both are
// listening. ctx bounds only the start: the driver serves until Stop.
func (d *Driver) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || d.stopped {
		return errors.New("csidriver: Start called on a driver that was already started or stopped; make a new one with New")
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	csiLis, err := listen(d.csiSock)
	if err != nil {
		return err
	}
	regLis, err := listen(d.regSock)
	if err != nil {
		csiLis.Close()
		return err
	}

	csiSrv := grpc.NewServer(grpc.UnaryInterceptor(d.intercept))
	registerCSI(csiSrv, d)
	regSrv := grpc.NewServer(grpc.UnaryInterceptor(d.intercept))
	registerRegistration(regSrv, d)
	d.servers = []*grpc.Server{csiSrv, regSrv}
	d.started = true

	serve := func(srv *grpc.Server, lis net.Listener) {
		defer d.wg.Done()
		if err := srv.Serve(lis); err != nil {
			d.log.Error("gRPC server stopped", "socket", lis.Addr().String(), "err", err)
		}
	}
	d.wg.Add(2)
	go serve(csiSrv, csiLis)
	go serve(regSrv, regLis)
	d.log.Info("CSI node plugin listening", "csi", d.csiSock, "registration", d.regSock, "node", d.cfg.NodeID)
	return nil
}

// Stop stops serving and removes both sockets, so the kubelet deregisters
// the plugin. Mounts stay. It is safe to call more than once, and before
// Start. Stop a driver before starting another one on the same kubelet
// root: Stop removes the socket paths whoever owns them.
func (d *Driver) Stop() {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	d.stopped = true
	started, servers := d.started, d.servers
	d.mu.Unlock()
	if !started {
		return
	}

	for _, srv := range servers {
		done := make(chan struct{})
		go func() {
			srv.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			d.log.Warn("graceful stop timed out; closing connections")
			srv.Stop()
		}
	}
	d.wg.Wait()
	for _, p := range []string{d.regSock, d.csiSock} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Error("removing socket", "path", p, "err", err)
		}
	}
	d.log.Info("CSI node plugin stopped")
}

// Calls returns a copy of the record of every call served so far.
func (d *Driver) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Call(nil), d.calls...)
}

// Registered reports whether the kubelet's last NotifyRegistrationStatus
// said the plugin is registered, and the error it reported otherwise.
func (d *Driver) Registered() (bool, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.registered, d.regError
}

// listen creates the socket's directory, removes a stale socket file and
// listens on path.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("csidriver: creating socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.IsDir() {
			return nil, fmt.Errorf("csidriver: socket path %q is a directory", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("csidriver: removing stale socket %q: %w", path, err)
		}
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("csidriver: listening on %q: %w", path, err)
	}
	return lis, nil
}

// intercept records every call and logs it.
func (d *Driver) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c := Call{Node: d.cfg.NodeID, Method: filepath.Base(info.FullMethod), Time: time.Now()}
	if r, ok := req.(interface{ GetVolumeId() string }); ok {
		c.VolumeID = r.GetVolumeId()
	}
	if r, ok := req.(interface{ GetStagingTargetPath() string }); ok {
		c.Path = r.GetStagingTargetPath()
	}
	if r, ok := req.(interface{ GetTargetPath() string }); ok && r.GetTargetPath() != "" {
		c.Path = r.GetTargetPath()
	}
	resp, err := handler(ctx, req)
	if err != nil {
		c.Err = err.Error()
	} else if r, ok := req.(interface {
		GetPluginRegistered() bool
		GetError() string
	}); ok && !r.GetPluginRegistered() {
		c.Err = "kubelet reported registration failure: " + r.GetError()
	}

	d.mu.Lock()
	d.calls = append(d.calls, c)
	d.mu.Unlock()

	attrs := []any{"method", c.Method, "duration", time.Since(c.Time)}
	if c.VolumeID != "" {
		attrs = append(attrs, "volume", c.VolumeID)
	}
	if c.Path != "" {
		attrs = append(attrs, "path", c.Path)
	}
	if err != nil {
		d.log.Error("CSI call failed", append(attrs, "code", status.Code(err).String(), "err", err)...)
	} else {
		d.log.Debug("CSI call", attrs...)
	}
	return resp, err
}
