package nodestate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

// Snapshot is a node's kubelet volume state at one moment.
type Snapshot struct {
	// KubeletRoot is the root as configured in the Reader.
	KubeletRoot string `json:"kubeletRoot"`
	// ResolvedRoot is the root with symlinks resolved on the node (pwd -P):
	// the mount table's mount points are matched against it.
	ResolvedRoot  string `json:"resolvedRoot"`
	MountinfoPath string `json:"mountinfoPath"`
	// Mountinfo is the raw mount table as read, for the artifacts.
	Mountinfo string `json:"mountinfo"`
	// Entries is the listing of pods/ and plugins/ (paths relative to the
	// kubelet root, sorted), without what lies inside mount points.
	Entries []Entry `json:"entries"`
	// HiddenEntries counts the entries dropped for lying inside a mount
	// point below pods/ or plugins/.
	HiddenEntries int           `json:"hiddenEntries"`
	Taken         time.Time     `json:"taken"`
	Duration      time.Duration `json:"duration"`

	mounts      []mountinfo.Mount // the whole table
	under       []mountinfo.Mount // mount points at or below ResolvedRoot
	mountPoints map[string]bool   // relative mount points below pods/ and plugins/
	index       map[string]int    // Entries by path
	volData     map[string]VolData
}

// Entry is one file or directory below pods/ or plugins/.
type Entry struct {
	// Path is relative to the kubelet root: "pods/<uid>/volumes".
	Path string `json:"path"`
	// Type is one of the Type* constants.
	Type string `json:"type"`
	// Target is a symlink's target.
	Target string `json:"target,omitempty"`
}

func (e Entry) String() string {
	s := e.Type + " " + quote(e.Path)
	if e.Type == TypeSymlink {
		s += " -> " + quote(e.Target)
	}
	return s
}

