package local

import (
	"context"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/images"
	"sigs.k8s.io/skewtest/clusters/storage"
)

// startCSIDriver runs skewtest's CSI node plugin inside this process; like
// a DaemonSet pod it keeps running while the kubelet is stopped and swapped.
func (p *Provider) startCSIDriver(ctx context.Context) error {
	d, err := csidriver.New(csidriver.Config{DriverName: csidriver.Name, NodeID: NodeName, KubeletRoot: p.kubeletRoot(), Logger: p.logger})
	if err != nil {
		return err
	}
	if err := d.Start(ctx); err != nil {
		return fmt.Errorf("local provider: start CSI node plugin: %w", err)
	}
	p.mu.Lock()
	p.driver = d
	p.mu.Unlock()
	return nil
}

// CSICalls is the record of every CSI call the driver served.
func (p *Provider) CSICalls() []csidriver.Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.driver == nil {
		return nil
	}
	return p.driver.Calls()
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
// it: CSI PVs of skewtest's driver, or local PVs each backed by a tmpfs
// mounted under the run directory.
func (p *Provider) ProvisionVolumes(ctx context.Context, req storage.Request) (storage.Volumes, error) {
	cs, err := p.client()
	if err != nil {
		return storage.Volumes{}, err
	}
	return storage.ProvisionPrebound(ctx, cs, req, storage.Prebound{
		NamePrefix:  fmt.Sprintf("skewtest-%s-%s", req.Kind, shortID(p.cfg.RunID)),
		CSIDriver:   csidriver.Name,
		CapacityKey: csidriver.VolumeContextCapacity,
		LocalPath: func(_ context.Context, pv string, bytes int64) (string, error) {
			path := p.path("volumes", pv)
			return path, mountTmpfs(path, bytes)
		},
	})
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
