package reconstruction

// This file is what the untouched watch (checkUntouched, in faults.go)
// compares beyond the kept pods' containers and volume mounts: their
// volumes' staging mounts, the files their volumes hold, and the kubelet's
// own log lines unmounting one of their volumes. A kubelet that unmounts a
// running pod's volume and sets it up again between two looks changes a
// mount ID, empties a tmpfs or rewrites a payload, and logs it.

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

// How a kept file is read.
const (
	// fileContent: the file's bytes (a marker, a configMap key).
	fileContent = "file"
	// linkTarget: where a symlink points (an AtomicWriter volume's ..data,
	// which a rewrite of its payload moves to a new timestamped dir).
	linkTarget = "link"
	// rawMarker: the first line of a block device's first sector, where
	// podbin writes its marker.
	rawMarker = "raw"
)

// maxQuotedContent bounds a file's content quoted in a change.
const maxQuotedContent = 120

// keptFile is a file of a running pod's volume that must hold, after the
// kubelet's restart, what it held while the kubelet was down.
type keptFile struct {
	how  string // fileContent, linkTarget or rawMarker
	path string // absolute on the node
	was  string
}

// keptFiles are the files of pod p's volumes the untouched watch reads:
// the marker podbin wrote in each volume it writes to, and, for the shapes
// that have them, the block device's marker, the subPaths' markers and
// configMap key, and every file and the ..data link of the configMap,
// secret and projected volumes. pvs are the pod's PVs by pod volume
// (podPVs). Files the kubelet rewrites by design (the service account
// token's projected volume, refreshed at every start) are not among them.
func (s *Scenario) keptFiles(p corev1.Pod, pvs map[string]string, snap *nodestate.Snapshot) []keptFile {
	uid := string(p.UID)
	var out []keptFile
	add := func(how, rel string) { out = append(out, keptFile{how: how, path: snap.Abs(rel)}) }
	add(fileContent, podVolumeDir(s.cfg.Kind, uid, pvs[volumeName])+"/marker")
	if s.shapes == nil {
		return out
	}
	vol := func(plugin, name string) string {
		return fmt.Sprintf("pods/%s/volumes/kubernetes.io~%s/%s", uid, plugin, name)
	}
	has := s.shapes.has
	if has[ShapeBlock] {
		add(rawMarker, blockLink(uid, pvs[blockVolume]))
	}
	if has[ShapeSubpath] {
		add(fileContent, podVolumeDir(s.cfg.Kind, uid, pvs[volumeName])+"/"+subDir+"/marker")
		out = append(out, keptFile{how: fileContent, path: path.Join(s.hostPathDir(), subDir, "marker")})
		// The configMap key's file bind, read through its mount point.
		for _, m := range snap.Pod(uid).Mounts {
			if strings.HasPrefix(m.MountPoint, snap.Abs(fmt.Sprintf("pods/%s/volume-subpaths/%s/", uid, cfgVolume))) {
				out = append(out, keptFile{how: fileContent, path: m.MountPoint})
			}
		}
	}
	if has[ShapeEmptyDirMemory] {
		add(fileContent, vol("empty-dir", memVolume)+"/marker")
	}
	if has[ShapeProjected] {
		for _, v := range []struct {
			plugin, name string
			keys         []string
		}{
			{"configmap", cfgVolume, []string{cfgKey}},
			{"secret", secVolume, []string{secretKey}},
			{"projected", projVolume, []string{cfgKey, secretKey, uidKey}},
		} {
			add(linkTarget, vol(v.plugin, v.name)+"/..data")
			for _, k := range v.keys {
				add(fileContent, vol(v.plugin, v.name)+"/"+k)
			}
		}
	}
	if has[ShapeGenericEphemeral] {
		add(fileContent, podVolumeDir(storage.CSI, uid, pvs[genVolume])+"/marker")
	}
	if has[ShapeCSIInline] {
		add(fileContent, podVolumeDir(storage.CSI, uid, inlineVolume)+"/marker")
	}
	return out
}

// keptFilesScript prints one NUL-terminated record per argument
// "<how> <path>": the file's content, the link's target or the device's
// marker line, or "!" and why it could not be read.
const keptFilesScript = `for a; do how=${a%% *} p=${a#* }
case $how in
` + fileContent + `) v=$(cat -- "$p" 2>&1) || v="!$v";;
` + linkTarget + `) v=$(readlink -- "$p" 2>&1) || v="!not a link: $p";;
` + rawMarker + `) if [ -e "$p" ]; then v=$(head -c 512 -- "$p" | tr '\000' '\n' | head -n 1); else v="!no such device: $p"; fi;;
esac
printf '%s\0' "$v"
done`

// readKeptFiles reads every running pod's kept files with one command on
// node, by path.
func (s *Scenario) readKeptFiles(ctx context.Context, node exec.Cmder) (map[string]string, error) {
	args := []string{"sh", "-c", keptFilesScript, "kept-files"}
	var paths []string
	for _, r := range s.running {
		for _, f := range r.files {
			args = append(args, f.how+" "+f.path)
			paths = append(paths, f.path)
		}
	}
	out := map[string]string{}
	if len(paths) == 0 {
		return out, nil
	}
	res, err := exec.Output(ctx, node, args...)
	if err != nil {
		return nil, fmt.Errorf("read the running pods' volume files: %w", err)
	}
	got := strings.Split(strings.TrimSuffix(res.Stdout, "\x00"), "\x00")
	if len(got) != len(paths) {
		return nil, fmt.Errorf("read the running pods' volume files: %d records for %d files", len(got), len(paths))
	}
	for i, p := range paths {
		out[p] = got[i]
	}
	return out, nil
}

