package reports

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ansiCSI matches ANSI escape sequences (colours, cursor moves) that tools
// such as systemctl and journalctl print; they carry no information in a
// report and would otherwise show up as \x1b[...m noise.
var ansiCSI = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]`)

// sanitize makes s safe for every output format: valid UTF-8, "\r\n" turned
// into "\n", ANSI escape sequences removed, and every other control
// character (which XML 1.0 forbids and terminals interpret) replaced by a
// visible escape such as \x07. Tabs and newlines are kept.
func sanitize(s string) string {
	if !needsSanitize(s) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = ansiCSI.ReplaceAllString(s, "")
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		case r == 0xfffe || r == 0xffff:
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsSanitize(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if (r < 0x20 && r != '\t' && r != '\n') || (r >= 0x7f && r <= 0x9f) || r == 0xfffe || r == 0xffff {
			return true
		}
	}
	return false
}

// oneLine sanitizes s and folds all its whitespace, newlines included, into
// single spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(sanitize(s)), " ")
}

// splitLines splits sanitized output into lines, ignoring one trailing
// newline. An empty string has no lines.
func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// fmtSeconds formats a phase duration in seconds: two decimals under ten
// seconds, one above.
func fmtSeconds(d time.Duration) string {
	s := d.Seconds()
	if math.Abs(s) < 10 {
		return strconv.FormatFloat(s, 'f', 2, 64)
	}
	return strconv.FormatFloat(s, 'f', 1, 64)
}

// fmtDuration formats a step or run duration for people: "2.35s" under a
// minute, "4m12s" above.
func fmtDuration(d time.Duration) string {
	if d < time.Minute {
		return fmtSeconds(d) + "s"
	}
	return d.Round(time.Second).String()
}

// span returns the duration between two instants, and false when either is
// unset or they are out of order.
func span(start, end time.Time) (time.Duration, bool) {
	if start.IsZero() || end.IsZero() || end.Before(start) {
		return 0, false
	}
	return end.Sub(start), true
}

// fmtTime formats an instant in UTC, or "—" when unset.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(time.RFC3339)
}

// fmtValue formats a metric value: integers without exponent or decimals,
// others in the shortest exact form.
func fmtValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// fmtPlan renders a version plan as "v1.37.2 → v1.36.3 → v1.37.2".
func fmtPlan(plan []string, sep string) string {
	if len(plan) == 0 {
		return "—"
	}
	return oneLine(strings.Join(plan, sep))
}

// shortSHA shortens a hex digest to 12 characters, like image references.
func shortSHA(s string) string {
	s = strings.TrimPrefix(s, "sha256:")
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// stepNumber is the step's Index, or its position when Index is unset.
func stepNumber(s Step, i int) int {
	if s.Index > 0 {
		return s.Index
	}
	return i + 1
}

// relPath turns an evidence path into one relative to the artifacts dir
// when it is absolute and inside it; the report lives in that dir, so
// relative links resolve next to it.
func relPath(artifactsDir, p string) string {
	if p == "" || !filepath.IsAbs(p) || artifactsDir == "" {
		return filepath.ToSlash(p)
	}
	dir, err := filepath.Abs(artifactsDir)
	if err != nil {
		return filepath.ToSlash(p)
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.ToSlash(p)
	}
	return filepath.ToSlash(rel)
}

// stepOK reports whether the step's own verdict is a pass of either kind.
func stepOK(s Step) bool { return s.Verdict == Pass || s.Verdict == PassWithExpectedDeviations }

// hasUnexpected reports whether the step saw a deviation the scenario did
// not document.
func hasUnexpected(s Step) bool {
	for _, d := range s.Deviations {
		if !d.IsExpected() {
			return true
		}
	}
	return false
}

// hasExpected reports whether the step saw a documented deviation.
func hasExpected(s Step) bool {
	for _, d := range s.Deviations {
		if d.IsExpected() {
			return true
		}
	}
	return false
}

// stepFailed reports whether a step counts as failed: its verdict is Fail,
// it has no verdict at all (it never finished, so it proved nothing), or it
// saw an unexpected deviation.
func stepFailed(s Step) bool {
	if s.Verdict == Skipped {
		return false
	}
	return !stepOK(s) || hasUnexpected(s)
}

// metricFailed reports whether a metric check failed. An empty verdict is a
// metric recorded for information only.
func metricFailed(m Metric) bool {
	switch m.Verdict {
	case "", Pass, PassWithExpectedDeviations, Skipped:
		return false
	}
	return true
}

// stepFailure is the one-line "name: error" of a failed step.
func stepFailure(s Step) string {
	name := oneLine(s.Name)
	if e := oneLine(s.Error); e != "" {
		return name + ": " + e
	}
	for _, d := range s.Deviations {
		if !d.IsExpected() {
			return name + ": unexpected deviation: " + deviationText(d)
		}
	}
	if s.Verdict == "" {
		return name + ": no verdict recorded (the step did not finish)"
	}
	return name + ": failed"
}

// deviationText is "check: expected X, observed Y" on one line.
func deviationText(d Deviation) string {
	return oneLine(d.Check) + ": expected " + oneLine(d.Expected) + ", observed " + oneLine(d.Observed)
}

// metricText is "metric NAME = VALUE, expected E" on one line.
func metricText(m Metric) string {
	s := "metric " + oneLine(m.Name) + " = "
	if m.Present {
		s += fmtValue(m.Value)
	} else {
		s += absentText(m)
	}
	if m.Expected != "" {
		s += ", expected " + oneLine(m.Expected)
	}
	return s
}

// cleanupTime is a hop's time to cleanup: the longest phase whose name says
// something is gone or cleaned up ("old mounts gone", "old pod dirs gone").
func cleanupTime(h Hop) (time.Duration, bool) {
	var best time.Duration
	found := false
	for _, t := range h.Timings {
		p := strings.ToLower(t.Phase)
		if strings.Contains(p, "gone") || strings.Contains(p, "clean") {
			if !found || t.Duration > best {
				best = t.Duration
			}
			found = true
		}
	}
	return best, found
}

// deviationRow is one deviation, from a step or a metric, with where it was
// seen.
type deviationRow struct {
	Where    string
	Hop      int // the hop's Number; 0 outside hops
	Check    string
	Metric   bool // Check is a metric name
	Expected string
	Observed string
	Reason   string
}

// deviations lists the run's deviations in order (steps first, then hop
// metrics), split into expected and unexpected ones. Metrics with verdict
// PassWithExpectedDeviations are expected deviations; failed metrics are
// unexpected ones.
func deviations(run *Run) (expected, unexpected []deviationRow) {
	// A step that checks metrics records each deviating metric as its own
	// deviation ("metric NAME") too; the hop's metric row already says it.
	metricRows := map[string]bool{}
	for _, h := range run.Hops {
		for _, m := range h.Metrics {
			metricRows[fmt.Sprintf("%d\x00metric %s\x00%s", h.Number, m.Name, m.Reason)] = true
		}
	}
	for i, s := range run.Steps {
		where := fmt.Sprintf("step %d (%s)", stepNumber(s, i), oneLine(s.Name))
		if s.Hop > 0 {
			where = fmt.Sprintf("hop %d, %s", s.Hop, where)
		}
		for _, d := range s.Deviations {
			if metricRows[fmt.Sprintf("%d\x00%s\x00%s", s.Hop, d.Check, d.Reason)] {
				continue
			}
			row := deviationRow{Where: where, Hop: s.Hop, Check: d.Check, Expected: d.Expected, Observed: d.Observed, Reason: d.Reason}
			if d.IsExpected() {
				expected = append(expected, row)
			} else {
				unexpected = append(unexpected, row)
			}
		}
	}
	for _, h := range run.Hops {
		for _, m := range h.Metrics {
			row := deviationRow{Where: fmt.Sprintf("hop %d, kubelet metrics", h.Number), Hop: h.Number, Check: m.Name, Metric: true, Expected: m.Expected, Reason: m.Reason}
			if m.Present {
				row.Observed = fmtValue(m.Value)
			} else {
				row.Observed = absentText(m)
			}
			switch {
			case m.Verdict == PassWithExpectedDeviations:
				expected = append(expected, row)
			case metricFailed(m):
				unexpected = append(unexpected, row)
			}
		}
	}
	return expected, unexpected
}

// absentText says why a metric has no value: a kubelet version that does
// not register it, or one that does and left it out of its /metrics
// (a failure).
func absentText(m Metric) string {
	if m.Verdict == Fail {
		return "missing from /metrics"
	}
	return "not exposed"
}
