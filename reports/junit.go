package reports

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// JUnit XML as Prow (Spyglass), TestGrid and Jenkins read it. Bodies are
// written as CDATA so multi-line outputs stay readable in the raw file;
// every string is sanitized first, so the file holds no character XML 1.0
// forbids.

type junitTestSuites struct {
	XMLName  xml.Name         `xml:"testsuites"`
	Name     string           `xml:"name,attr"`
	Tests    int              `xml:"tests,attr"`
	Failures int              `xml:"failures,attr"`
	Errors   int              `xml:"errors,attr"`
	Skipped  int              `xml:"skipped,attr"`
	Time     string           `xml:"time,attr"`
	Suites   []junitTestSuite `xml:"testsuite"`
}

type junitTestSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	TestCases  []junitTestCase `xml:"testcase"`
	SystemOut  *junitText      `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitTestCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",cdata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr,omitempty"`
}

type junitText struct {
	Text string `xml:",cdata"`
}

func text(s string) *junitText {
	if s == "" {
		return nil
	}
	return &junitText{Text: s}
}

// Limits on what a failure body quotes from the step's last commands.
const (
	junitLastCommands = 3
	junitOutputLines  = 30
	junitMessageRunes = 300
)

// WriteJUnit writes the run as JUnit XML: one <testsuite> named
// "skewtest <scenario> <plan>" with one <testcase> per step, named
// "[hop N] step name" ("step name" outside hops). Failed steps (and steps
// that saw an unexpected deviation) get a <failure> whose message is one
// line and whose body holds the error, the unexpected deviations and the
// last commands with their exit codes; skipped steps get <skipped/>; notes
// and expected deviations go to the test case's <system-out>. When the run
// failed but no step did (a failed metric, an abort outside any step), one
// more test case, "run verdict", carries the failure so dashboards never
// show a failed run as green. A run that failed because of its
// infrastructure (Run.Infrastructure) gets <error> instead of <failure>
// (type "InfrastructureError"), which TestGrid shows as a flake, not as a
// regression of the kubelet. A matrix tour (a run with trails) also gets
// one test case per (from, to) cell, "[matrix] FROM → TO", so TestGrid
// shows each pair on its own row: failed with its hop's failure, or
// skipped with why it was not reached.
func WriteJUnit(w io.Writer, run *Run) error {
	if run == nil {
		return errors.New("reports: nil run")
	}
	scenario := oneLine(run.Scenario)
	classname := "skewtest." + scenario
	name := "skewtest " + scenario
	if len(run.Plan) > 0 {
		name += " " + strings.ReplaceAll(fmtPlan(run.Plan, "→"), " ", "")
	}
	suite := junitTestSuite{
		Name:     strings.TrimSpace(name),
		Hostname: oneLine(run.Node),
	}
	if !run.Started.IsZero() {
		suite.Timestamp = run.Started.UTC().Format("2006-01-02T15:04:05")
	}
	suite.Properties = junitProperties(run)

	var stepsTotal time.Duration
	anyFailed := false
	for i, s := range run.Steps {
		d, _ := span(s.Started, s.Finished)
		stepsTotal += d
		tc := junitTestCase{
			Classname: classname,
			Name:      junitCaseName(s, i),
			Time:      junitSeconds(d),
			SystemOut: text(stepSystemOut(s)),
		}
		switch {
		case s.Verdict == Skipped:
			tc.Skipped = &junitSkipped{Message: truncateRunes(SkipReason(s), junitMessageRunes)}
			suite.Skipped++
		case stepFailed(s):
			suite.fail(&tc, run, &junitFailure{Message: truncateRunes(stepFailure(s), junitMessageRunes), Body: stepFailureBody(s)})
			anyFailed = true
		}
		suite.TestCases = append(suite.TestCases, tc)
	}
	if suite.matrixCases(run, classname) {
		anyFailed = true
	}
	if run.Verdict == Fail && !anyFailed {
		failure := oneLine(run.Failure)
		if failure == "" {
			failure = "the run failed"
		}
		tc := junitTestCase{Classname: classname, Name: "run verdict", Time: junitSeconds(0)}
		suite.fail(&tc, run, &junitFailure{Message: truncateRunes(failure, junitMessageRunes), Body: failure + "\n"})
		suite.TestCases = append(suite.TestCases, tc)
	}
	suite.Tests = len(suite.TestCases)
	total, ok := span(run.Started, run.Finished)
	if !ok {
		total = stepsTotal
	}
	suite.Time = junitSeconds(total)
	suite.SystemOut = text(suiteSystemOut(run))

	doc := junitTestSuites{
		Name:     "skewtest",
		Tests:    suite.Tests,
		Failures: suite.Failures,
		Errors:   suite.Errors,
		Skipped:  suite.Skipped,
		Time:     suite.Time,
		Suites:   []junitTestSuite{suite},
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("reports: encoding JUnit: %w", err)
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// matrixCases adds a tour's per-cell test cases, in hop order, then the
// unreached pairs, and reports whether one failed.
func (suite *junitTestSuite) matrixCases(run *Run, classname string) bool {
	if len(run.Trails) == 0 {
		return false
	}
	failed := false
	for _, h := range run.Hops {
		var d time.Duration
		failure := ""
		for _, s := range run.Steps {
			if s.Hop != h.Number {
				continue
			}
			sd, _ := span(s.Started, s.Finished)
			d += sd
			if failure == "" && stepFailed(s) {
				failure = stepFailure(s)
			}
		}
		tc := junitTestCase{Classname: classname + ".matrix", Name: matrixCaseName(withGates(h.From, h.FromGates), withGates(h.To, h.ToGates)), Time: junitSeconds(d)}
		if c, ok := cleanupTime(h); ok {
			tc.SystemOut = text(fmt.Sprintf("hop %d on %s: time to cleanup %ss\n", h.Number, oneLine(h.Node), fmtSeconds(c)))
		}
		switch {
		case h.Verdict == Fail:
			if failure == "" {
				failure = fmt.Sprintf("hop %d failed", h.Number)
			}
			suite.fail(&tc, run, &junitFailure{Message: truncateRunes(failure, junitMessageRunes), Body: failure + "\n"})
			failed = true
		case h.Verdict == Skipped:
			tc.Skipped = &junitSkipped{Message: "an earlier step failed"}
			suite.Skipped++
		}
		suite.TestCases = append(suite.TestCases, tc)
	}
	for _, u := range run.Unreached {
		suite.TestCases = append(suite.TestCases, junitTestCase{Classname: classname + ".matrix", Name: matrixCaseName(u.From, u.To), Time: junitSeconds(0),
			Skipped: &junitSkipped{Message: truncateRunes("not reached on "+oneLine(u.Node)+": "+oneLine(u.Reason), junitMessageRunes)}})
		suite.Skipped++
	}
	return failed
}

func matrixCaseName(from, to string) string {
	return "[matrix] " + oneLine(from) + " → " + oneLine(to)
}

// fail records f on tc: an <error> when the run failed because of its
// infrastructure, a <failure> otherwise.
func (suite *junitTestSuite) fail(tc *junitTestCase, run *Run, f *junitFailure) {
	if run.Infrastructure {
		f.Type = "InfrastructureError"
		tc.Error = f
		suite.Errors++
		return
	}
	f.Type = "Failure"
	tc.Failure = f
	suite.Failures++
}

func junitCaseName(s Step, i int) string {
	name := oneLine(s.Name)
	if name == "" {
		name = fmt.Sprintf("step %d", stepNumber(s, i))
	}
	if s.Hop > 0 {
		return fmt.Sprintf("[hop %d] %s", s.Hop, name)
	}
	return name
}

func junitSeconds(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return fmt.Sprintf("%.3f", d.Seconds())
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func junitProperties(run *Run) []junitProperty {
	props := []junitProperty{
		{"id", oneLine(run.ID)},
		{"scenario", oneLine(run.Scenario)},
		{"provider", oneLine(run.Provider)},
		{"node", oneLine(run.Node)},
		{"plan", fmtPlan(run.Plan, " → ")},
		{"verdict", oneLine(string(run.Verdict))},
	}
	if run.Failure != "" {
		props = append(props, junitProperty{"failure", oneLine(run.Failure)})
	}
	for _, kv := range run.Environment {
		props = append(props, junitProperty{"env." + oneLine(kv.Key), oneLine(kv.Value)})
	}
	for _, b := range run.Binaries {
		value := b.Source + " sha256:" + b.SHA256
		if b.PatchSHA256 != "" {
			value += " patch-sha256:" + b.PatchSHA256 + " patch-files:" + b.PatchFiles
		}
		props = append(props, junitProperty{"binary." + oneLine(b.Component) + "@" + oneLine(b.Version), oneLine(value)})
	}
	return props
}

func stepSystemOut(s Step) string {
	var b strings.Builder
	for _, n := range s.Notes {
		b.WriteString(oneLine(n) + "\n")
	}
	for _, d := range s.Deviations {
		if d.IsExpected() {
			fmt.Fprintf(&b, "expected deviation: %s (reason: %s)\n", deviationText(d), oneLine(d.Reason))
		}
	}
	if s.Verdict == PassWithExpectedDeviations && !hasExpected(s) {
		b.WriteString("passed with expected deviations; the suite's system-out lists them\n")
	}
	return b.String()
}

func stepFailureBody(s Step) string {
	var b strings.Builder
	if e := strings.TrimRight(sanitize(s.Error), "\n"); e != "" {
		b.WriteString(e + "\n")
	} else {
		b.WriteString(stepFailure(s) + "\n")
	}
	for _, d := range s.Deviations {
		if !d.IsExpected() {
			fmt.Fprintf(&b, "unexpected deviation: %s\n", deviationText(d))
		}
	}
	cmds := s.Commands
	if len(cmds) > junitLastCommands {
		fmt.Fprintf(&b, "\n(%d earlier commands not shown)\n", len(cmds)-junitLastCommands)
		cmds = cmds[len(cmds)-junitLastCommands:]
	}
	for _, c := range cmds {
		fmt.Fprintf(&b, "\n$ %s\n", strings.TrimRight(sanitize(c.Command), "\n"))
		writeTail(&b, "", c.Stdout)
		writeTail(&b, "[stderr]\n", c.Stderr)
		fmt.Fprintf(&b, "[exit code %d]\n", c.ExitCode)
	}
	return b.String()
}

// writeTail writes the last lines of an output: for a failure, the end is
// what matters.
func writeTail(b *strings.Builder, header, out string) {
	lines := splitLines(sanitize(out))
	if len(lines) == 0 {
		return
	}
	b.WriteString(header)
	if len(lines) > junitOutputLines {
		fmt.Fprintf(b, "… %d earlier lines, see artifacts\n", len(lines)-junitOutputLines)
		lines = lines[len(lines)-junitOutputLines:]
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
}

// suiteSystemOut is the run summary, the hop timings and metrics and the
// deviations, as plain text for readers of the XML alone.
func suiteSystemOut(run *Run) string {
	var b strings.Builder
	b.WriteString(Summary(run) + "\n")
	for _, h := range run.Hops {
		fmt.Fprintf(&b, "\nhop %d: %s → %s (%s): %s\n", h.Number, oneLine(withGates(h.From, h.FromGates)), oneLine(withGates(h.To, h.ToGates)), oneLine(h.Direction), oneLine(string(h.Verdict)))
		for _, t := range h.Timings {
			fmt.Fprintf(&b, "  %s: %ss\n", oneLine(t.Phase), fmtSeconds(t.Duration))
		}
		for _, m := range h.Metrics {
			fmt.Fprintf(&b, "  %s", metricText(m))
			if m.Verdict != "" {
				fmt.Fprintf(&b, " [%s]", oneLine(string(m.Verdict)))
			}
			if m.Reason != "" {
				fmt.Fprintf(&b, ": %s", oneLine(m.Reason))
			}
			b.WriteString("\n")
		}
	}
	exp, unexp := deviations(run)
	for _, group := range []struct {
		title string
		rows  []deviationRow
	}{{"expected deviations", exp}, {"unexpected deviations", unexp}} {
		if len(group.rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s:\n", group.title)
		for _, d := range group.rows {
			fmt.Fprintf(&b, "  %s: %s: expected %s, observed %s", d.Where, oneLine(d.Check), oneLine(d.Expected), oneLine(d.Observed))
			if d.Reason != "" {
				fmt.Fprintf(&b, " (reason: %s)", oneLine(d.Reason))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
