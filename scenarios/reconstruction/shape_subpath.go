package reconstruction

// This file checks the subpath shape: the re-created pod's subPath bind
// mounts of a PVC directory, a hostPath directory and a configMap file.

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
)

var _ = addShape(catalogue.Entry{
	Name:   "subpath",
	Plants: "directory subPaths of the pod's CSI PVC and of a hostPath directory (as #135698 was reported), and a file subPath of a configMap, the pod writing a marker through each directory; the pod force-deleted while the kubelet is down",
	Checks: "the old UID's volume-subpaths bind mounts gone and pods/<uid> removed; the new pod's three subPath binds there, the markers read back through the directory binds, the configMap key through the file bind",
	// A hostPath volume has no dir under pods/<uid>/volumes, so it
	// is not reconstructed and no unmount cleans its subPath bind;
	// the orphan sweep's remove of the bind fails (EBUSY; the
	// message says rmdir() before v1.36, remove after).
	Expect: []catalogue.Expectation{{From: "1.31", Outcome: catalogue.KnownBug, Bug: "subpath rmdir busy leak",
		Symptom: catalogue.Symptom{
			Traces: []catalogue.Trace{oldPodDir, {Kind: catalogue.Mounted, Path: "pods/" + catalogue.OldUID + "/volume-subpaths/" + hostVolume + "/" + containerName + "/<n>"}},
			Logs:   []string{"orphaned pod * found, but failed to * subpath at path */volume-subpaths/" + hostVolume + "/" + containerName + "/*device or resource busy"},
			Counters: []catalogue.Counter{
				{Metric: kubeletmetrics.OrphanPodCleanedVolumesErrors, Of: catalogue.OldPodDirs},
			},
		},
		Says:    "orphaned pod cleanup fails to remove the hostPath subPath bind (device or resource busy) every 2 s and the pod dir stays; reported with hostPath on 1.31.1, seen here on 1.36.3 and 1.37.2 (the PVC's and configMap's subPath binds are cleaned)",
		Refs:    []catalogue.Ref{catalogue.Issue(135698), catalogue.PR(135696)},
		FixedIn: ""}},
	Needs: shapeNeeds,
}, Shape{owns: []string{"volume-subpaths/"}, check: checkSubpath})

// checkSubpath: the re-created pod's subPath bind mounts are there (the
// PVC's directory with the marker written before the first hop, the
// configMap's file with its content), and none of the old pods'.
func checkSubpath(ctx context.Context, s *Scenario, sc *scenarios.StepContext, _ *version.Version) (catalogue.Observation, error) {
	pods, snap, err := s.newPods(ctx, sc)
	if err != nil {
		return catalogue.Observation{}, err
	}
	cfg, _ := shapeObjectsData(s.cfg.Namespace)
	var seen, fine []string
	for _, p := range pods {
		uid := string(p.UID)
		binds := map[string]string{} // volume -> bind mount point
		for _, m := range snap.Pod(uid).Mounts {
			rel, _ := strings.CutPrefix(m.MountPoint, snap.Abs("pods/"+uid+"/volume-subpaths")+"/")
			if rel != m.MountPoint {
				binds[strings.Split(rel, "/")[0]] = m.MountPoint
			}
		}
		// The kubelet names a PVC's subpath dir after its PV, other
		// volumes' after the pod volume.
		pv := s.pvOf[claimOf(p)]
		dirBind, fileBind, hostBind := binds[pv], binds[cfgVolume], binds[hostVolume]
		if dirBind == "" || fileBind == "" || hostBind == "" {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): subPath bind mounts under %s: %v, want one of PV %s (volume %s), one of volume %s and one of volume %s", p.Name, uid, snap.Abs("pods/"+uid+"/volume-subpaths"), binds, pv, volumeName, cfgVolume, hostVolume)
		}
		hm, err := s.readFileMarker(ctx, sc, hostBind+"/marker")
		if err != nil {
			return catalogue.Observation{}, err
		}
		if want := s.shapes.markers[ShapeSubpath+"/"+hostVolume+"/"+p.Name]; hm != want {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): the marker under subPath %s of hostPath %s reads %q, want %q (written before the first hop)", p.Name, uid, subDir, s.hostPathDir(), hm, want)
		}
		m, err := s.readFileMarker(ctx, sc, dirBind+"/marker")
		if err != nil {
			return catalogue.Observation{}, err
		}
		if want := s.shapes.markers[ShapeSubpath+"/"+pv]; m != want {
			line := s.unstagedLine(ctx, pv)
			if line == "" {
				return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): the marker under subPath %s of PV %s reads %q, want %q (written before the first hop)", p.Name, uid, subDir, pv, m, want)
			}
			sc.Note("pod %s uid %s: the marker under subPath %s of PV %s reads %q, before %q: %s", p.Name, uid, subDir, pv, m, want, restaged(line))
			s.shapes.markers[ShapeSubpath+"/"+pv] = m
		}
		res, err := exec.Output(ctx, sc.Node, "cat", fileBind)
		if err != nil {
			return catalogue.Observation{}, err
		}
		if res.Stdout != cfg[cfgKey] {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): file subPath %s of configMap %s holds %q, want %q", p.Name, uid, fileBind, shapeObjects, res.Stdout, cfg[cfgKey])
		}
		fine = append(fine, fmt.Sprintf("pod %s uid %s: subPath binds %s (PVC directory, marker intact), %s (hostPath directory, marker intact) and %s (configMap key %s)", p.Name, uid, dirBind, hostBind, fileBind, cfgKey))
	}
	var traces []catalogue.Trace
	for _, u := range s.oldUIDs {
		for _, m := range snap.Pod(u).Mounts {
			if strings.Contains(m.MountPoint, "/volume-subpaths/") {
				seen = append(seen, "old pod "+u+"'s subPath bind mount "+m.MountPoint)
				rel, _ := strings.CutPrefix(m.MountPoint, snap.Abs("")+"/")
				traces = append(traces, catalogue.Trace{Kind: catalogue.Mounted, Path: rel, Detail: "old pod " + u + "'s subPath bind mount"})
			}
		}
	}
	if len(seen) > 0 {
		return catalogue.Observation{Traces: traces, Detail: strings.Join(seen, "; ")}, nil
	}
	return catalogue.Observation{Detail: strings.Join(fine, "; ")}, nil
}
