// Package csidriver is skewtest's own CSI driver. It runs as processes of
// its own (cmd/skewtest-csi-driver), as a real driver's DaemonSet and
// controller Deployment would, and keeps running while the kubelet is
// stopped and swapped, and after the harness exits with a kept cluster.
//
// The node service serves the CSI Identity and Node services on
// <kubelet root>/plugins/<driver>/csi.sock and the kubelet plugin
// Registration service on <kubelet root>/plugins_registry/<driver>-reg.sock,
// where the kubelet's plugin watcher finds it. The controller service serves
// Identity and Controller on a socket of its own (Config.ControllerEndpoint),
// for csi-sanity and the external-attacher.
//
// Two modes (Mode). ModeTmpfs, the fast default: each staged volume is a
// fresh tmpfs mounted at the staging path, each publish a bind mount of it,
// and the CSIDriver object has attachRequired false. ModeEBS, shaped like
// the AWS EBS driver: a volume is a sparse file under the controller's state
// directory; ControllerPublishVolume attaches it as a loop device (the
// external-attacher calls it for a VolumeAttachment) and returns the device
// in the publish context; NodeStageVolume formats it ext4 on first use and
// mounts it at the staging path; NodePublishVolume bind-mounts from there, or
// for volumeMode Block bind-mounts the device node onto the target file.
//
// Both modes serve CSI inline ephemeral volumes (a tmpfs published straight
// at the target), and a test can make any call stall, or fail for one
// volume (the knobs in Config.StallDir).
//
// Every operation is idempotent, because the kubelet repeats them after each
// restart (NodeStageVolume on a staging path that is still mounted,
// NodeUnpublishVolume for targets that are already gone). Stop leaves the
// mounts in place, as a restarting DaemonSet pod does; removing them is the
// cluster provider's job.
package csidriver

import (
	"bufio"
	"context"
	"encoding/json"
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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Name is the driver name skewtest's providers register it under.
const Name = "csi.skewtest.k8s.io"

// Object is the CSIDriver that tells the API server how the driver in mode
// behaves: an attach step (VolumeAttachments, the external-attacher) only in
// ModeEBS, persistent and inline ephemeral volumes, and pod info on mount:
// the kubelet marks an inline ephemeral volume's NodePublishVolume with
// EphemeralContextKey only when podInfoOnMount is set, as
// csi-driver-host-path's deployment sets it.
func Object(mode Mode) *storagev1.CSIDriver {
	return &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: Name},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired: ptr.To(mode == ModeEBS),
			PodInfoOnMount: ptr.To(true),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{
				storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral,
			},
		},
	}
}

// Mode is how the driver backs volumes.
type Mode string

const (
	// ModeTmpfs stages each volume as a tmpfs; no attach step. The default.
	ModeTmpfs Mode = "tmpfs"
	// ModeEBS attaches each volume as a loop device over a sparse file,
	// formats it ext4 and mounts it, or serves it as a raw block device.
	ModeEBS Mode = "ebs"
)

// Modes lists the modes, default first.
var Modes = []Mode{ModeTmpfs, ModeEBS}

// UnstageLosesData tells whether a volume's data goes with its staging in
// mode m: a tmpfs does, a loop device's ext4 keeps it as a disk does.
func (m Mode) UnstageLosesData() bool { return m != ModeEBS }

// ParseMode checks a mode setting; empty means ModeTmpfs.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", ModeTmpfs:
		return ModeTmpfs, nil
	case ModeEBS:
		return ModeEBS, nil
	}
	return "", fmt.Errorf("unknown CSI driver mode %q: want %s (tmpfs staging, no attach; fast) or %s (loop devices over sparse files, ext4 or raw block, attached through VolumeAttachments)", s, ModeTmpfs, ModeEBS)
}

// VendorVersion is what GetPluginInfo reports.
const VendorVersion = "0.1.0"

// VolumeContextCapacity is the volume context key (a PV's
// spec.csi.volumeAttributes) holding a volume's size as a Kubernetes
// quantity, e.g. "64Mi". Without it a volume gets DefaultCapacity.
const VolumeContextCapacity = "capacity"

// VolumeContextMode is the volume context key recording, for whoever reads
// the PV, the Mode of the driver serving it ("tmpfs" when missing, the
// default): whether the volume's data survives an unstage
// (Mode.UnstageLosesData). The driver itself does not read it.
const VolumeContextMode = "mode"

