package kubeletmetrics

import (
	"fmt"
	"strings"
)

// Which reconstruction a kubelet ran, as its own log since its start says
// (ClassifyReconstructionPath).
const (
	// PathNew is KEP-3756's reconstruction: 1.28+ by default, 1.27 with
	// NewVolumeManagerReconstruction=true, 1.26 with
	// SELinuxMountReadWriteOncePod=true.
	PathNew = "new"
	// PathOld is the reconstruction before it: 1.26 and 1.27.2+ by
	// default, 1.28-1.29 with NewVolumeManagerReconstruction=false.
	PathOld = "old"
	// PathNoneSeen is a log with no line of either path.
	PathNoneSeen = "none seen"
	// PathBoth is a log with lines of both: one kubelet runs one path,
	// so the log spans more than one kubelet's start, or a line was
	// attributed to the wrong path. An error.
	PathBoth = "both"
)

// The messages (klog InfoS, quoted in the text and JSON formats alike)
// that only one path logs, from pkg/kubelet/volumemanager/reconciler.
// Each is logged at --v=2 unless marked.
var (
	// reconstruct.go up to 1.29 (runOld's sync, syncStates, updateStates).
	oldPathLines = []string{
		"Reconciler sync states: could not find pod information in desired state, update it in actual state",
		"Volume is marked as mounted and added into the actual state",
		"Volume is marked device as mounted and added into the actual state",
		"Volume exists in desired state, marking as InUse",                             // --v=4
		"Could not construct volume information, cleaning up mounts",                   // level 0
		"Volume is marked as mounted in uncertain state and added to the actual state", // reconciler.go, --v=4
	}
	// reconstruct_new.go up to 1.29, reconstruct.go from 1.30
	// (reconstructVolumes, updateStatesNew, cleanOrphanVolumes,
	// updateReconstructedFromNodeStatus). "Volume reconstruction
	// finished" is logged at every start, volumes or not.
	newPathLines = []string{
		"Volume reconstruction finished",
		"Volume is marked as uncertain and added into the actual state",
		"Volume is marked device as uncertain and added into the actual state",
		"DevicePaths of reconstructed volumes updated",
		"Orphan volume cleanup finished",
	}
	// Both paths log it when the reconciler syncs its states, at level 0:
	// the new path after reconstructing, the old one before.
	syncStartLine = "Reconciler: start to sync state"
)

// maxPathLines bounds the lines a PathLog keeps per path.
const maxPathLines = 20

// PathLog is what a kubelet's log since its start says about which
// reconstruction it ran.
type PathLog struct {
	// Path is PathNew, PathOld, PathNoneSeen or PathBoth.
	Path string
	// Why says, for PathNoneSeen and PathBoth, why in a few words (a
	// report's table cell): "no volumes to reconstruct", "log level below
	// 2", ...; empty for PathNew and PathOld.
	Why string
	// Detail is the explanation for the step's notes: what the lines
	// mean, or why none could be seen.
	Detail string
	// Old and New are the log lines of each path, in order (at most
	// maxPathLines each; OldCount and NewCount count them all).
	Old, New           []string
	OldCount, NewCount int
	// SyncStarted is set when the log has "Reconciler: start to sync
	// state": the volume manager's reconciler started in it.
	SyncStarted bool
}

// Err is the error a PathBoth log is, nil otherwise.
func (l PathLog) Err() error {
	if l.Path != PathBoth {
		return nil
	}
	return fmt.Errorf("the kubelet's log since its start has lines of both the old and the new reconstruction, which one kubelet never runs together: %s", l.Detail)
}

// Cell is the path as a report's table cell: "new", "old", "none seen
// (log level below 2)", "both".
func (l PathLog) Cell() string {
	if l.Why == "" || l.Path == PathBoth {
		return l.Path
	}
	return l.Path + " (" + l.Why + ")"
}

