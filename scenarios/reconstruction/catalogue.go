package reconstruction

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

// This file is the catalogue's registry. Each entry is declared beside the
// code that runs it, with addFault, addShape or (for the baseline shapes,
// which are the scenario's own workload) addEntry; a new fault is one
// file. Catalogue lists them all in a fixed order.

// registry holds what the package's declarations registered, filled in
// while the package's variables are initialized (before any caller can
// read it) and never changed after.
var registry = struct {
	entries map[string]catalogue.Entry
	faults  map[string]Fault
	shapes  map[string]Shape
}{entries: map[string]catalogue.Entry{}, faults: map[string]Fault{}, shapes: map[string]Shape{}}

// addEntry registers a catalogue entry; a name registered twice is a
// programming error, caught as the package loads.
func addEntry(e catalogue.Entry) catalogue.Entry {
	if e.Status == "" {
		e.Status = catalogue.Runs
	}
	if e.Kind == "" {
		e.Kind = catalogue.Shape
	}
	if _, dup := registry.entries[e.Name]; dup || e.Name == "" {
		panic(fmt.Sprintf("reconstruction: catalogue entry %q registered twice or unnamed", e.Name))
	}
	registry.entries[e.Name] = e
	return e
}

// addFault registers a fault: its catalogue entry and how the scenario
// plants and observes it.
func addFault(e catalogue.Entry, f Fault) bool {
	e.Kind = catalogue.Fault
	f.Entry = addEntry(e)
	registry.faults[e.Name] = f
	return true
}

// addShape registers a shape: its catalogue entry and what it adds to the
// workload.
func addShape(e catalogue.Entry, sh Shape) bool {
	e.Kind = catalogue.Shape
	sh.Entry = addEntry(e)
	registry.shapes[e.Name] = sh
	return true
}

// Catalogue is every entry, in the order reports and docs list them:
// shapes first, the baseline ones (the scenario's own workload) before
// those a run adds, then faults by their number in the catalogue's list
// (Entry.Item), unnumbered ones last; ties by name.
func Catalogue() []catalogue.Entry {
	var out []catalogue.Entry
	for _, e := range registry.entries {
		out = append(out, e)
	}
	rank := func(e catalogue.Entry) int {
		switch _, added := registry.shapes[e.Name]; {
		case e.Kind == catalogue.Shape && !added:
			return 0
		case e.Kind == catalogue.Shape:
			return 1
		case e.Item == 0:
			return math.MaxInt
		default:
			return 1 + e.Item
		}
	}
	slices.SortFunc(out, func(a, b catalogue.Entry) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.Name, b.Name))
	})
	return out
}

// CatalogueEntry finds an entry by name.
func CatalogueEntry(name string) (catalogue.Entry, bool) {
	e, ok := registry.entries[name]
	return e, ok
}

// What the implemented entries need of a provider's nodes
// (nodes.Capability); each runs on the providers whose nodes have it all.
var (
	// faultNeeds: the faults that need nothing of the node but commands
	// through nodes.Node and the API, on a node of the run's own whose
	// volumes are skewtest's (the reboot's tmpfs data goes with its
	// global mount, as a real reboot's would).
	faultNeeds = []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes}
	// hostFaultNeeds: the faults whose plant or judgement reads the
	// kernel's state of the kubelet's volumes directly: what their known
	// bugs leave at the CSI global mount (vol-data-deleted, vol-data-empty,
	// file-for-dir; kind's hostpath driver stages nothing there), a
	// container's processes, an atomic-writer volume's links, a file
	// subPath's bind. They are proven on a host node only so far.
	hostFaultNeeds = []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.HostNode}
	// shapeNeeds: the shapes beyond the sign-off's, which go into one
	// workload with inline ephemeral volumes of the run's driver and
	// claims bound to PVs it makes.
	shapeNeeds = []nodes.Capability{nodes.SkewtestVolumes}
	// blockNeeds: raw block volumes, attached through VolumeAttachments.
	blockNeeds = []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.BlockVolumes}
	// driverNeeds: the faults that stall, fail calls of or stop the
	// node's CSI driver.
	driverNeeds = []nodes.Capability{nodes.Disposable, nodes.SkewtestVolumes, nodes.CSIDriverControl}
)

// oldPodDir is an old pod's dir, kept by what its symptom names inside.
var oldPodDir = catalogue.Trace{Kind: catalogue.Dir, Path: "pods/" + catalogue.OldUID}

// globalMount is a workload PV's CSI global (staging) mount.
var globalMount = catalogue.Trace{Kind: catalogue.Mounted, Path: "plugins/kubernetes.io/csi/" + catalogue.Driver + "/" + catalogue.VolumeHash + "/globalmount"}
