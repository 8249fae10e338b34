package reconstruction

// This file checks the block shape: a raw block volume mapped into the pod,
// its node paths, its loop devices and the marker on the device.

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/loopdev"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

var _ = addShape(catalogue.Entry{
	Name:   "block",
	Plants: "a volumeMode: Block CSI PVC (skewtest's driver in CSI_MODE=ebs: a loop device over a sparse file, attached through a VolumeAttachment) mapped into the pod at /dev/skewtest-block, which writes a marker in its first sector; the pod force-deleted while the kubelet is down",
	Checks: "the old UID's pods/<uid>/volumeDevices link, plugins/kubernetes.io/csi/volumeDevices/<pv>/dev/<uid> map link and publish/<pv>/<uid> target gone; the new pod's mapped; as many loop devices as at deploy, the kubelet's backed by the new pod's map link, none by an old UID's path or a deleted file; the marker reads back after every hop",
	Expect: []catalogue.Expectation{{From: "1.30", Outcome: catalogue.Clean, Says: "unmapped and cleaned; one driver loop device and one kubelet loop device per block volume",
		Refs: []catalogue.Ref{catalogue.Issue(119608), catalogue.Issue(122960), catalogue.Issue(102408)}, FixedIn: "1.30 (#122211, backported to 1.26-1.29)"}},
	Needs: blockNeeds,
}, Shape{Block: true, owns: []string{"volumeDevices/"}, check: checkBlock})

// Node paths of a block volume (kubelet root relative): the pod's
// volumeDevices symlink, the kubelet's global map link for the pod (a
// bind mount of the device, which the kubelet's own loop device holds
// open), the driver's publish target, and the staging dir.
func blockLink(uid, pv string) string {
	return fmt.Sprintf("pods/%s/volumeDevices/kubernetes.io~csi/%s", uid, pv)
}
func blockMapDir(pv string) string { return "plugins/kubernetes.io/csi/volumeDevices/" + pv + "/dev" }
func blockPublish(pv, uid string) string {
	return fmt.Sprintf("plugins/kubernetes.io/csi/volumeDevices/publish/%s/%s", pv, uid)
}
func blockStaging(pv string) string { return "plugins/kubernetes.io/csi/volumeDevices/staging/" + pv }

// readRawMarker reads the marker podbin wrote in a raw device's first
// sector, through the pod's volumeDevices path on the node.
func (s *Scenario) readRawMarker(ctx context.Context, sc *scenarios.StepContext, dev string) (string, error) {
	var got, last string
	cond := func(ctx context.Context) (bool, error) {
		res, err := exec.Output(ctx, sc.QuietNode, "sh", "-c", `head -c 512 -- "$1" | tr '\000' '\n' | head -n 1`, "sh", dev)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		line := strings.TrimSpace(res.Stdout)
		m, ok := strings.CutPrefix(line, rawMarkerMagic)
		if !ok {
			last = fmt.Sprintf("first sector starts %q, not the marker", truncate(line, 40))
			return false, nil
		}
		got = m
		return true, nil
	}
	if err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(s.scaled(markerWait)), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return "", fmt.Errorf("read the raw marker of %s: %w (last: %s)", dev, err, last)
	}
	return got, nil
}

// blockLoops lists the node's loop devices that belong to the block
// volumes: the kubelet's (backed by its global map links, under
// plugins/kubernetes.io/csi/volumeDevices/<pv>/dev/) and the driver's
// (those the publish targets bind-mount, and any other over the same
// backing files).
func (s *Scenario) blockLoops(ctx context.Context, sc *scenarios.StepContext, snap *nodestate.Snapshot) ([]loopdev.Device, error) {
	all, err := loopdev.ListOn(ctx, sc.QuietNode)
	if err != nil {
		return nil, err
	}
	driverDevs, backing := map[string]bool{}, map[string]bool{}
	for _, m := range snap.Mounts() {
		for _, pv := range s.shapes.block.PVs {
			if strings.HasPrefix(m.MountPoint, snap.Abs("plugins/kubernetes.io/csi/volumeDevices/publish/"+pv.Name)+"/") && strings.HasPrefix(m.Root, "/loop") {
				driverDevs["/dev"+m.Root] = true
			}
		}
	}
	for _, d := range all {
		if driverDevs[d.Path] {
			backing[d.BackingFile] = true
		}
	}
	var out []loopdev.Device
	for _, d := range all {
		mine := driverDevs[d.Path] || backing[d.BackingFile]
		for _, pv := range s.shapes.block.PVs {
			if strings.HasPrefix(d.BackingFile, snap.Abs(blockMapDir(pv.Name))+"/") {
				mine = true
			}
		}
		if mine {
			out = append(out, d)
		}
	}
	return out, nil
}