// DefaultCapacity is the tmpfs size of a volume without a capacity in its
// volume context, in bytes (16Mi).
const DefaultCapacity int64 = 16 << 20

// maxSocketPath is the longest unix socket path Linux accepts with a
// terminating NUL: sun_path is 108 bytes.
const maxSocketPath = 107

// Config configures a Driver: a node service (KubeletRoot set), a
// controller service (ControllerEndpoint set), or both.
type Config struct {
	// DriverName is the CSI driver name, e.g. "csi.skewtest.k8s.io".
	DriverName string
	// Mode is how volumes are backed; empty is ModeTmpfs.
	Mode Mode
	// NodeID is what NodeGetInfo reports: the node name. Needed with
	// KubeletRoot.
	NodeID string
	// KubeletRoot is the kubelet's --root-dir; set, the driver serves the
	// node service. The CSI endpoint is <root>/plugins/<driver>/csi.sock
	// and the registration socket <root>/plugins_registry/<driver>-reg.sock.
	KubeletRoot string
	// ControllerEndpoint is the unix socket of the controller service;
	// empty, the driver serves none.
	ControllerEndpoint string
	// StateDir is the controller's: the volumes' backing files
	// (volumes/) and attachment records (attachments/). Needed with
	// ControllerEndpoint.
	StateDir string
	// Nodes are the node IDs the controller may attach volumes to; a
	// ControllerPublishVolume for another node is NOT_FOUND. Empty allows
	// any node.
	Nodes []string
	// StallDir, if set, is the knob directory. The stall knob: while a
	// file named after a CSI method exists there (e.g.
	// <StallDir>/NodePublishVolume), calls of that method wait before doing
	// anything, until the file is removed or the caller gives up. The fail
	// knob (Fail): while <StallDir>/<Method>.fail/<volume ID> exists, calls
	// of that method for that volume fail with the code it names, as many
	// times as it says or until it is removed.
	StallDir string
	// CallsFile, if set, gets one JSON line per call served (Call), so the
	// record outlives the process.
	CallsFile string
	// Logger receives the driver's log; nil discards it.
	Logger *slog.Logger
}

// Call is one gRPC call the driver served.
type Call struct {
	// Node is the node ID of the driver that served it (Config.NodeID):
	// with one driver per node, the node the call was for. For the
	// controller service, the request's node_id.
	Node string `json:"node"`
	// Method is the short method name, e.g. "NodeStageVolume", "GetInfo".
	Method string `json:"method"`
	// VolumeID is the request's volume_id, if it has one.
	VolumeID string `json:"volumeID,omitempty"`
	// Path is the request's target_path, else its staging_target_path.
	Path string `json:"path,omitempty"`
	// Time is when the call arrived.
	Time time.Time `json:"time"`
	// Err is the error returned, empty on success. For
	// NotifyRegistrationStatus it also carries the kubelet's registration
	// error, if the kubelet reported one.
	Err string `json:"err,omitempty"`
	// Code is the returned error's gRPC code ("FailedPrecondition"),
	// empty on success.
	Code string `json:"code,omitempty"`
	// Injected: the fail knob made the call fail (Err names its file);
	// the driver did nothing else for it.
	Injected bool `json:"injected,omitempty"`
}

// Driver is a running (or startable) CSI node plugin.
type Driver struct {
	cfg      Config
	log      *slog.Logger
	csiSock  string
	regSock  string
	ctrlSock string

	// opMu serialises the node operations: mounts are quick, and one at a
	// time keeps the mount table checks and the mounts consistent.
	opMu sync.Mutex

	// stallMu guards stalled: how many calls of each method the stall
	// holds, so that <method>.stalled lives while any does.
	stallMu sync.Mutex
	stalled map[string]int

	// failMu guards failCounts: how many calls each fail knob file has
	// failed so far.
	failMu     sync.Mutex
	failCounts map[failKey]int

	mu         sync.Mutex
	started    bool
	stopped    bool
	servers    []*grpc.Server
	wg         sync.WaitGroup
	calls      []Call
	callsFile  *os.File
	registered bool
	regError   string
}

