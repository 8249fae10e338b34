package local

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec" // finds the CSI driver's host tools before the cluster exists
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/helpers"
	"sigs.k8s.io/skewtest/clusters/local/internal/process"
	"sigs.k8s.io/skewtest/clusters/nodes"
)

var _ nodes.WithCSIDriver = (*Node)(nil)

// The CSI driver's files live under <run dir>/csi: its binary, the
// controller's socket and state (backing files, attachment records), each
// process's call record and the nodes' stall directories. Its processes
// are daemons like the others: logs/<name>.log, pids/<name>.pid.
const (
	csiControllerName = "csi-controller"
	csiAttacherName   = "csi-attacher"
	// csiReadyTimeout bounds a driver process's start until it listens.
	csiReadyTimeout = 30 * time.Second
	// csiStopGrace is how long a driver process has to stop on SIGTERM.
	csiStopGrace = 10 * time.Second
)

func (p *Provider) csiPath(elem ...string) string {
	return p.path(append([]string{"csi"}, elem...)...)
}

func (l nodeLayout) csiNodeName() string  { return "csi-node" + l.suffix }
func (l nodeLayout) csiStallDir() string  { return l.path("csi", l.csiNodeName()+"-stall") }
func (l nodeLayout) csiCallsFile() string { return l.path("csi", l.csiNodeName()+"-calls.jsonl") }

// CSIStallDir implements nodes.WithCSIDriver.
func (n *Node) CSIStallDir() string { return n.l.csiStallDir() }

// writeCSIDriver writes the driver's program into the run directory.
func (p *Provider) writeCSIDriver(ctx context.Context) error {
	bins, err := helpers.Write(ctx, p.csiPath("bin"), helpers.CSIDriver)
	if err != nil {
		return fmt.Errorf("local provider: write the CSI driver's program: %w", err)
	}
	p.mu.Lock()
	p.csiBin = bins[helpers.CSIDriver.Name]
	p.mu.Unlock()
	return nil
}

// StartCSIDriver implements nodes.WithCSIDriver: it starts the node's CSI
// driver node service as a process of its own, with the node's name as its
// node ID and its sockets under the node's kubelet root, and returns once
// both sockets answer. Like a DaemonSet pod it keeps running while the
// kubelet is stopped and swapped, and while a kept cluster outlives the
// harness.
func (n *Node) StartCSIDriver(ctx context.Context) error {
	n.mu.Lock()
	running := n.driver != nil
	n.mu.Unlock()
	if running {
		return fmt.Errorf("start CSI driver on %s: already running", n.l.name)
	}
	// New checks the socket paths' lengths before anything starts.
	d, err := csidriver.New(csidriver.Config{DriverName: csidriver.Name, Mode: n.p.csiMode, NodeID: n.String(), KubeletRoot: n.KubeletRootDir()})
	if err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	if err := os.MkdirAll(n.l.csiStallDir(), 0o755); err != nil {
		return err
	}
	n.p.mu.Lock()
	bin := n.p.csiBin
	n.p.mu.Unlock()
	argv := []string{bin, "--driver=" + csidriver.Name, "--mode=" + string(n.p.csiMode),
		"--node-id=" + n.String(), "--kubelet-root=" + n.KubeletRootDir(),
		"--stall-dir=" + n.l.csiStallDir(), "--calls-file=" + n.l.csiCallsFile()}
	name := n.l.csiNodeName()
	proc, err := process.Start(name, n.p.path("logs", name+".log"), n.p.path("pids", name+".pid"), argv, nil)
	if err != nil {
		return fmt.Errorf("local provider: start the CSI driver on %s: %w", n.l.name, err)
	}
	n.mu.Lock()
	n.driver = proc
	n.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, csiReadyTimeout)
	defer cancel()
	if err := proc.WaitReady(wctx, 50*time.Millisecond, dialable(d.CSIEndpoint(), d.RegistrationEndpoint())); err != nil {
		return fmt.Errorf("local provider: CSI driver on %s: %w", n.l.name, err)
	}
	return nil
}