func describeLoops(ds []loopdev.Device) string {
	var out []string
	for _, d := range ds {
		s := d.Path + " backed by " + d.BackingFile
		if d.Deleted {
			s += " (deleted)"
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// checkBlock: the re-created pod's block volume is mapped (its
// volumeDevices link, the global map link, the driver's publish target),
// the old pod's links are gone, the loop devices are as many as at deploy,
// each backed by the right file (the kubelet's by the new pod's map link,
// none naming an old UID, none deleted), and the marker on the device is
// the one written before the first hop.
func checkBlock(ctx context.Context, s *Scenario, sc *scenarios.StepContext, _ *version.Version) (catalogue.Observation, error) {
	pods, snap, err := s.newPods(ctx, sc)
	if err != nil {
		return catalogue.Observation{}, err
	}
	var seen, fine []string
	var paths []string
	for _, p := range pods {
		uid := string(p.UID)
		pv, err := s.boundPV(ctx, claimNameOf(blockVolume, s.cfg.Name, ordinal(p)))
		if err != nil {
			return catalogue.Observation{}, err
		}
		link, ok := snap.Lookup(blockLink(uid, pv))
		if !ok {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): no %s: its block volume %s is not mapped", p.Name, uid, snap.Abs(blockLink(uid, pv)), pv)
		}
		mapLink := blockMapDir(pv) + "/" + uid
		if snap.MountCount(mapLink) != 1 {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): global map link %s is mounted %d times, want 1", p.Name, uid, snap.Abs(mapLink), snap.MountCount(mapLink))
		}
		if _, ok := snap.Lookup(blockStaging(pv)); !ok {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): block volume %s has no staging dir %s", p.Name, uid, pv, snap.Abs(blockStaging(pv)))
		}
		paths = append(paths, link.String(), fmt.Sprintf("%s [mounted %d]", snap.Abs(mapLink), snap.MountCount(mapLink)),
			fmt.Sprintf("%s [mounted %d]", snap.Abs(blockPublish(pv, uid)), snap.MountCount(blockPublish(pv, uid))), "staging "+snap.Abs(blockStaging(pv)))
		for _, u := range s.oldUIDs {
			for _, rel := range []string{blockLink(u, pv), blockMapDir(pv) + "/" + u, blockPublish(pv, u)} {
				if _, ok := snap.Lookup(rel); ok {
					seen = append(seen, "old pod "+u+"'s "+snap.Abs(rel)+" is still there")
				}
			}
		}
		m, err := s.readRawMarker(ctx, sc, snap.Abs(blockLink(uid, pv)))
		if err != nil {
			return catalogue.Observation{}, err
		}
		if want := s.shapes.markers[ShapeBlock+"/"+pv]; m != want {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): the marker on block PV %s reads %q, want %q (written before the first hop)", p.Name, uid, pv, m, want)
		}
		fine = append(fine, fmt.Sprintf("pod %s uid %s maps PV %s at %s with its marker intact", p.Name, uid, pv, blockDevice))

		loops, err := s.blockLoops(ctx, sc, snap)
		if err != nil {
			return catalogue.Observation{}, err
		}
		kubelets := 0
		for _, d := range loops {
			if d.Deleted {
				seen = append(seen, fmt.Sprintf("loop device %s is backed by a deleted file %s", d.Path, d.BackingFile))
			}
			for _, u := range s.oldUIDs {
				if strings.Contains(d.BackingFile, u) {
					seen = append(seen, fmt.Sprintf("loop device %s is still backed by the old pod's %s", d.Path, d.BackingFile))
				}
			}
			if strings.HasPrefix(d.BackingFile, snap.Abs(blockMapDir(pv))+"/") {
				kubelets++
				if d.BackingFile != snap.Abs(mapLink) {
					seen = append(seen, fmt.Sprintf("the kubelet's loop device %s is backed by %s, not the new pod's %s", d.Path, d.BackingFile, snap.Abs(mapLink)))
				}
			}
		}
		if kubelets != 1 {
			seen = append(seen, fmt.Sprintf("%d kubelet loop devices over PV %s's map links, want 1", kubelets, pv))
		}
		if len(loops) != s.shapes.loops {
			seen = append(seen, fmt.Sprintf("%d loop devices back the block volumes, %d did at deploy", len(loops), s.shapes.loops))
		}
		sc.Evidence(reports.Evidence{Name: "block volumes: loop devices", Kind: "losetup", Text: describeLoops(loops) + "\n"})
		fine = append(fine, fmt.Sprintf("%d loop devices (as at deploy), each backed by the right file", len(loops)))
	}
	sc.Evidence(reports.Evidence{Name: "block volumes: volumeDevices paths", Kind: "snapshot", Text: strings.Join(paths, "\n") + "\n"})
	if len(seen) > 0 {
		return catalogue.Observation{Seen: true, Detail: strings.Join(seen, "; ")}, nil
	}
	return catalogue.Observation{Detail: strings.Join(fine, "; ")}, nil
}
