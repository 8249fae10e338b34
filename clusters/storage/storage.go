// Package storage describes the volumes a provider makes for a scenario's
// StatefulSet: pre-created PVs bound to the claims the StatefulSet's
// volumeClaimTemplate will create, on a given kind of volume.
package storage

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	storagev1client "k8s.io/client-go/kubernetes/typed/storage/v1"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
)

// Client is the part of a clientset this package uses; every
// kubernetes.Interface is one. Its tests fake these two groups only
// (clusters/internal/kubefake).
type Client interface {
	CoreV1() corev1client.CoreV1Interface
	StorageV1() storagev1client.StorageV1Interface
}

// Kind is a kind of volume a scenario runs on.
type Kind string

const (
	// CSI volumes of skewtest's own CSI node plugin (or, on clouds, the
	// cloud's CSI driver): staged at a global mount and published per pod.
	CSI Kind = "csi"
	// Local volumes: kubernetes.io/local-volume PVs backed by real mounts.
	Local Kind = "local"
)

// ParseKind checks a kind given by a user.
func ParseKind(s string) (Kind, error) {
	switch Kind(s) {
	case CSI, Local:
		return Kind(s), nil
	}
	return "", fmt.Errorf("unknown volume kind %q: want %q or %q", s, CSI, Local)
}

// Request asks for one PV per claim.
type Request struct {
	Kind      Kind
	Namespace string
	// Claims are the PVC names, e.g. data-web-0, data-web-1.
	Claims []string
	// Size is each volume's capacity, e.g. "16Mi".
	Size string
	// Node is where the volumes must be usable.
	Node string
	// Group, when set, names these PVs apart from another request's on
	// the same node (a scenario's shape volumes beside its StatefulSet's):
	// <prefix>-<group>-<i> instead of <prefix>-<i>.
	Group string
	// Block asks for volumeMode Block PVs (raw block devices).
	Block bool
	// AccessMode is the PVs' and claims' one access mode; empty means
	// ReadWriteOnce. The API refuses ReadWriteOncePod beside any other
	// mode, so a request has exactly one.
	AccessMode corev1.PersistentVolumeAccessMode
	// Labels go on every object made for the request (the run's label,
	// which tells whose it is).
	Labels map[string]string
}

// Mode is the request's access mode, ReadWriteOnce when unset.
func (r Request) Mode() corev1.PersistentVolumeAccessMode {
	if r.AccessMode == "" {
		return corev1.ReadWriteOnce
	}
	return r.AccessMode
}

// Volumes is what the provider made: at least a StorageClass; PVs when
// it pre-created them (the scenario reads the bound PVs from the API
// either way).
type Volumes struct {
	StorageClass string
	// DeleteStorageClass is set when the provider made StorageClass for
	// this run alone, so Release deletes it; a class the cluster already
	// had (STORAGE_CLASS on an existing cluster) is left alone.
	DeleteStorageClass bool
	// StorageClassUID is the UID of the StorageClass made for the run,
	// the precondition of its delete: a class of that name made since by
	// someone else is not deleted.
	StorageClassUID types.UID `json:",omitempty"`
	// NoStagingMount is set when the CSI driver stages without mounting
	// anything at the global mount path (csi-driver-host-path's
	// NodeStageVolume only checks its arguments; NodePublishVolume
	// bind-mounts the data directory straight into the pod), so the
	// "global mount mounted exactly once" checks do not apply.
	NoStagingMount bool
	// UnstageLosesData is set when the CSI driver's volumes keep no data
	// once unstaged (skewtest's driver in its tmpfs mode), where a disk
	// keeps it. A kubelet may rightly unstage a volume whose new pod
	// reached it only after the old pod's cleanup, and stage it again;
	// such a volume comes back empty, which the scenario must not call
	// data loss by reconstruction.
	UnstageLosesData bool
	PVs              []PV
}

// PV is one PersistentVolume bound to a claim.
type PV struct {
	Name  string
	Claim string
	// UID and ClaimUID, once known, are the PV's and its claim's: the
	// preconditions of their deletes, so that an object of the same name
	// made since by someone else is left alone.
	UID      types.UID `json:",omitempty"`
	ClaimUID types.UID `json:",omitempty"`
	// Driver and VolumeHandle identify a CSI volume (the global mount is
	// named after the handle's sha256); empty for local volumes.
	Driver       string
	VolumeHandle string
	// Path is the local volume's path on the node; empty for CSI.
	Path string
}

// Workload is what a provider offers a scenario's pods.
type Workload struct {
	// Image runs `podbin workload /data` (see clusters/internal/podbin).
	Image string
	// PullPolicy is Never where images are imported, not pulled.
	PullPolicy string
	// Command, when set, replaces the image's entrypoint; it must write
	// /data/marker once and then keep running (see BusyboxCommand).
	Command []string
}

// StockImage is the default workload image of the providers whose
// clusters pull one (capabilities.WithWorkloadImage): it has the sh,
// sleep, date and mv BusyboxCommand needs.
const StockImage = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"

// BusyboxCommand is the workload for clusters that pull a stock image
// (existing clusters): the same marker protocol as podbin, in sh.
var BusyboxCommand = []string{"sh", "-c", `if [ -f /data/marker ]; then echo "marker found: $(cat /data/marker)"; else echo "written by pod $POD_NAME uid $POD_UID at $(date -u +%Y-%m-%dT%H:%M:%SZ)" > /data/marker.tmp && mv /data/marker.tmp /data/marker && echo "marker written"; fi; trap 'exit 0' TERM INT; while true; do sleep 1; done`}

// PVUnstageLosesData tells whether pv's data goes with its staging: a
// volume of skewtest's own CSI driver in a mode that keeps none (its
// volume context's mode, tmpfs when missing), found on a cluster whose
// provider did not make it (an existing cluster's StorageClass, the
// kops-style node of make test-hosts). See Volumes.UnstageLosesData.
func PVUnstageLosesData(pv *corev1.PersistentVolume) bool {
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != csidriver.Name {
		return false
	}
	m, err := csidriver.ParseMode(pv.Spec.CSI.VolumeAttributes[csidriver.VolumeContextMode])
	return err == nil && m.UnstageLosesData()
}
