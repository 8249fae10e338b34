package reconstruction

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

// klogError is a klog line at error level ("E1201 03:08:27.660933 ...") or
// one whose message says something failed.
var klogError = regexp.MustCompile(`^E\d{4} |failed|[Ee]rror`)

// maxQuoted bounds a log line quoted in a headline.
const maxQuoted = 300

// lastKubeletError is the kubelet's last error line about uid in log, ""
// when there is none: the kubelet's own words for why it left the pod's
// state (UnmountVolume.NewUnmounter failed ..., orphaned pod ... found, but
// ...).
// A klog error line (E...) is preferred over other lines that say
// something failed: the runtime library the kubelet links logs its own
// retries ("Failed to remove cgroup (will retry)") with the pod's UID too.
func lastKubeletError(log, uid string) string {
	last, lastE := "", ""
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, uid) && klogError.MatchString(line) {
			last = strings.TrimSpace(line)
			if strings.HasPrefix(line, "E") {
				lastE = last
			}
		}
	}
	if lastE != "" {
		last = lastE
	}
	if len(last) > maxQuoted {
		last = last[:maxQuoted] + "…"
	}
	return last
}

// leftoverHeadline is the one-line failure of old pods not cleaned up:
// what each UID left, and the kubelet's last error line for that UID when
// the node can show its log.
func (s *Scenario) leftoverHeadline(ctx context.Context, left []nodestate.Leftover) string {
	log, _ := s.hopWholeLog(ctx)
	var parts []string
	quoted := map[string]bool{}
	shown := left
	if len(shown) > maxLeftovers {
		shown = shown[:maxLeftovers]
	}
	for _, l := range shown {
		p := l.String()
		if log != "" && !quoted[l.UID] {
			quoted[l.UID] = true
			if line := lastKubeletError(log, l.UID); line != "" {
				p += "; the kubelet logged: " + line
			}
		}
		parts = append(parts, p)
	}
	if n := len(left) - len(shown); n > 0 {
		parts = append(parts, fmt.Sprintf("%d more in the evidence", n))
	}
	return strings.Join(parts, "; ")
}

// maxLeftovers is how many leftovers a headline names.
const maxLeftovers = 3

// snapshotFailure records a failed snapshot's command in the evidence and
// returns the error's one-line text for a headline.
func snapshotFailure(sc *scenarios.StepContext, err error) string {
	var se *nodestate.SnapshotError
	if errors.As(err, &se) {
		r := se.Result
		sc.Evidence(reports.Evidence{Name: "the failed snapshot command", Kind: "text",
			Text: fmt.Sprintf("$ %s\nexit %d\nstderr:\n%s", r.CommandLine(), r.ExitCode, r.Stderr)})
	}
	return err.Error()
}

// unstagedLine is, when the volumes' driver keeps no data across an
// unstage (storage.Volumes.UnstageLosesData), the kubelet's log line
// saying it unstaged PV pv during this hop: while a fault's Stop ran with
// the old kubelet up (recordUnstagedInStop), or since the hop started the
// new kubelet (hopWholeLog: a witness start of the metrics race may have
// restarted it since). "" otherwise, or when the node cannot show its
// kubelet's log.
func (s *Scenario) unstagedLine(ctx context.Context, pv string) string {
	if line := s.unstagedInStop[pv]; line != "" {
		return line
	}
	if !s.volumes.UnstageLosesData {
		return ""
	}
	log, err := s.hopWholeLog(ctx)
	if err != nil {
		return ""
	}
	return findUnmountDevice(log, pv)
}

// hopWholeLog is all the hop's kubelet logged since the hop started it.
// The node shows the log since the kubelet's last start only; once a
// witness start of the metrics race (witness.go) restarted it, the hop's
// own start's log (hopStartLog) comes first: the unstage of a volume
// whose pod was force-deleted, or the last error about a pod, was logged
// there, before the witness.
func (s *Scenario) hopWholeLog(ctx context.Context) (string, error) {
	ln, ok := s.node.(nodes.WithKubeletLog)
	if !ok {
		return "", errNoKubeletLog
	}
	log, err := ln.KubeletLog(ctx)
	if s.hopStartLog == nil {
		return log, err
	}
	if err != nil {
		return *s.hopStartLog, nil
	}
	return *s.hopStartLog + "\n" + log, nil
}

// unstageLogMark is how much of the running kubelet's log there is before
// a fault's Stop, so that recordUnstagedInStop reads only what the kubelet
// logged during it; -1 when no unstage can lose data or the log cannot be
// read.
func (s *Scenario) unstageLogMark(ctx context.Context) int {
	log, ok := s.kubeletLogForUnstage(ctx)
	if !ok {
		return -1
	}
	return len(log)
}

// recordUnstagedInStop keeps the lines the stopped kubelet logged after
// mark (unstageLogMark) saying it unstaged one of the run's PVs. A fault
// that force-deletes pods with the kubelet up (kill-during-publish) can
// see the old pod's volume unstaged before its replacement reaches the
// kubelet; with a driver that keeps no data across an unstage the marker
// is then gone before the hop's new kubelet starts, and only the old
// kubelet's log says why.
func (s *Scenario) recordUnstagedInStop(ctx context.Context, mark int) {
	if mark < 0 {
		return
	}
	log, ok := s.kubeletLogForUnstage(ctx)
	if !ok || len(log) < mark {
		return
	}
	for _, pv := range s.volumes.PVs {
		if line := findUnmountDevice(log[mark:], pv.Name); line != "" {
			if s.unstagedInStop == nil {
				s.unstagedInStop = map[string]string{}
			}
			s.unstagedInStop[pv.Name] = line
		}
	}
}

// kubeletLogForUnstage is the node's kubelet's log since that kubelet last
// started, when the volumes' driver keeps no data across an unstage and
// the node can show the log.
func (s *Scenario) kubeletLogForUnstage(ctx context.Context) (string, bool) {
	if !s.volumes.UnstageLosesData {
		return "", false
	}
	ln, ok := s.node.(nodes.WithKubeletLog)
	if !ok {
		return "", false
	}
	log, err := ln.KubeletLog(ctx)
	if err != nil {
		return "", false
	}
	return log, true
}

// restaged says why a volume's data is gone although reconstruction did
// its job, quoting the kubelet's unstage line.
func restaged(line string) string {
	return "the kubelet unstaged the volume after the old pod's cleanup, before the new pod reached it, and staged it again for the new pod; this driver's volumes keep no data across an unstage, where a disk keeps it, so the marker is read again (" + line + ")"
}

// findUnmountDevice is the line of log where the kubelet's operation
// generator reports PV pv's device unmounted (the CSI NodeUnstageVolume
// done): `UnmountDevice succeeded for volume "<pv>" (UniqueName: ...)`,
// the same words in every kubelet skewtest runs. "" when there is none.
func findUnmountDevice(log, pv string) string {
	return findVolumeLine(log, "UnmountDevice succeeded for volume", pv)
}

// findVolumeLine is the first line of log with msg about volume name,
// trimmed to maxQuoted; "" when there is none. The kubelet quotes the
// name as \"name\" in its structured lines and as "name" in the
// pending operations' errors: both are matched.
func findVolumeLine(log, msg, name string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, msg) && (strings.Contains(line, `"`+name+`"`) || strings.Contains(line, `"`+name+`\"`)) {
			line = strings.TrimSpace(line)
			if len(line) > maxQuoted {
				line = line[:maxQuoted] + "…"
			}
			return line
		}
	}
	return ""
}

// grepLines are the last n lines of text that contain s.
func grepLines(text, s string, n int) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}
