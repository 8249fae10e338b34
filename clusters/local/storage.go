package local

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/images"
	"sigs.k8s.io/skewtest/clusters/storage"
)

// startCSIDriver runs an instance of skewtest's CSI node plugin for the
// node inside this process, with the node's name as its node ID and its
// sockets under the node's kubelet root; like a DaemonSet pod it keeps
// running while the kubelet is stopped and swapped.
func (n *Node) startCSIDriver(ctx context.Context) error {
	d, err := csidriver.New(csidriver.Config{DriverName: csidriver.Name, NodeID: n.String(), KubeletRoot: n.KubeletRootDir(), Logger: n.p.logger.With("node", n.String())})
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.driver = d
	n.mu.Unlock()
	if err := d.Start(ctx); err != nil {
		return fmt.Errorf("local provider: start CSI node plugin on %s: %w", n.String(), err)
	}
	return nil
}

// CSICalls is the record of every CSI call the nodes' plugins served, in
// the order they arrived; each call names the node that served it.
func (p *Provider) CSICalls() []csidriver.Call {
	p.mu.Lock()
	nodes := append([]*Node(nil), p.nodes...)
	p.mu.Unlock()
	var calls []csidriver.Call
	for _, n := range nodes {
		n.mu.Lock()
		d := n.driver
		n.mu.Unlock()
		if d != nil {
			calls = append(calls, d.Calls()...)
		}
	}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Time.Before(calls[j].Time) })
	return calls
}

func (p *Provider) createCSIDriverObject(ctx context.Context) error {
	cs, err := p.client()
	if err != nil {
		return err
	}
	if _, err := cs.StorageV1().CSIDrivers().Create(ctx, csidriver.Object(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("local provider: create CSIDriver %s: %w", csidriver.Name, err)
	}
	return nil
}

// Workload implements the scenario's workload source: images imported
// into containerd, never pulled.
func (p *Provider) Workload() storage.Workload {
	return storage.Workload{Image: images.Workload, PullPolicy: string(corev1.PullNever)}
}

// ProvisionVolumes makes a StorageClass and one PV per claim, pre-bound to
// it and pinned to req.Node: CSI PVs of skewtest's driver, or local PVs
// each backed by a tmpfs mounted under the run directory. PV names carry
// the node's suffix (skewtest-csi-<id>-0 on the first node,
// skewtest-csi-<id>2-0 on skewtest-worker2), so every node can have its own.
func (p *Provider) ProvisionVolumes(ctx context.Context, req storage.Request) (storage.Volumes, error) {
	n, err := p.nodeNamed(req.Node)
	if err != nil {
		return storage.Volumes{}, err
	}
	cs, err := p.client()
	if err != nil {
		return storage.Volumes{}, err
	}
	vols, err := storage.ProvisionPrebound(ctx, cs, req, storage.Prebound{
		NamePrefix:  fmt.Sprintf("skewtest-%s-%s%s", req.Kind, shortID(p.cfg.RunID), n.l.suffix),
		CSIDriver:   csidriver.Name,
		CapacityKey: csidriver.VolumeContextCapacity,
		LocalPath: func(_ context.Context, pv string, bytes int64) (string, error) {
			path := p.path("volumes", pv)
			return path, mountTmpfs(path, bytes)
		},
	})
	// The StorageClass is shared by every node's volumes: with several
	// nodes one node's scenario must not delete it under another's; it
	// goes with the cluster.
	vols.DeleteStorageClass = vols.DeleteStorageClass && p.nodeCount() == 1
	return vols, err
}

// nodeNamed is the node called name, or an error listing the nodes.
func (p *Provider) nodeNamed(name string) (*Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	for _, n := range p.nodes {
		if n.String() == name {
			return n, nil
		}
		names = append(names, n.String())
	}
	return nil, fmt.Errorf("local provider: no node %q in this cluster (nodes: %s)", name, strings.Join(names, ", "))
}

func (p *Provider) nodeCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.nodes)
}

// mountTmpfs backs a local volume with a real mount, as a local disk
// would be.
func mountTmpfs(path string, bytes int64) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("skewtest-local-volume", path, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0777", bytes)); err != nil {
		return fmt.Errorf("mount tmpfs for local volume at %s: %w", path, err)
	}
	return nil
}

// CSIDriver describes the CSI driver the cluster runs, for the report.
func (p *Provider) CSIDriver() string {
	return csidriver.Name + " (skewtest's CSI node plugin, in the harness process, pre-bound PVs)"
}