// VolData is a parsed vol_data.json, the file the CSI plugin writes next
// to each mount (pods/<uid>/volumes/kubernetes.io~csi/<pv>/vol_data.json)
// and global mount, and reads back at reconstruction.
type VolData struct {
	SpecVolID           string `json:"specVolID,omitempty"`
	VolumeHandle        string `json:"volumeHandle,omitempty"`
	DriverName          string `json:"driverName,omitempty"`
	NodeName            string `json:"nodeName,omitempty"`
	AttachmentID        string `json:"attachmentID,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
	// Other holds the keys not above (seLinuxMountContext, future keys)
	// as written.
	Other map[string]json.RawMessage `json:"other,omitempty"`
	// Raw is the file's content (NUL bytes removed).
	Raw string `json:"raw"`
	// Err says why the file could not be read or parsed; the kubelet
	// would fail to reconstruct such a volume too.
	Err string `json:"err,omitempty"`
}

func parseVolData(raw string) VolData {
	v := VolData{Raw: raw}
	if strings.TrimSpace(raw) == "" {
		v.Err = "empty file"
		return v
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		v.Err = "not a JSON object: " + err.Error()
		return v
	}
	known := map[string]*string{
		"specVolID":           &v.SpecVolID,
		"volumeHandle":        &v.VolumeHandle,
		"driverName":          &v.DriverName,
		"nodeName":            &v.NodeName,
		"attachmentID":        &v.AttachmentID,
		"volumeLifecycleMode": &v.VolumeLifecycleMode,
	}
	for k, val := range m {
		if dst, ok := known[k]; ok && json.Unmarshal(val, dst) == nil {
			continue
		}
		if v.Other == nil {
			v.Other = map[string]json.RawMessage{}
		}
		v.Other[k] = val
	}
	return v
}

// rel turns an absolute path on the node into one relative to the
// resolved kubelet root; ok is false for paths outside it.
func (s *Snapshot) rel(p string) (string, bool) {
	if s.ResolvedRoot == "/" {
		return strings.TrimPrefix(p, "/"), p != "/"
	}
	r, ok := strings.CutPrefix(p, s.ResolvedRoot+"/")
	return r, ok && r != ""
}

// Abs returns the absolute path on the node of a path relative to the
// kubelet root, as the mount table writes it.
func (s *Snapshot) Abs(rel string) string { return path.Join(s.ResolvedRoot, rel) }

// Mounts returns the mounts at or below the kubelet root, in mount-table
// order.
func (s *Snapshot) Mounts() []mountinfo.Mount { return append([]mountinfo.Mount(nil), s.under...) }

// AllMounts returns the node's whole mount table.
func (s *Snapshot) AllMounts() []mountinfo.Mount { return append([]mountinfo.Mount(nil), s.mounts...) }

// MountCount returns how many mounts sit at rel (relative to the kubelet
// root): 0 when nothing is mounted there, more than 1 when stacked.
func (s *Snapshot) MountCount(rel string) int { return mountinfo.CountAt(s.under, s.Abs(rel)) }

// Lookup returns the entry at rel (relative to the kubelet root).
func (s *Snapshot) Lookup(rel string) (Entry, bool) {
	i, ok := s.index[path.Clean(rel)]
	if !ok {
		return Entry{}, false
	}
	return s.Entries[i], true
}

// PodUIDs returns the names of the directories in pods/, sorted.
func (s *Snapshot) PodUIDs() []string {
	var uids []string
	for _, e := range s.Entries {
		if uid, ok := strings.CutPrefix(e.Path, "pods/"); ok && e.Type == TypeDir && !strings.Contains(uid, "/") {
			uids = append(uids, uid)
		}
	}
	return uids
}

// PodState is what the node holds of one pod.
type PodState struct {
	UID string
	// Exists is true when pods/<uid> exists (whatever its type).
	Exists bool
	// Entries is what is left inside pods/<uid>, relative to the kubelet
	// root, sorted.
	Entries []string
	// Mounts are the mounts at or below pods/<uid>: CSI
	// volumes/kubernetes.io~csi/<pv>/mount, local volumes, tmpfs of
	// secret/projected volumes, volume-subpaths binds.
	Mounts []mountinfo.Mount
	// PluginEntries are the entries below plugins/ whose path contains
	// the UID (CSI block volumes: volumeDevices/publish/<pv>/<uid>,
	// volumeDevices/<pv>/dev/<uid>), relative to the kubelet root.
	PluginEntries []string
	// PluginMounts are the mounts below plugins/ whose mount point
	// contains the UID (a block volume's publish bind mount).
	PluginMounts []mountinfo.Mount
}

// Pod returns the state of pod uid.
func (s *Snapshot) Pod(uid string) PodState {
	ps := PodState{UID: uid}
	if uid == "" || strings.Contains(uid, "/") {
		return ps
	}
	dir := "pods/" + uid
	_, ps.Exists = s.index[dir]
	for _, e := range s.Entries {
		if strings.HasPrefix(e.Path, dir+"/") {
			ps.Entries = append(ps.Entries, e.Path)
		}
		if strings.HasPrefix(e.Path, "plugins/") && strings.Contains(e.Path, uid) {
			ps.PluginEntries = append(ps.PluginEntries, e.Path)
		}
	}
	ps.Mounts = mountinfo.Under(s.under, s.Abs(dir))
	for _, m := range mountinfo.Under(s.under, s.Abs("plugins")) {
		if rel, ok := s.rel(m.MountPoint); ok && strings.Contains(rel, uid) {
			ps.PluginMounts = append(ps.PluginMounts, m)
		}
	}
	return ps
}

// CSIGlobalMountPath returns the CSI global (staging) mount of a volume,
// relative to the kubelet root:
// plugins/kubernetes.io/csi/<driver>/<hex sha256(volumeHandle)>/globalmount.
func CSIGlobalMountPath(driver, volumeHandle string) string {
	sum := sha256.Sum256([]byte(volumeHandle))
	return path.Join("plugins/kubernetes.io/csi", driver, hex.EncodeToString(sum[:]), "globalmount")
}

// CSIGlobalMount returns the global mount path of a CSI volume (relative
// to the kubelet root) and how many mounts sit there: the checklist wants
// exactly 1 while a pod uses the volume, 0 after.
func (s *Snapshot) CSIGlobalMount(driver, volumeHandle string) (path string, mountCount int) {
	p := CSIGlobalMountPath(driver, volumeHandle)
	return p, s.MountCount(p)
}

// VolData returns every vol_data.json found outside mount points, by path
// relative to the kubelet root.
func (s *Snapshot) VolData() map[string]VolData {
	out := make(map[string]VolData, len(s.volData))
	for k, v := range s.volData {
		out[k] = v
	}
	return out
}

// Leftover kinds.
const (
	LeftoverPodDir      = "pod-dir"
	LeftoverMount       = "mount"
	LeftoverPluginEntry = "plugin-entry"
)

// Leftover is one thing a pod that should be gone left on the node.
type Leftover struct {
	UID string `json:"uid"`
	// Kind is one of the Leftover* constants.
	Kind string `json:"kind"`
	// Path is relative to the kubelet root for pod-dir and plugin-entry,
	// and the absolute mount point for mount.
	Path   string `json:"path"`
	Detail string `json:"detail"`
}

func (l Leftover) String() string {
	s := fmt.Sprintf("pod %s: %s %s", l.UID, l.Kind, quote(l.Path))
	if l.Detail != "" {
		s += ": " + l.Detail
	}
	return s
}

// Leftovers lists what the pods uids, which should be gone, still have on
// the node: their pods/<uid> dir, every mount below it or below plugins/
// naming the UID, and the topmost entries below plugins/ naming the UID.
// It is empty when the node is clean of them. The order is deterministic:
// by uid as given, then kind, then path.
func (s *Snapshot) Leftovers(uids []string) []Leftover {
	var out []Leftover
	seen := map[string]bool{}
	for _, uid := range uids {
		if seen[uid] || uid == "" {
			continue
		}
		seen[uid] = true
		ps := s.Pod(uid)
		if ps.Exists {
			e, _ := s.Lookup("pods/" + uid)
			detail := e.Type + " still present"
			if n := len(ps.Entries); n > 0 {
				detail += fmt.Sprintf(" (%d entries), kept by %s", n, s.podDirBlockers(uid, ps.Entries))
			} else {
				detail += ", empty"
			}
			out = append(out, Leftover{UID: uid, Kind: LeftoverPodDir, Path: "pods/" + uid, Detail: detail})
		}
		var mounts []Leftover
		for _, m := range append(ps.Mounts, ps.PluginMounts...) {
			mounts = append(mounts, Leftover{UID: uid, Kind: LeftoverMount, Path: m.MountPoint, Detail: mountDetail(m)})
		}
		sort.SliceStable(mounts, func(i, j int) bool { return mounts[i].Path < mounts[j].Path })
		out = append(out, mounts...)
		var top []string
		for _, p := range ps.PluginEntries { // sorted, so parents come first
			covered := false
			for _, t := range top {
				if strings.HasPrefix(p, t+"/") {
					covered = true
					break
				}
			}
			if !covered {
				top = append(top, p)
			}
		}
		for _, p := range top {
			e, _ := s.Lookup(p)
			detail := e.Type
			if e.Type == TypeSymlink {
				detail += " -> " + quote(e.Target)
			}
			if n := s.MountCount(p); n > 0 {
				detail += fmt.Sprintf(", mounted %d time(s)", n)
			}
			out = append(out, Leftover{UID: uid, Kind: LeftoverPluginEntry, Path: p, Detail: detail})
		}
	}
	return out
}

// maxBlockers is how many entries a pod-dir leftover names.
const maxBlockers = 3

// VolumeSubdirs are where the kubelet's orphan sweep starts: it removes
// the volume dirs first and stops at the first it cannot remove, leaving
// containers/, etc-hosts and plugins/ behind them.
var VolumeSubdirs = []string{"volumes/", "volumeDevices/", "volume-subpaths/"}

// podDirBlockers names what keeps pods/<uid>: the deepest entries below
// its volume dirs (or, when there are none, anywhere), each with why the
// kubelet could not remove it (mounted) or did not make it (a file where
// the kubelet makes a volume directory).
func (s *Snapshot) podDirBlockers(uid string, entries []string) string {
	prefix := "pods/" + uid + "/"
	leaf := func(i int) bool {
		return i+1 >= len(entries) || !strings.HasPrefix(entries[i+1], entries[i]+"/")
	}
	var inVolumes, others []string
	for i, p := range entries { // sorted: a dir's entries follow it
		if !leaf(i) {
			continue
		}
		rel := strings.TrimPrefix(p, prefix)
		d := quote(rel) + " (" + s.blockerKind(p, rel) + ")"
		isVol := false
		for _, v := range VolumeSubdirs {
			if strings.HasPrefix(rel, v) {
				isVol = true
			}
		}
		if isVol {
			inVolumes = append(inVolumes, d)
		} else {
			others = append(others, d)
		}
	}
	// Mounts first: they are what the kubelet failed to undo.
	sort.SliceStable(inVolumes, func(i, j int) bool {
		return strings.HasSuffix(inVolumes[i], "(mounted)") && !strings.HasSuffix(inVolumes[j], "(mounted)")
	})
	show := inVolumes
	if len(show) == 0 {
		show = others
	}
	more := ""
	if len(show) > maxBlockers {
		more = fmt.Sprintf(" and %d more", len(show)-maxBlockers)
		show = show[:maxBlockers]
	}
	return strings.Join(show, ", ") + more
}

// blockerKind says why an entry of a pod dir stays.
func (s *Snapshot) blockerKind(p, rel string) string {
	e, _ := s.Lookup(p)
	switch parts := strings.Split(rel, "/"); {
	case s.mountPoints[p]:
		return "mounted"
	case parts[0] == "volumes" && len(parts) == 3 && e.Type != TypeDir:
		return "a " + e.Type + " where the kubelet makes a volume directory"
	case parts[0] == "volumes" && len(parts) == 4 && parts[3] == "vol_data.json":
		return "vol_data.json the kubelet did not remove"
	case e.Type == TypeDir:
		return "empty dir"
	}
	return e.Type
}

func mountDetail(m mountinfo.Mount) string {
	return m.FSType + " from " + source(m)
}

// source is findmnt's SOURCE[root] notation: a bind mount of a sub-dir
// shows which one.
func source(m mountinfo.Mount) string {
	s := quote(m.Source)
	if m.Root != "/" && m.Root != "" {
		s += "[" + m.Root + "]"
	}
	return s
}

func mountLine(m mountinfo.Mount) string {
	return "mount " + m.FSType + " " + quote(m.MountPoint) + " from " + source(m)
}

// quote leaves plain paths alone and Go-quotes the rest (spaces, control
// characters, quotes), so each line stays unambiguous.
func quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return r <= ' ' || r == '"' || r == '\\' || r == 0x7f || !strconv.IsPrint(r)
	}) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// Diff describes how the kubelet state went from before to after, one
// line per change: "- " for what went away, "+ " for what appeared.
// Mounts below the kubelet root come first ("- mount tmpfs /var/lib/...
// from tmpfs"), then entries ("+ dir pods/<uid>/volumes"), then changed
// vol_data.json contents; each group is sorted by path. Empty when nothing
// changed. Either snapshot may be nil (empty).
func Diff(before, after *Snapshot) string {
	if before == nil {
		before = &Snapshot{}
	}
	if after == nil {
		after = &Snapshot{}
	}
	var b strings.Builder
	mountKey := func(m mountinfo.Mount) [2]string { return [2]string{m.MountPoint, mountLine(m)} }
	diffMulti(&b, keys(before.under, mountKey), keys(after.under, mountKey))
	entryKey := func(e Entry) [2]string { return [2]string{e.Path, e.String()} }
	diffMulti(&b, keys(before.Entries, entryKey), keys(after.Entries, entryKey))
	var vkBefore, vkAfter [][2]string
	for p, v := range before.volData {
		vkBefore = append(vkBefore, [2]string{p, "vol_data " + quote(p) + " " + volDataLine(v)})
	}
	for p, v := range after.volData {
		vkAfter = append(vkAfter, [2]string{p, "vol_data " + quote(p) + " " + volDataLine(v)})
	}
	diffMulti(&b, vkBefore, vkAfter)
	return b.String()
}

// volDataLine shows a vol_data.json on one line: compacted when it is JSON,
// Go-quoted otherwise.
func volDataLine(v VolData) string {
	var buf bytes.Buffer
	s := strconv.Quote(v.Raw)
	if json.Valid([]byte(v.Raw)) && json.Compact(&buf, []byte(v.Raw)) == nil {
		s = buf.String()
	}
	if v.Err != "" {
		s += " (" + v.Err + ")"
	}
	return s
}

func keys[T any](xs []T, key func(T) [2]string) [][2]string {
	out := make([][2]string, len(xs))
	for i, x := range xs {
		out[i] = key(x)
	}
	return out
}

// diffMulti writes the multiset difference of two lists of (sort key,
// line) pairs: a line present twice before and once after is one "- ".
func diffMulti(b *strings.Builder, before, after [][2]string) {
	count := map[[2]string]int{}
	for _, k := range before {
		count[k]--
	}
	for _, k := range after {
		count[k]++
	}
	changed := make([][2]string, 0, len(count))
	for k, n := range count {
		if n != 0 {
			changed = append(changed, k)
		}
	}
	sort.Slice(changed, func(i, j int) bool {
		ni, nj := count[changed[i]], count[changed[j]]
		if changed[i][0] != changed[j][0] {
			return changed[i][0] < changed[j][0]
		}
		if (ni < 0) != (nj < 0) {
			return ni < 0 // removals first
		}
		return changed[i][1] < changed[j][1]
	})
	for _, k := range changed {
		n, sign := count[k], "+ "
		if n < 0 {
			n, sign = -n, "- "
		}
		for ; n > 0; n-- {
			b.WriteString(sign + k[1] + "\n")
		}
	}
}

// String is a readable listing for report evidence: the mounts below the
// kubelet root, the tree of pods/ and plugins/, and the vol_data.json
// contents.
func (s *Snapshot) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kubelet root %s", quote(s.KubeletRoot))
	if s.ResolvedRoot != s.KubeletRoot {
		fmt.Fprintf(&b, " (resolved %s)", quote(s.ResolvedRoot))
	}
	fmt.Fprintf(&b, ", mount table %s", s.MountinfoPath)
	if !s.Taken.IsZero() {
		fmt.Fprintf(&b, ", taken %s", s.Taken.UTC().Format(time.RFC3339Nano))
	}
	fmt.Fprintf(&b, "\nmounts below the kubelet root (%d):\n", len(s.under))
	for _, m := range s.under {
		fmt.Fprintf(&b, "  %s %s from %s\n", m.FSType, quote(m.MountPoint), source(m))
	}
	fmt.Fprintf(&b, "entries in pods/ and plugins/ (%d", len(s.Entries))
	if s.HiddenEntries > 0 {
		fmt.Fprintf(&b, ", %d inside mount points not listed", s.HiddenEntries)
	}
	b.WriteString("):\n")
	for _, e := range s.Entries {
		b.WriteString("  " + e.String())
		if s.mountPoints[e.Path] {
			fmt.Fprintf(&b, " [mount point x%d]", s.MountCount(e.Path))
		}
		b.WriteString("\n")
	}
	vols := make([]string, 0, len(s.volData))
	for p := range s.volData {
		vols = append(vols, p)
	}
	sort.Strings(vols)
	fmt.Fprintf(&b, "vol_data.json files (%d):\n", len(vols))
	for _, p := range vols {
		fmt.Fprintf(&b, "  %s: %s\n", quote(p), volDataLine(s.volData[p]))
	}
	return b.String()
}

// VolumeDirs are the pod's pods/<uid>/volumes/<plugin>/<name> and
// volumeDevices/<plugin>/<name> entries: exactly what the kubelet's
// reconstruction lists at start, one reconstruction per entry.
func (p PodState) VolumeDirs() []string {
	var out []string
	for _, e := range p.Entries {
		rest := strings.TrimPrefix(e, "pods/"+p.UID+"/")
		parts := strings.Split(rest, "/")
		if len(parts) == 3 && (parts[0] == "volumes" || parts[0] == "volumeDevices") {
			out = append(out, e)
		}
	}
	return out
}
