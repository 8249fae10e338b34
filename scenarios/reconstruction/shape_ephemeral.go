package reconstruction

// This file checks the ephemeral shapes: generic-ephemeral (a new claim
// bound to a fresh PV per pod) and csi-inline-ephemeral (a volume the CSI
// driver publishes inline).

import (
	"context"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

var _ = addShape(catalogue.Entry{
	Name:   "generic-ephemeral",
	Plants: "a generic ephemeral volume (a PVC the ephemeral controller makes for the pod and the garbage collector deletes with it), each new claim bound to a fresh pre-created PV, as from a provisioner",
	Checks: "the old pod's volume unpublished, unstaged and (EBS mode) detached: its global mount and VolumeAttachment gone; the new pod's claim is a new PVC owned by it, on a fresh PV staged once, with its own marker",
	Expect: []catalogue.Expectation{{From: "1.23", Outcome: catalogue.Clean, Says: "reconstructed from vol_data.json like any CSI PVC; the old claim's volume is released"}},
	Needs:  shapeNeeds,
}, Shape{owns: []string{"-" + genVolume + "-"}, check: checkGenericEphemeral})

var _ = addShape(catalogue.Entry{
	Name:   "csi-inline-ephemeral",
	Plants: "a CSI inline ephemeral volume of skewtest's driver (volumeLifecycleMode Ephemeral: no staging, no attach; the driver publishes a tmpfs)",
	Checks: "the old UID's published tmpfs gone (the driver's NodeUnpublishVolume) and its dir removed; the new pod's published, its vol_data.json saying Ephemeral, with its own marker",
	Expect: []catalogue.Expectation{{Outcome: catalogue.Clean, Says: "reconstructed with volumeLifecycleMode Ephemeral from vol_data.json and unpublished"}},
	Needs:  shapeNeeds,
}, Shape{owns: []string{"kubernetes.io~csi/" + inlineVolume}, check: checkCSIInline})

// handle is the volume handle of one of the generic ephemeral PVs.
func (sh *shapeRun) handle(pv string) string {
	for _, v := range sh.gen.PVs {
		if v.Name == pv {
			return v.VolumeHandle
		}
	}
	return ""
}

// checkGenericEphemeral: each re-created pod's ephemeral claim is a new
// PVC owned by it and bound to a fresh PV, mounted with its own marker;
// the previous pod's PV is unstaged (its global mount gone) and, when the
// driver attaches, detached, while the fresh one is staged once.
func checkGenericEphemeral(ctx context.Context, s *Scenario, sc *scenarios.StepContext, _ *version.Version) (catalogue.Observation, error) {
	pods, snap, err := s.newPods(ctx, sc)
	if err != nil {
		return catalogue.Observation{}, err
	}
	driver := s.shapes.driver
	var seen, fine []string
	for _, p := range pods {
		claim := p.Name + "-" + genVolume
		var pvc corev1.PersistentVolumeClaim
		if err := s.res.Get(ctx, claim, s.cfg.Namespace, &pvc); err != nil {
			return catalogue.Observation{}, fmt.Errorf("get the ephemeral claim %s/%s of pod %s: %w", s.cfg.Namespace, claim, p.Name, err)
		}
		owned := false
		for _, o := range pvc.OwnerReferences {
			owned = owned || o.UID == p.UID
		}
		if !owned {
			return catalogue.Observation{}, fmt.Errorf("ephemeral claim %s/%s (uid %s) is not owned by the new pod %s (uid %s)", s.cfg.Namespace, claim, pvc.UID, p.Name, p.UID)
		}
		pv, old := pvc.Spec.VolumeName, s.shapes.genPV[p.Name]
		if pv == "" || pv == old {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): ephemeral claim %s bound to %q; want a fresh PV, not the old pod's %s", p.Name, p.UID, claim, pv, old)
		}
		handle, oldHandle := s.shapes.handle(pv), s.shapes.handle(old)
		if handle == "" {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): ephemeral claim %s bound to PV %s, which is none of the shape's PVs (%s)", p.Name, p.UID, claim, pv, pvNames(s.shapes.gen))
		}
		if path, n := snap.CSIGlobalMount(driver, handle); n != 1 {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): the global mount %s of its fresh ephemeral PV %s is mounted %d times, want 1", p.Name, p.UID, path, pv, n)
		}
		rel := podVolumeDir(storage.CSI, string(p.UID), pv)
		if err := checkMounted(snap, p, rel, ""); err != nil {
			return catalogue.Observation{}, err
		}
		m, err := s.freshMarker(ctx, sc, p, snap.Abs(rel))
		if err != nil {
			return catalogue.Observation{}, err
		}
		// The old pod's volume: nobody uses it, so unstaged and detached.
		released, why := s.waitReleased(ctx, sc, driver, oldHandle, old)
		if !released {
			seen = append(seen, fmt.Sprintf("the old pod's ephemeral PV %s: %s", old, why))
		}
		s.shapes.genPV[p.Name] = pv
		fine = append(fine, fmt.Sprintf("pod %s uid %s: new claim %s (uid %s) bound to fresh PV %s, staged once, marker %q; the old pod's PV %s %s", p.Name, p.UID, claim, pvc.UID, pv, m, old, why))
	}
	if s.shapes.attaching {
		vas, err := s.volumeAttachments(ctx)
		if err != nil {
			return catalogue.Observation{}, err
		}
		sc.Evidence(reports.Evidence{Name: "VolumeAttachments after the hop", Kind: "api", Text: describeVAs(vas)})
	}
	if len(seen) > 0 {
		return catalogue.Observation{Seen: true, Detail: strings.Join(seen, "; ")}, nil
	}
	return catalogue.Observation{Detail: strings.Join(fine, "; ")}, nil
}

// checkCSIInline: the re-created pod's inline volume is published (a
// fresh tmpfs from the driver, no staging) with its own marker, and its
// vol_data.json says Ephemeral.
func checkCSIInline(ctx context.Context, s *Scenario, sc *scenarios.StepContext, _ *version.Version) (catalogue.Observation, error) {
	pods, snap, err := s.newPods(ctx, sc)
	if err != nil {
		return catalogue.Observation{}, err
	}
	var fine []string
	for _, p := range pods {
		rel := podVolumeDir(storage.CSI, string(p.UID), inlineVolume)
		if err := checkMounted(snap, p, rel, "tmpfs"); err != nil {
			return catalogue.Observation{}, err
		}
		vd := path.Join(path.Dir(rel), "vol_data.json")
		if v, ok := snap.VolData()[vd]; !ok || v.VolumeLifecycleMode != string(storagev1.VolumeLifecycleEphemeral) {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): %s says volumeLifecycleMode %q, want %s", p.Name, p.UID, snap.Abs(vd), v.VolumeLifecycleMode, storagev1.VolumeLifecycleEphemeral)
		}
		m, err := s.freshMarker(ctx, sc, p, snap.Abs(rel))
		if err != nil {
			return catalogue.Observation{}, err
		}
		fine = append(fine, fmt.Sprintf("pod %s uid %s: inline volume published at %s (Ephemeral, marker %q)", p.Name, p.UID, snap.Abs(rel), m))
	}
	return catalogue.Observation{Detail: strings.Join(fine, "; ")}, nil
}
