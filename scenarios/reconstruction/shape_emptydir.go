package reconstruction

// This file checks the emptydir-memory shape: the re-created pod's own
// tmpfs emptyDir.

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

var _ = addShape(catalogue.Entry{
	Name:   "emptydir-memory",
	Plants: "an emptyDir with medium: Memory (a tmpfs per pod) the pod writes a marker into",
	Checks: "the old UID's tmpfs unmounted and its dir removed; the new pod has a tmpfs of its own with its own marker (the volume's lifecycle is the pod's, so no data is carried over)",
	Expect: []catalogue.Expectation{{Outcome: catalogue.Clean, Says: "reconstructed and unmounted like any tmpfs volume"}},
	Needs:  shapeNeeds,
}, Shape{owns: []string{"kubernetes.io~empty-dir/" + memVolume}, check: checkEmptyDirMemory})

// checkEmptyDirMemory: the re-created pod has its own tmpfs with its own
// marker.
func checkEmptyDirMemory(ctx context.Context, s *Scenario, sc *scenarios.StepContext, _ *version.Version) (catalogue.Observation, error) {
	pods, snap, err := s.newPods(ctx, sc)
	if err != nil {
		return catalogue.Observation{}, err
	}
	var fine []string
	for _, p := range pods {
		rel := fmt.Sprintf("pods/%s/volumes/kubernetes.io~empty-dir/%s", p.UID, memVolume)
		if err := checkMounted(snap, p, rel, "tmpfs"); err != nil {
			return catalogue.Observation{}, err
		}
		m, err := s.freshMarker(ctx, sc, p, snap.Abs(rel))
		if err != nil {
			return catalogue.Observation{}, err
		}
		fine = append(fine, fmt.Sprintf("pod %s uid %s has its own tmpfs at %s (marker %q)", p.Name, p.UID, snap.Abs(rel), m))
	}
	return catalogue.Observation{Detail: strings.Join(fine, "; ")}, nil
}