// StopCSIDriver implements nodes.WithCSIDriver: SIGTERM; the driver removes
// its sockets, so the kubelet deregisters it. Mounts stay.
func (n *Node) StopCSIDriver(context.Context) error {
	n.mu.Lock()
	proc := n.driver
	n.driver = nil
	n.mu.Unlock()
	if proc == nil {
		return nil
	}
	if err := proc.Stop(csiStopGrace); err != nil {
		return fmt.Errorf("stop the CSI driver on %s: %w", n.l.name, err)
	}
	return nil
}

// startCSIController starts the driver's controller service and, to drive
// it from VolumeAttachments, the external-attacher (ModeEBS only: ModeTmpfs
// has no attach step). The control plane must be up.
func (p *Provider) startCSIController(ctx context.Context, attacher binaries.Binary) error {
	sock := p.csiPath("controller.sock")
	p.mu.Lock()
	bin := p.csiBin
	p.mu.Unlock()
	argv := []string{bin, "--driver=" + csidriver.Name, "--mode=" + string(p.csiMode), "--node-service=false",
		"--controller-endpoint=" + sock, "--state-dir=" + p.csiPath("state"), "--nodes=" + strings.Join(NodeNames(len(p.cfg.Kubelets)), ","),
		"--stall-dir=" + p.csiPath(csiControllerName+"-stall"), "--calls-file=" + p.csiPath(csiControllerName+"-calls.jsonl")}
	if err := p.startDaemon(ctx, csiControllerName, argv, csiReadyTimeout, dialable(sock), p.keep); err != nil {
		return err
	}
	return p.startDaemon(ctx, csiAttacherName, []string{attacher.Path,
		"--csi-address=" + sock, "--kubeconfig=" + p.KubeconfigPath(),
		// One attacher, no leader election; fast retries: a test waits on it.
		"--leader-election=false", "--timeout=30s", "--retry-interval-start=500ms", "--retry-interval-max=5s",
		"--worker-threads=4", "--v=3",
	}, 0, nil, p.keep)
}

// createCSIVolume makes a pre-bound PV's volume through the controller's
// CreateVolume (ModeEBS: its backing file), as an admin makes an EBS volume
// before its PV. ModeTmpfs needs nothing: NodeStageVolume makes the tmpfs.
func (p *Provider) createCSIVolume(ctx context.Context, handle string, bytes int64) error {
	if p.csiMode != csidriver.ModeEBS {
		return nil
	}
	conn, err := grpc.NewClient("unix://"+p.csiPath("controller.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = csi.NewControllerClient(conn).CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name:          handle,
		CapacityRange: &csi.CapacityRange{RequiredBytes: bytes},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	})
	return err
}

// CSICalls is the record of every CSI call the driver's processes served
// (each node's node service, the controller), in the order they arrived;
// each call names the node it was for. It reads the processes' call files,
// so it works after they stopped.
func (p *Provider) CSICalls() []csidriver.Call {
	files, _ := filepath.Glob(p.csiPath("*-calls.jsonl"))
	var calls []csidriver.Call
	for _, f := range files {
		c, err := csidriver.ReadCalls(f)
		if err != nil {
			p.logger.Warn("reading a CSI call record", "file", f, "err", err)
		}
		calls = append(calls, c...)
	}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Time.Before(calls[j].Time) })
	return calls
}

// dialable is ready once every unix socket accepts a connection.
func dialable(socks ...string) func(context.Context) error {
	return func(ctx context.Context) error {
		for _, s := range socks {
			c, err := (&net.Dialer{}).DialContext(ctx, "unix", s)
			if err != nil {
				return err
			}
			c.Close()
		}
		return nil
	}
}

// createCSIDriverObject tells the API server how the driver in this mode
// behaves (attachRequired only in ModeEBS).
func (p *Provider) createCSIDriverObject(ctx context.Context) error {
	cs, err := p.client()
	if err != nil {
		return err
	}
	if _, err := cs.StorageV1().CSIDrivers().Create(ctx, csidriver.Object(p.csiMode), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("local provider: create CSIDriver %s: %w", csidriver.Name, err)
	}
	return nil
}