// describeKeptFiles says, for a note, what each file held.
func describeKeptFiles(files []keptFile) string {
	var out []string
	for _, f := range files {
		out = append(out, fmt.Sprintf("%s %s = %q", f.how, path.Base(f.path), truncate(f.was, maxQuotedContent)))
	}
	return strings.Join(out, ", ")
}

// podPVs are the PVs bound to pod p's claims (its PVC volumes' and its
// generic ephemeral volumes', named <pod>-<volume>), by pod volume.
func (s *Scenario) podPVs(ctx context.Context, p corev1.Pod) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range p.Spec.Volumes {
		claim := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			claim = p.Name + "-" + v.Name
		default:
			continue
		}
		pv, err := s.boundPV(ctx, claim)
		if err != nil {
			return nil, fmt.Errorf("pod %s (uid %s): %w", p.Name, p.UID, err)
		}
		out[v.Name] = pv
	}
	return out, nil
}

// podMounts are every mount of pod uid on the node, by mount point: those
// below pods/<uid>, those below plugins/ naming the UID (a block volume's
// map link and publish bind), and the staging mounts of its PVs pvs (a
// filesystem volume's global mount, a block volume's staging path).
func (s *Scenario) podMounts(snap *nodestate.Snapshot, uid string, pvs []string) map[string]int {
	out := map[string]int{}
	ps := snap.Pod(uid)
	for _, m := range append(ps.Mounts, ps.PluginMounts...) {
		out[m.MountPoint] = m.ID
	}
	for _, name := range pvs {
		rels := []string{blockStaging(name)}
		if pv, ok := s.pvNamed(name); ok {
			rels = append(rels, nodestate.CSIGlobalMountPath(pv.Driver, pv.VolumeHandle))
		}
		for _, m := range snap.Mounts() {
			for _, rel := range rels {
				if m.MountPoint == snap.Abs(rel) {
					out[m.MountPoint] = m.ID
				}
			}
		}
	}
	return out
}

// runPVs are the run's PVs: the StatefulSet's and the shapes'.
func (s *Scenario) runPVs() []storage.PV {
	all := append([]storage.PV(nil), s.volumes.PVs...)
	if s.shapes != nil {
		all = append(append(all, s.shapes.block.PVs...), s.shapes.gen.PVs...)
	}
	return all
}

// pvNamed finds one of the run's PVs by name (runPVs).
func (s *Scenario) pvNamed(name string) (storage.PV, bool) {
	for _, pv := range s.runPVs() {
		if pv.Name == name {
			return pv, true
		}
	}
	return storage.PV{}, false
}

// The kubelet's words when it unmounts a pod's volume
// (reconciler_common.go, operation_generator.go and reconstruct_common.go
// of v1.34 to v1.37): "operationExecutor.UnmountVolume started",
// "UnmountVolume.TearDown succeeded" (or failed), "UnmapVolume
// succeeded", "UnmapVolume.UnmapPodDevice failed", each with the pod's
// UID; and the volume's device, named by its PV: "operationExecutor.
// UnmountDevice started", "UnmountDevice succeeded", "UnmapDevice
// succeeded", "Volume detached". Nothing else the kubelet logs carries
// these words.
var (
	podUnmountWords    = []string{"UnmountVolume", "UnmapVolume"}
	deviceUnmountWords = []string{"UnmountDevice", "UnmapDevice", "Volume detached"}
)

// unmountsLogged are the lines of the kubelet's log (since its start)
// unmounting, unmapping, unstaging or detaching a volume of a running pod
// (s.running), trimmed to maxQuoted, in the log's order.
func (s *Scenario) unmountsLogged(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if s.unmountsRunningVolume(line) {
			line = strings.TrimSpace(line)
			if len(line) > maxQuoted {
				line = line[:maxQuoted] + "…"
			}
			out = append(out, line)
		}
	}
	return out
}

func (s *Scenario) unmountsRunningVolume(line string) bool {
	has := func(words []string) bool {
		for _, w := range words {
			if strings.Contains(line, w) {
				return true
			}
		}
		return false
	}
	pod, device := has(podUnmountWords), has(deviceUnmountWords)
	if !pod && !device {
		return false
	}
	for _, r := range s.running {
		if pod && strings.Contains(line, string(r.uid)) {
			return true
		}
		for _, pv := range r.pvs {
			if device && (strings.Contains(line, `"`+pv+`"`) || strings.Contains(line, `"`+pv+`\"`)) {
				return true
			}
		}
	}
	return false
}

// sortedPVs are a pod's PVs (podPVs), sorted.
func sortedPVs(pvs map[string]string) []string {
	var out []string
	for _, pv := range pvs {
		out = append(out, pv)
	}
	sort.Strings(out)
	return out
}
