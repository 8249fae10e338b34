package local

import (
	"context"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/images"
	"sigs.k8s.io/skewtest/clusters/storage"
)

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
		CSIVolume:   p.createCSIVolume,
		LocalPath: func(_ context.Context, pv string, bytes int64) (string, error) {
			path := p.path("volumes", pv)
			return path, mountTmpfs(path, bytes)
		},
	})
	// The StorageClass is shared by every node's volumes: with several
	// nodes one node's scenario must not delete it under another's; it
	// goes with the cluster.
	vols.DeleteStorageClass = vols.DeleteStorageClass && p.nodeCount() == 1
	vols.UnstageLosesData = req.Kind == storage.CSI && p.csiMode.UnstageLosesData()
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
	if p.csiMode == csidriver.ModeEBS {
		return fmt.Sprintf("%s mode %s (skewtest's CSI driver as processes: a node service per node, a controller service and %s@%s; loop devices over sparse files, ext4, attachRequired; pre-bound PVs)",
			csidriver.Name, p.csiMode, binaries.ExternalAttacher.Module, binaries.ExternalAttacher.Version)
	}
	return fmt.Sprintf("%s mode %s (skewtest's CSI driver, a node service process per node; tmpfs staged, bind published; pre-bound PVs)", csidriver.Name, p.csiMode)
}