// New validates cfg and returns a Driver that is not serving yet.
func New(cfg Config) (*Driver, error) {
	if cfg.DriverName == "" {
		return nil, errors.New("csidriver: DriverName is empty")
	}
	mode, err := ParseMode(string(cfg.Mode))
	if err != nil {
		return nil, fmt.Errorf("csidriver: %w", err)
	}
	cfg.Mode = mode
	if cfg.KubeletRoot == "" && cfg.ControllerEndpoint == "" {
		return nil, errors.New("csidriver: neither KubeletRoot (node service) nor ControllerEndpoint (controller service) is set")
	}
	if cfg.KubeletRoot != "" && cfg.NodeID == "" {
		return nil, errors.New("csidriver: NodeID is empty")
	}
	if cfg.ControllerEndpoint != "" && cfg.StateDir == "" {
		return nil, errors.New("csidriver: StateDir is empty (the controller keeps its volumes there)")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Driver{cfg: cfg, log: log.With("component", "csidriver", "driver", cfg.DriverName, "mode", string(cfg.Mode))}
	var socks []string
	if cfg.KubeletRoot != "" {
		root, err := filepath.Abs(cfg.KubeletRoot)
		if err != nil {
			return nil, fmt.Errorf("csidriver: kubelet root %q: %w", cfg.KubeletRoot, err)
		}
		d.cfg.KubeletRoot = root
		d.csiSock = filepath.Join(root, "plugins", cfg.DriverName, "csi.sock")
		d.regSock = filepath.Join(root, "plugins_registry", cfg.DriverName+"-reg.sock")
		socks = append(socks, d.csiSock, d.regSock)
	}
	if cfg.ControllerEndpoint != "" {
		p, err := filepath.Abs(cfg.ControllerEndpoint)
		if err != nil {
			return nil, fmt.Errorf("csidriver: controller endpoint %q: %w", cfg.ControllerEndpoint, err)
		}
		d.ctrlSock = p
		socks = append(socks, p)
	}
	for _, p := range socks {
		if len(p) > maxSocketPath {
			return nil, fmt.Errorf("csidriver: unix socket path %q is %d bytes, longer than the %d bytes Linux allows; use a shorter kubelet root or driver name", p, len(p), maxSocketPath)
		}
	}
	return d, nil
}

// CSIEndpoint is the path of the CSI socket (Identity and Node services).
func (d *Driver) CSIEndpoint() string { return d.csiSock }

// ControllerEndpoint is the path of the controller socket (Identity and
// Controller services).
func (d *Driver) ControllerEndpoint() string { return d.ctrlSock }

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

	if d.cfg.CallsFile != "" {
		if err := os.MkdirAll(filepath.Dir(d.cfg.CallsFile), 0o755); err != nil {
			return fmt.Errorf("csidriver: calls file: %w", err)
		}
		f, err := os.OpenFile(d.cfg.CallsFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("csidriver: calls file: %w", err)
		}
		d.callsFile = f
	}
	if d.ctrlSock != "" {
		for _, sub := range []string{volumesDir, attachmentsDir} {
			if err := os.MkdirAll(filepath.Join(d.cfg.StateDir, sub), 0o755); err != nil {
				return fmt.Errorf("csidriver: state directory: %w", err)
			}
		}
	}

	type server struct {
		sock     string
		register func(*grpc.Server)
	}
	var servers []server
	if d.csiSock != "" {
		servers = append(servers,
			server{d.csiSock, func(s *grpc.Server) { registerIdentity(s, d); registerNode(s, d) }},
			// The registration socket last: once it exists the kubelet
			// dials the CSI socket.
			server{d.regSock, func(s *grpc.Server) { registerRegistration(s, d) }})
	}
	if d.ctrlSock != "" {
		servers = append(servers, server{d.ctrlSock, func(s *grpc.Server) { registerIdentity(s, d); registerController(s, d) }})
	}
	var lis []net.Listener
	for _, s := range servers {
		l, err := listen(s.sock)
		if err != nil {
			for _, l := range lis {
				l.Close()
			}
			return err
		}
		lis = append(lis, l)
	}
	d.started = true
	for i, s := range servers {
		srv := grpc.NewServer(grpc.UnaryInterceptor(d.intercept))
		s.register(srv)
		d.servers = append(d.servers, srv)
		d.wg.Add(1)
		go func(l net.Listener) {
			defer d.wg.Done()
			if err := srv.Serve(l); err != nil {
				d.log.Error("gRPC server stopped", "socket", l.Addr().String(), "err", err)
			}
		}(lis[i])
	}
	d.log.Info("CSI driver listening", "csi", d.csiSock, "registration", d.regSock, "controller", d.ctrlSock, "node", d.cfg.NodeID)
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
	for _, p := range []string{d.regSock, d.csiSock, d.ctrlSock} {
		if p == "" {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Error("removing socket", "path", p, "err", err)
		}
	}
	d.mu.Lock()
	if d.callsFile != nil {
		d.callsFile.Close()
		d.callsFile = nil
	}
	d.mu.Unlock()
	d.log.Info("CSI driver stopped")
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
	if r, ok := req.(interface{ GetNodeId() string }); ok {
		c.Node = r.GetNodeId()
	}
	if r, ok := req.(interface{ GetVolumeId() string }); ok {
		c.VolumeID = r.GetVolumeId()
	}
	if r, ok := req.(interface{ GetStagingTargetPath() string }); ok {
		c.Path = r.GetStagingTargetPath()
	}
	if r, ok := req.(interface{ GetTargetPath() string }); ok && r.GetTargetPath() != "" {
		c.Path = r.GetTargetPath()
	}
	var resp any
	err := d.stall(ctx, c.Method, c.Path)
	if err == nil {
		if err = d.failed(c.Method, c.VolumeID); err != nil {
			c.Injected = true
		}
	}
	if err == nil {
		resp, err = handler(ctx, req)
	}
	if err != nil {
		c.Err = err.Error()
		c.Code = status.Code(err).String()
	} else if r, ok := req.(interface {
		GetPluginRegistered() bool
		GetError() string
	}); ok && !r.GetPluginRegistered() {
		c.Err = "kubelet reported registration failure: " + r.GetError()
	}

	d.mu.Lock()
	d.calls = append(d.calls, c)
	if d.callsFile != nil {
		if b, jerr := json.Marshal(c); jerr == nil {
			_, _ = d.callsFile.Write(append(b, '\n'))
		}
	}
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

// stallPoll is how often a stalled call looks for its stall file.
const stallPoll = 100 * time.Millisecond

// StalledSuffix names the file a stalled call keeps in the stall
// directory while it waits (<StallDir>/<method>.stalled, holding the
// request's target or staging path): a test knows the call is in flight,
// and for which pod, before it disrupts the caller.
const StalledSuffix = ".stalled"

// stall waits while <StallDir>/<method> exists; it gives up with the
// caller's context. While it holds calls of a method, <method>.stalled
// exists, naming the last held call's path.
func (d *Driver) stall(ctx context.Context, method, path string) error {
	if d.cfg.StallDir == "" {
		return nil
	}
	file := filepath.Join(d.cfg.StallDir, method)
	if _, err := os.Stat(file); err != nil {
		return nil
	}
	d.holding(method, path, +1)
	defer d.holding(method, path, -1)
	d.log.Info("stalling: the stall file exists", "method", method, "file", file)
	for {
		select {
		case <-ctx.Done():
			return status.Errorf(codes.DeadlineExceeded, "stalled by %s until the caller gave up: %v", file, ctx.Err())
		case <-time.After(stallPoll):
		}
		if _, err := os.Stat(file); err != nil {
			d.log.Info("stall released", "method", method, "file", file)
			return nil
		}
	}
}

// holding counts a held call of method in or out and keeps its marker.
func (d *Driver) holding(method, path string, delta int) {
	d.stallMu.Lock()
	defer d.stallMu.Unlock()
	if d.stalled == nil {
		d.stalled = map[string]int{}
	}
	d.stalled[method] += delta
	marker := filepath.Join(d.cfg.StallDir, method+StalledSuffix)
	switch {
	case delta > 0:
		if err := os.WriteFile(marker, []byte(path+"\n"), 0o644); err != nil {
			d.log.Error("cannot mark the held call", "file", marker, "err", err)
		}
	case d.stalled[method] == 0:
		os.Remove(marker)
	}
}

// ReadCalls reads a calls file (Config.CallsFile). A missing file is no
// calls; a line cut short by a killed driver is skipped.
func ReadCalls(path string) ([]Call, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var calls []Call
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var c Call
		if json.Unmarshal(sc.Bytes(), &c) == nil {
			calls = append(calls, c)
		}
	}
	return calls, sc.Err()
}