// Evidence is the lines the classification rests on, for a step's
// evidence.
func (l PathLog) Evidence() string {
	var b strings.Builder
	fmt.Fprintf(&b, "reconstruction path: %s\n", l.Cell())
	write := func(name string, n int, lines []string) {
		fmt.Fprintf(&b, "%d %s-path lines", n, name)
		if n > len(lines) {
			fmt.Fprintf(&b, " (first %d)", len(lines))
		}
		b.WriteString(":\n")
		for _, line := range lines {
			b.WriteString(line + "\n")
		}
	}
	write("new", l.NewCount, l.New)
	write("old", l.OldCount, l.Old)
	return b.String()
}

func quoted(msg string) string { return `"` + msg + `"` }

func matchesAny(line string, msgs []string) bool {
	for _, m := range msgs {
		if strings.Contains(line, quoted(m)) {
			return true
		}
	}
	return false
}

// ClassifyReconstructionPath reads one kubelet run's log (since its start,
// nodes.WithKubeletLog) for the lines only one reconstruction logs.
// volumes is how many volume directories of deleted pods the kubelet
// found at its start (each makes the old path log a line at --v=2), or -1
// when not known; it only words the reason of PathNoneSeen.
func ClassifyReconstructionPath(log string, volumes int) PathLog {
	var out PathLog
	for _, line := range strings.Split(log, "\n") {
		switch {
		case matchesAny(line, newPathLines):
			out.NewCount++
			if len(out.New) < maxPathLines {
				out.New = append(out.New, strings.TrimSpace(line))
			}
		case matchesAny(line, oldPathLines):
			out.OldCount++
			if len(out.Old) < maxPathLines {
				out.Old = append(out.Old, strings.TrimSpace(line))
			}
		case strings.Contains(line, quoted(syncStartLine)):
			out.SyncStarted = true
		}
	}
	switch {
	case out.NewCount > 0 && out.OldCount > 0:
		out.Path, out.Why = PathBoth, "lines of both paths"
		out.Detail = fmt.Sprintf("%d new-path lines (first: %s) and %d old-path lines (first: %s)", out.NewCount, out.New[0], out.OldCount, out.Old[0])
	case out.NewCount > 0:
		out.Path = PathNew
		out.Detail = fmt.Sprintf("the kubelet ran the new reconstruction (KEP-3756): %d lines only it logs, the first %s", out.NewCount, out.New[0])
	case out.OldCount > 0:
		out.Path = PathOld
		out.Detail = fmt.Sprintf("the kubelet ran the old reconstruction (before KEP-3756): %d lines only it logs, the first %s", out.OldCount, out.Old[0])
	default:
		out.Path = PathNoneSeen
		out.Why, out.Detail = noneSeen(volumes, out.SyncStarted)
	}
	return out
}

// noneSeen says why a log shows neither path. The new path logs "Volume
// reconstruction finished" at --v=2 at every start, so at --v=2 or more a
// log without it is the old path's, which logs only the volumes of
// deleted pods it reconstructs: with none on disk it logs nothing of its
// own.
func noneSeen(volumes int, syncStarted bool) (why, detail string) {
	const atV2 = `at --v=2 (logging.verbosity: 2) the new reconstruction always logs "Volume reconstruction finished", and the old one logs each deleted pod's volume it reconstructs`
	switch {
	case volumes == 0:
		why = "no volumes to reconstruct"
		detail = "no line of either reconstruction, and no deleted pod's volume was on disk for the kubelet to reconstruct: " + atV2 + ", so this is the old reconstruction with nothing to do, or a kubelet logging below level 2"
	case volumes > 0:
		why = "log level below 2"
		detail = fmt.Sprintf("no line of either reconstruction although %d volume directories of deleted pods were on disk at the kubelet's start: %s, so the kubelet logs below level 2", volumes, atV2)
	default:
		why = "no volumes to reconstruct, or log level below 2"
		detail = "no line of either reconstruction: " + atV2 + ", so either the kubelet ran the old reconstruction with no deleted pod's volume on disk, or it logs below level 2"
	}
	if !syncStarted {
		detail += `; the log has no "Reconciler: start to sync state" either (level 0, both paths), so it may not reach back to the volume manager's start`
	}
	return why, detail
}
