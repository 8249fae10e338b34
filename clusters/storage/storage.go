// Package storage describes the volumes a provider makes for a scenario's
// StatefulSet: pre-created PVs bound to the claims the StatefulSet's
// volumeClaimTemplate will create, on a given kind of volume.
package storage

import "fmt"

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
}

// Volumes is what the provider made.
type Volumes struct {
	StorageClass string
	// Driver is the CSI driver name; empty for local volumes.
	Driver string
	PVs    []PV
}

// PV is one pre-created PersistentVolume.
type PV struct {
	Name  string
	Claim string
	// VolumeHandle is the CSI volume handle (the global mount is named
	// after its sha256); empty for local volumes.
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
}
