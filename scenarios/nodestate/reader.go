// Package nodestate reads a node's kubelet volume state (the mount table,
// the kubelet root's pods/ and plugins/ trees and the CSI vol_data.json
// files) through an exec.Cmder, and answers the questions of the checklist
// after a kubelet hop: is anything of an old pod left, is a CSI global mount
// present exactly once, what changed between two snapshots.
//
// One Snapshot is one command on the node (sh, cat, find and, only when
// vol_data.json files exist, one more sh), so it is cheap enough to poll
// every 250 ms.
//
// Paths: entries, PodState.Entries, PluginEntries and VolData keys are
// relative to the kubelet root ("pods/<uid>/volumes/..."); mount points are
// absolute, as the node's mount table writes them.
package nodestate

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

// Defaults for Reader.
const (
	DefaultKubeletRoot   = "/var/lib/kubelet"
	DefaultMountinfoPath = "/proc/1/mountinfo"
	// DefaultMaxDepth is how deep below pods/ and plugins/ the listing
	// goes. 6 reaches everything the kubelet creates:
	// pods/<uid>/volumes/<plugin>/<name>/mount (5),
	// pods/<uid>/volume-subpaths/<vol>/<container>/<idx> (5),
	// plugins/kubernetes.io/csi/<driver>/<sha>/globalmount (5) and
	// plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<uid> (6),
	// while bounding what a workload's files (an emptyDir, a same-device
	// bind mount) can add to each poll.
	DefaultMaxDepth = 6
	// maxVolDataSize: larger vol_data.json files are listed, not read.
	maxVolDataSize = 64 << 10
)

// Reader takes snapshots of one node. The zero values of the fields other
// than Node select the defaults above.
type Reader struct {
	// Node runs the snapshot command: exec.Local{}, an SSH session, a
	// container. It must run as a user that can read the kubelet root.
	Node exec.Cmder
	// KubeletRoot is the kubelet's --root-dir, an absolute path.
	KubeletRoot string
	// MountinfoPath is the mount table to read. The kubelet runs in the
	// mount namespace of PID 1 on a host (and in a kind node container),
	// hence /proc/1/mountinfo; tests use /proc/self/mountinfo.
	MountinfoPath string
	// MaxDepth bounds the listing below pods/ and plugins/.
	MaxDepth int
}

// snapshotScript prints, NUL-separated:
//
//	header, "M", mountinfo text,
//	"R", the kubelet root as `pwd -P` resolves it,
//	per entry:          "E", type letter (find %y), path, symlink target,
//	per vol_data.json:  "V", path, content (NULs removed), "ok" or "err",
//	"END".
//
// Paths are relative to the kubelet root ("pods/..."). GNU find flushes its
// output before every -exec, so records never interleave. -xdev keeps find
// out of mounts of other file systems (tmpfs, CSI volumes); entries inside
// same-device bind mounts are dropped when the output is parsed.
// -ignore_readdir_race keeps the kubelet removing dirs during the walk from
// failing the snapshot.
const snapshotScript = `set -u
mi=$1 root=$2 depth=$3
printf '` + header + `\0M\0'
cat -- "$mi" || exit 10
printf '\0'
cd -- "$root" || exit 11
printf 'R\0%s\0' "$(pwd -P)"
set --
for d in pods plugins; do
	if [ -d "$d" ]; then set -- "$@" "$d"; fi
done
if [ "$#" -gt 0 ]; then
	find "$@" -mindepth 1 -maxdepth "$depth" -xdev -ignore_readdir_race \
		-printf 'E\0%y\0%p\0%l\0' \
		-name vol_data.json -type f -size -65k \
		-exec sh -c 'for f do printf "V\0%s\0" "$f"; if tr -d "\000" 2>/dev/null <"$f"; then printf "\0ok\0"; else printf "\0err\0"; fi; done; exit 0' vol_data {} + || exit 12
fi
printf 'END\0'
`

const header = "skewtest-nodestate/1"

func (r Reader) withDefaults() Reader {
	if r.KubeletRoot == "" {
		r.KubeletRoot = DefaultKubeletRoot
	}
	if r.MountinfoPath == "" {
		r.MountinfoPath = DefaultMountinfoPath
	}
	if r.MaxDepth <= 0 {
		r.MaxDepth = DefaultMaxDepth
	}
	r.KubeletRoot = path.Clean(r.KubeletRoot)
	return r
}

// Command is the argv Snapshot runs on the node.
func (r Reader) Command() []string {
	r = r.withDefaults()
	return []string{"sh", "-c", snapshotScript, "nodestate-snapshot", r.MountinfoPath, r.KubeletRoot, strconv.Itoa(r.MaxDepth)}
}

// Snapshot reads the node's state with one command. A missing pods/ or
// plugins/ dir gives an empty listing; a missing kubelet root is an error
// (a wrong root would otherwise look perfectly clean).
func (r Reader) Snapshot(ctx context.Context) (*Snapshot, error) {
	if r.Node == nil {
		return nil, errors.New("nodestate: Reader.Node is nil")
	}
	r = r.withDefaults()
	if !path.IsAbs(r.KubeletRoot) {
		return nil, fmt.Errorf("nodestate: kubelet root %q is not absolute", r.KubeletRoot)
	}
	res, err := exec.Output(ctx, r.Node, r.Command()...)
	if err != nil {
		what := "snapshot command failed"
		switch res.ExitCode {
		case 10:
			what = "cannot read mount table " + r.MountinfoPath
		case 11:
			what = "kubelet root " + r.KubeletRoot + " is missing or unreadable"
		case 12:
			what = "listing " + r.KubeletRoot + " failed"
		}
		return nil, &SnapshotError{What: what, Result: res, Err: err}
	}
	s, err := parseOutput(r.KubeletRoot, r.MountinfoPath, res.Stdout)
	if err != nil {
		return nil, fmt.Errorf("nodestate: output of the snapshot command (%d bytes): %w", len(res.Stdout), err)
	}
	s.Taken, s.Duration = res.Started, res.Duration
	return s, nil
}