// ebsPrograms are the host programs the CSI driver's EBS mode runs, with
// the Debian package that has each.
var ebsPrograms = []struct{ name, pkg string }{
	{"losetup", "mount"},
	{"blkid", "util-linux"},
	{"mkfs.ext4", "e2fsprogs"},
}

func checkEBSPrograms() error {
	var missing []string
	for _, hp := range ebsPrograms {
		if _, err := exec.LookPath(hp.name); err != nil {
			missing = append(missing, fmt.Sprintf("%s (apt-get install %s)", hp.name, hp.pkg))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("local provider: CSI_MODE=%s needs %s; scripts/install-deps.sh installs them", csidriver.ModeEBS, strings.Join(missing, ", "))
	}
	return nil
}

// csiAttacherBinary is the external-attacher's command name.
const csiAttacherBinary = "csi-attacher"

// recordVolumeAttachments appends every change of a VolumeAttachment
// (ModeEBS) to logs/volumeattachments.log until ctx ends, as evidence of
// attach and detach: "time event name pv=... node=... attached=... device=...".
// A watch that ends (the API server closes watches now and then) is made
// again from a fresh list; errors go into the file too.
func (p *Provider) recordVolumeAttachments(ctx context.Context) error {
	cs, err := p.client()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p.path("logs", "volumeattachments.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	line := func(event string, va *storagev1.VolumeAttachment) {
		pv := ""
		if va.Spec.Source.PersistentVolumeName != nil {
			pv = *va.Spec.Source.PersistentVolumeName
		}
		errMsg := ""
		if e := va.Status.AttachError; e != nil {
			errMsg = " attachError=" + strconv.Quote(e.Message)
		}
		if e := va.Status.DetachError; e != nil {
			errMsg += " detachError=" + strconv.Quote(e.Message)
		}
		fmt.Fprintf(f, "%s %s %s pv=%s node=%s attached=%t device=%s deleting=%t%s\n", time.Now().Format(time.RFC3339Nano), event, va.Name, pv,
			va.Spec.NodeName, va.Status.Attached, va.Status.AttachmentMetadata[csidriver.PublishContextDevicePath], va.DeletionTimestamp != nil, errMsg)
	}
	go func() {
		defer f.Close()
		for ctx.Err() == nil {
			list, err := cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
			if err != nil {
				fmt.Fprintf(f, "%s list failed: %v\n", time.Now().Format(time.RFC3339Nano), err)
				sleepCtx(ctx, time.Second)
				continue
			}
			for i := range list.Items {
				line("LISTED", &list.Items[i])
			}
			w, err := cs.StorageV1().VolumeAttachments().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				fmt.Fprintf(f, "%s watch failed: %v\n", time.Now().Format(time.RFC3339Nano), err)
				sleepCtx(ctx, time.Second)
				continue
			}
			for ev := range w.ResultChan() {
				if va, ok := ev.Object.(*storagev1.VolumeAttachment); ok {
					line(string(ev.Type), va)
				} else {
					fmt.Fprintf(f, "%s watch event %s: %v\n", time.Now().Format(time.RFC3339Nano), ev.Type, ev.Object)
				}
			}
			w.Stop()
		}
	}()
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// detachWait bounds how long Down waits for the attach/detach controller
// and the external-attacher to detach volumes no pod uses any more.
const detachWait = 30 * time.Second

// awaitDetach waits, in ModeEBS, until no VolumeAttachment is left, so that
// a run whose workload is gone ends with its volumes detached through the
// API (ControllerUnpublishVolume), as a real node would, rather than by
// teardown. With pods left (a failed run) or the API server unreachable it
// does not wait: teardown detaches what is left.
func (p *Provider) awaitDetach(ctx context.Context) {
	cs, err := p.client()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, detachWait)
	defer cancel()
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) > 0 {
		return
	}
	start := time.Now()
	for {
		vas, err := cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		if len(vas.Items) == 0 {
			p.logger.Info("every volume detached", "waited", time.Since(start).Round(100*time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			p.logger.Warn("volumes still attached after the workload went; teardown detaches them", "volumeattachments", len(vas.Items), "waited", detachWait)
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}