// SnapshotError is a snapshot command that failed. Its message says what
// failed, with the exit code and the end of stderr, but not the command:
// the script is long, and a headline quoting it (escaped once per error
// that wraps it) buries the cause. Result keeps the command for the
// evidence.
type SnapshotError struct {
	What   string
	Result exec.Result
	Err    error
}

func (e *SnapshotError) Error() string {
	msg := "nodestate: " + e.What
	if e.Result.ExitCode >= 0 {
		msg += fmt.Sprintf(" (exit %d)", e.Result.ExitCode)
	} else if e.Err != nil {
		msg += fmt.Sprintf(" (did not run: %v)", errors.Unwrap(e.Err))
	}
	if tail := lastLines(e.Result.Stderr, 3); tail != "" {
		msg += ": " + tail
	}
	return msg
}

func (e *SnapshotError) Unwrap() error { return e.Err }

// lastLines is the last n non-empty lines of s, joined with "; ".
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// parseOutput turns the script's output into a Snapshot.
func parseOutput(root, mountinfoPath, out string) (*Snapshot, error) {
	tok := strings.Split(out, "\x00")
	if tok[len(tok)-1] == "" { // every field is NUL-terminated
		tok = tok[:len(tok)-1]
	}
	if len(tok) < 3 || tok[0] != header || tok[1] != "M" {
		return nil, fmt.Errorf("no %q header", header)
	}
	s := &Snapshot{KubeletRoot: root, MountinfoPath: mountinfoPath, Mountinfo: tok[2]}
	var err error
	if s.mounts, err = mountinfo.Parse(strings.NewReader(s.Mountinfo)); err != nil {
		return nil, fmt.Errorf("%s: %w", mountinfoPath, err)
	}
	type rawVol struct{ path, content, status string }
	var vols []rawVol
	var entries []Entry
	ended := false
	for i := 3; i < len(tok) && !ended; {
		need := func(n int) error {
			if i+n > len(tok) {
				return fmt.Errorf("truncated %q record", tok[i])
			}
			return nil
		}
		switch tok[i] {
		case "R":
			if err := need(2); err != nil {
				return nil, err
			}
			s.ResolvedRoot = tok[i+1]
			i += 2
		case "E":
			if err := need(4); err != nil {
				return nil, err
			}
			entries = append(entries, Entry{Type: typeName(tok[i+1]), Path: tok[i+2], Target: tok[i+3]})
			i += 4
		case "V":
			if err := need(4); err != nil {
				return nil, err
			}
			vols = append(vols, rawVol{tok[i+1], tok[i+2], tok[i+3]})
			i += 4
		case "END":
			if i != len(tok)-1 {
				return nil, fmt.Errorf("%d fields after the END record", len(tok)-1-i)
			}
			ended = true
		default:
			return nil, fmt.Errorf("unexpected record %q", tok[i])
		}
	}
	if !ended {
		return nil, errors.New("output truncated (no END record)")
	}
	if s.ResolvedRoot == "" {
		return nil, errors.New("no resolved kubelet root")
	}
	s.under = mountinfo.Under(s.mounts, s.ResolvedRoot)

	// Mount points below pods/ and plugins/, relative: entries strictly
	// inside them are workload data, not kubelet state.
	points := map[string]bool{}
	for _, m := range s.under {
		rel, ok := s.rel(m.MountPoint)
		if ok && (strings.HasPrefix(rel, "pods/") || strings.HasPrefix(rel, "plugins/")) {
			points[rel] = true
		}
	}
	s.mountPoints = points
	for _, e := range entries {
		if insideMount(points, e.Path) {
			s.HiddenEntries++
			continue
		}
		s.Entries = append(s.Entries, e)
	}
	sort.Slice(s.Entries, func(i, j int) bool { return s.Entries[i].Path < s.Entries[j].Path })
	s.index = make(map[string]int, len(s.Entries))
	for i, e := range s.Entries {
		s.index[e.Path] = i
	}

	s.volData = map[string]VolData{}
	for _, v := range vols {
		if _, listed := s.index[v.path]; !listed {
			continue // inside a mount point
		}
		if v.status != "ok" {
			s.volData[v.path] = VolData{Err: "cannot read the file"}
			continue
		}
		s.volData[v.path] = parseVolData(v.content)
	}
	for _, e := range s.Entries {
		if path.Base(e.Path) == "vol_data.json" && e.Type == TypeFile {
			if _, ok := s.volData[e.Path]; !ok {
				s.volData[e.Path] = VolData{Err: fmt.Sprintf("not read: larger than %d bytes", maxVolDataSize)}
			}
		}
	}
	return s, nil
}

// insideMount reports whether p lies strictly inside one of the mount
// points (all relative paths).
func insideMount(points map[string]bool, p string) bool {
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		if points[d] {
			return true
		}
	}
	return false
}

// Entry types, from find's %y.
const (
	TypeDir     = "dir"
	TypeFile    = "file"
	TypeSymlink = "symlink"
	TypeSocket  = "socket"
	TypeFIFO    = "fifo"
	TypeBlock   = "blockdev"
	TypeChar    = "chardev"
)

func typeName(y string) string {
	switch y {
	case "d":
		return TypeDir
	case "f":
		return TypeFile
	case "l":
		return TypeSymlink
	case "s":
		return TypeSocket
	case "p":
		return TypeFIFO
	case "b":
		return TypeBlock
	case "c":
		return TypeChar
	}
	return "unknown(" + y + ")"
}
