package reports

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
)

// Per-command cap on the output lines a report shows; the rest stays in the
// artifacts. Evidence text is capped too, more generously, so that a report
// still fits in a GitHub comment.
const (
	maxCommandLines  = 40
	maxEvidenceLines = 100
)

// WriteMarkdown writes the run's sign-off report as GitHub-flavoured
// Markdown, meant to be pasted into an enhancement issue: title and
// verdict, environment, binaries, per-hop timings and metrics, expected and
// unexpected deviations, then every step with its commands and evidence.
// The output depends only on run.
func WriteMarkdown(w io.Writer, run *Run) error {
	if run == nil {
		return errors.New("reports: nil run")
	}
	m := &mdWriter{run: run, matrix: isMatrix(run)}
	m.header()
	m.matrixTable()
	m.trails()
	m.environment()
	m.binaries()
	m.hops()
	m.phases()
	m.metrics()
	m.deviations()
	m.steps()
	m.footer()
	_, err := io.WriteString(w, m.b.String())
	return err
}

type mdWriter struct {
	b   strings.Builder
	run *Run
	// matrix is set when the report opens with the from × to table.
	matrix bool
}

func (m *mdWriter) printf(format string, args ...any) { fmt.Fprintf(&m.b, format, args...) }
func (m *mdWriter) line(s string)                     { m.b.WriteString(s); m.b.WriteByte('\n') }

// verdictLabel is the inline label of a verdict; the three outcomes a
// reader must tell apart differ in symbol and words.
func verdictLabel(v Verdict) string {
	switch v {
	case Pass:
		return "✅ pass"
	case PassWithExpectedDeviations:
		return "⚠️ pass with expected deviations"
	case Fail:
		return "❌ fail"
	case Skipped:
		return "⏭️ skipped"
	case "":
		return "❔ no verdict"
	}
	return "❔ " + mdText(string(v))
}

func (m *mdWriter) header() {
	r := m.run
	scenario := mdCode(r.Scenario)
	if scenario == "" {
		scenario = "(unnamed scenario)"
	}
	m.printf("# skewtest %s: %s\n\n", scenario, strings.ToUpper(verdictLabel(r.Verdict)))
	facts := []string{"**Plan:** " + mdText(fmtPlan(r.Plan, " → "))}
	if r.Provider != "" {
		facts = append(facts, "**Provider:** "+mdText(r.Provider))
	}
	if r.Node != "" {
		facts = append(facts, "**Node:** "+mdCode(r.Node))
	}
	if r.ID != "" {
		facts = append(facts, "**Run:** "+mdCode(r.ID))
	}
	m.line(strings.Join(facts, " · "))
	m.line("")
	// A tour's hops run on several nodes at once: their paths read in
	// plan order only per trail, in the hop table.
	if paths := ReconstructionPaths(r); paths != "" && len(r.Trails) == 0 {
		m.line("**Reconstruction path of each kubelet, from its own log:** " + mdText(paths))
		m.line("")
	}
	exp, unexp := deviations(r)
	switch r.Verdict {
	case Fail:
		m.line("> [!CAUTION]")
		failure := oneLine(r.Failure)
		if failure == "" {
			failure = "(no failure recorded)"
		}
		m.line("> **Failure:** " + mdText(failure))
		if len(unexp) > 0 {
			m.line(">")
			m.printf("> %s seen; see **Unexpected deviations** below.\n", plural(len(unexp), "unexpected deviation"))
		}
		m.line("")
	case PassWithExpectedDeviations:
		m.line("> [!WARNING]")
		m.printf("> Passed with %s. The scenario documents them and they do not fail the run; see **Expected deviations** below.\n\n",
			plural(len(exp), "expected deviation"))
	case Skipped:
		m.line("> [!NOTE]")
		m.line("> The run was skipped: no check ran, so it proves nothing.")
		m.line("")
	}
	if n := len(r.Unreached); n > 0 && len(r.Trails) == 0 {
		m.line("> [!NOTE]")
		m.printf("> %s of the plan not reached, so not judged; the verdict is that of the hops that were. See **Hops** below for why.\n\n", plural(n, "hop"))
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func (m *mdWriter) environment() {
	r := m.run
	m.line("## Environment and versions")
	m.line("")
	rows := [][]string{
		{"Run ID", orDash(mdCode(r.ID))},
		{"Scenario", orDash(mdCode(r.Scenario))},
		{"Provider", orDash(mdText(r.Provider))},
		{"Node", orDash(mdCode(r.Node))},
		{"Plan", mdText(fmtPlan(r.Plan, " → "))},
	}
	for _, kv := range r.Environment {
		rows = append(rows, []string{mdText(kv.Key), orDash(mdText(kv.Value))})
	}
	duration := "—"
	if d, ok := span(r.Started, r.Finished); ok {
		duration = fmtDuration(d)
	}
	rows = append(rows,
		[]string{"Started", fmtTime(r.Started)},
		[]string{"Finished", fmtTime(r.Finished)},
		[]string{"Duration", duration},
	)
	m.table([]string{"Item", "Value"}, rows)
}

func (m *mdWriter) binaries() {
	m.line("## Binaries")
	m.line("")
	if len(m.run.Binaries) == 0 {
		m.line("No binaries recorded.")
		m.line("")
		return
	}
	var rows [][]string
	for _, b := range m.run.Binaries {
		source := orDash(mdCode(b.Source))
		if b.BuildTags != "" {
			source += " built with " + mdCode("-tags "+b.BuildTags)
		}
		if b.PatchSHA256 != "" {
			source += "; " + patchCell(b)
		}
		rows = append(rows, []string{mdText(b.Component), orDash(mdText(b.Version)), source, orDash(mdCode(shortSHA(b.SHA256)))})
	}
	m.table([]string{"Component", "Version", "Source", "SHA-256 (short)"}, rows)
}

// patchCell says which diff a patched binary has and what it touched.
func patchCell(b Binary) string {
	if b.PatchFiles == "" {
		return "empty patch " + mdCode("sha256:"+shortSHA(b.PatchSHA256)) + " (the unpatched source, built as patches are)"
	}
	var files []string
	for _, f := range strings.Split(b.PatchFiles, ",") {
		files = append(files, mdCode(f))
	}
	return "patch " + mdCode("sha256:"+shortSHA(b.PatchSHA256)) + " touching " + strings.Join(files, ", ")
}

// phases renders the run-level timings (bring-up, teardown, whole run).
func (m *mdWriter) phases() {
	if len(m.run.Timings) == 0 {
		return
	}
	m.line("## Run phases")
	m.line("")
	var rows [][]string
	for _, t := range m.run.Timings {
		rows = append(rows, []string{mdText(t.Phase), fmtSeconds(t.Duration)})
	}
	m.table([]string{"Phase", "Seconds"}, rows)
}

func (m *mdWriter) hops() {
	m.line("## Hops")
	m.line("")
	if len(m.run.Hops) == 0 {
		m.line("No hops recorded.")
		m.line("")
		return
	}
	// Phases may differ per hop: columns are their union, in first-seen
	// order.
	var phases []string
	seen := map[string]bool{}
	for _, h := range m.run.Hops {
		for _, t := range h.Timings {
			if !seen[t.Phase] {
				seen[t.Phase] = true
				phases = append(phases, t.Phase)
			}
		}
	}
	withNode := false
	for _, h := range m.run.Hops {
		withNode = withNode || h.Node != ""
	}
	header := []string{"Hop"}
	if withNode {
		header = append(header, "Node")
	}
	header = append(header, "From", "To", "Direction")
	withPath := false
	for _, h := range m.run.Hops {
		withPath = withPath || h.ReconstructionPath != ""
	}
	if withPath {
		header = append(header, "Reconstruction")
	}
	for _, p := range phases {
		header = append(header, mdText(p)+" (s)")
	}
	header = append(header, "Verdict")
	var rows [][]string
	for _, h := range m.run.Hops {
		// The anchor lets the matrix table and the sign-off page link to
		// this hop's row.
		row := []string{fmt.Sprintf(`<a id="%s"></a>%d`, HopAnchor(h), h.Number)}
		if withNode {
			row = append(row, orDash(mdCode(h.Node)))
		}
		row = append(row, orDash(mdText(withGates(h.From, h.FromGates))), orDash(mdText(withGates(h.To, h.ToGates))), orDash(mdText(h.Direction)))
		if withPath {
			row = append(row, pathCell(h.ReconstructionPath))
		}
		for _, p := range phases {
			cell := "—"
			for _, t := range h.Timings {
				if t.Phase == p {
					cell = fmtSeconds(t.Duration)
					break
				}
			}
			row = append(row, cell)
		}
		row = append(row, verdictLabel(h.Verdict))
		rows = append(rows, row)
	}
	m.table(header, rows)
	if len(phases) > 0 {
		m.line("Cleanup phases are measured from the kubelet's start.")
		m.line("")
	}
	var notes []string
	for _, h := range m.run.Hops {
		if h.Restored != "" {
			notes = append(notes, fmt.Sprintf("Before hop %d, restored: %s", h.Number, mdText(oneLine(h.Restored))))
		}
	}
	if !m.matrix {
		for _, u := range m.run.Unreached {
			notes = append(notes, fmt.Sprintf("⛔ %s (%s → %s) not reached: %s", unreachedName(u), mdText(u.From), mdText(u.To), orDash(mdText(oneLine(u.Reason)))))
		}
	}
	for _, n := range notes {
		m.line("- " + n)
	}
	if len(notes) > 0 {
		m.line("")
	}
	for _, h := range m.run.Hops {
		if len(h.OldPodUIDs) == 0 {
			continue
		}
		uids := make([]string, len(h.OldPodUIDs))
		for i, u := range h.OldPodUIDs {
			uids[i] = mdCode(u)
		}
		m.printf("- Hop %d force-deleted %s while the kubelet was stopped: %s\n", h.Number, plural(len(uids), "pod"), strings.Join(uids, ", "))
	}
	for _, h := range m.run.Hops {
		if len(h.OldPodUIDs) > 0 {
			m.line("")
			break
		}
	}
}

// pathCell is a hop's reconstruction path as a table cell; "both" is an
// error and looks like one.
func pathCell(path string) string {
	if path == "both" {
		return "❌ both"
	}
	return orDash(mdText(path))
}

func (m *mdWriter) metrics() {
	m.line("## Kubelet metrics")
	m.line("")
	var rows [][]string
	for _, h := range m.run.Hops {
		for _, x := range h.Metrics {
			value := "_" + absentText(x) + "_"
			if x.Present {
				value = fmtValue(x.Value)
			}
			verdict := "—"
			if x.Verdict != "" {
				verdict = verdictLabel(x.Verdict)
			}
			rows = append(rows, []string{fmt.Sprint(h.Number), mdCode(x.Name), value, orDash(mdText(x.Expected)), verdict, orDash(mdText(x.Reason))})
		}
	}
	if len(rows) == 0 {
		m.line("No metrics recorded.")
		m.line("")
		return
	}
	m.table([]string{"Hop", "Metric", "Value", "Expected", "Verdict", "Reason"}, rows)
}

func (m *mdWriter) deviations() {
	exp, unexp := deviations(m.run)
	m.line("## ⚠️ Expected deviations")
	m.line("")
	if len(exp) == 0 {
		m.line("None.")
		m.line("")
	} else {
		m.line("Observed values that differ from the ideal in ways the scenario documents. They do **not** fail the run, and they are **not** a plain pass either.")
		m.line("")
		m.deviationTable(exp)
	}
	m.line("## ❌ Unexpected deviations")
	m.line("")
	if len(unexp) == 0 {
		m.line("None.")
		m.line("")
		return
	}
	m.deviationTable(unexp)
}

func (m *mdWriter) deviationTable(rows []deviationRow) {
	var cells [][]string
	for _, d := range rows {
		check := mdText(d.Check)
		if d.Metric {
			check = mdCode(d.Check)
		}
		cells = append(cells, []string{mdText(d.Where), orDash(check), orDash(mdText(d.Expected)), orDash(mdText(d.Observed)), orDash(mdText(d.Reason))})
	}
	m.table([]string{"Where", "Check", "Expected", "Observed", "Reason"}, cells)
}

func (m *mdWriter) steps() {
	m.line("## Steps")
	m.line("")
	if len(m.run.Steps) == 0 {
		m.line("No steps recorded.")
		m.line("")
		return
	}
	for i, s := range m.run.Steps {
		m.step(i, s)
	}
}

func (m *mdWriter) step(i int, s Step) {
	paren := verdictLabel(s.Verdict)
	if d, ok := span(s.Started, s.Finished); ok {
		paren = fmtDuration(d) + ", " + paren
	}
	name := mdText(s.Name)
	if name == "" {
		name = "(unnamed step)"
	}
	m.printf("### %d. %s (%s)\n\n", stepNumber(s, i), name, paren)

	var facts []string
	if s.Hop > 0 {
		facts = append(facts, fmt.Sprintf("Hop %d", s.Hop))
	}
	if !s.Started.IsZero() {
		facts = append(facts, "started "+fmtTime(s.Started))
	}
	if len(facts) > 0 {
		m.line("_" + strings.Join(facts, " · ") + "_")
		m.line("")
	}

	label := "**Error:**"
	if s.Verdict == Skipped {
		label = "**Not reached:**"
	}
	if e := sanitize(s.Error); strings.TrimSpace(e) != "" {
		if !strings.Contains(strings.TrimSpace(e), "\n") {
			m.line(label + " " + mdText(e))
			m.line("")
		} else {
			m.line(label)
			m.line("")
			m.fence("text", e)
		}
	}

	if s.Verdict == Skipped && s.Error == "" && len(s.Notes) == 0 && len(s.Commands) == 0 && len(s.Evidence) == 0 && len(s.Deviations) == 0 {
		m.line("Not run: an earlier step failed.")
		m.line("")
		return
	}

	var items []string
	for _, n := range s.Notes {
		if t := mdLine(n); t != "" {
			items = append(items, t)
		}
	}
	for _, d := range s.Deviations {
		if d.IsExpected() {
			items = append(items, "⚠️ **Expected deviation** "+mdText(deviationText(d))+". _Reason:_ "+mdText(d.Reason))
		} else {
			items = append(items, "❌ **Unexpected deviation** "+mdText(deviationText(d)))
		}
	}
	for _, it := range items {
		m.line("- " + it)
	}
	if len(items) > 0 {
		m.line("")
	}

	if len(s.Commands) > 0 {
		m.line("**Commands**")
		m.line("")
		for _, c := range s.Commands {
			m.command(c)
		}
	}

	if len(s.Evidence) > 0 {
		m.line("**Evidence**")
		m.line("")
		for _, e := range s.Evidence {
			m.evidence(e)
		}
	}
}

func (m *mdWriter) command(c Command) {
	if c.Node != "" && c.Node != m.run.Node {
		m.line("On " + mdCode(c.Node) + ":")
		m.line("")
	}
	var b strings.Builder
	cmd := splitLines(sanitize(c.Command))
	if len(cmd) == 0 {
		cmd = []string{""}
	}
	b.WriteString("$ " + cmd[0] + "\n")
	for _, l := range cmd[1:] {
		b.WriteString(l + "\n")
	}
	stdout := splitLines(sanitize(c.Stdout))
	stderr := splitLines(sanitize(c.Stderr))
	// Share the line budget; when both streams are long, stderr keeps up
	// to half of it since it usually says what went wrong.
	outBudget, errBudget := len(stdout), len(stderr)
	if outBudget+errBudget > maxCommandLines {
		errBudget = min(errBudget, maxCommandLines/2)
		outBudget = min(outBudget, maxCommandLines-errBudget)
		errBudget = maxCommandLines - outBudget
	}
	writeCapped(&b, stdout, outBudget)
	if len(stderr) > 0 {
		b.WriteString("[stderr]\n")
		writeCapped(&b, stderr, errBudget)
	}
	if c.ExitCode != 0 {
		fmt.Fprintf(&b, "[exit code %d]\n", c.ExitCode)
	}
	m.fence("console", b.String())
}

func writeCapped(b *strings.Builder, lines []string, budget int) {
	if len(lines) > budget {
		for _, l := range lines[:budget] {
			b.WriteString(l + "\n")
		}
		fmt.Fprintf(b, "… %d more lines, see artifacts\n", len(lines)-budget)
		return
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
}

func (m *mdWriter) evidence(e Evidence) {
	label := "**" + orDefault(mdText(e.Name), "(unnamed)") + "**"
	var extra []string
	if e.Kind != "" {
		extra = append(extra, mdText(e.Kind))
	}
	if e.Path != "" {
		p := relPath(m.run.ArtifactsDir, e.Path)
		extra = append(extra, "["+mdCode(p)+"]("+linkDest(p)+")")
	}
	if len(extra) > 0 {
		label += " (" + strings.Join(extra, ", ") + ")"
	}
	text := splitLines(sanitize(e.Text))
	if len(text) == 0 {
		m.line(label)
		m.line("")
		return
	}
	m.line(label + ":")
	m.line("")
	var b strings.Builder
	writeCapped(&b, text, min(len(text), maxEvidenceLines))
	info := "text"
	if e.Kind == "diff" {
		info = "diff"
	}
	m.fence(info, b.String())
}

// linkDest percent-encodes a relative path for a Markdown link
// destination, segment by segment, so spaces and parentheses cannot break
// the link.
func linkDest(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func (m *mdWriter) footer() {
	m.line("---")
	m.line("")
	s := "_Generated by skewtest"
	if m.run.ID != "" {
		s += " for run " + mdCode(m.run.ID)
	}
	if m.run.ArtifactsDir != "" {
		s += "; full outputs are in " + mdCode(m.run.ArtifactsDir)
	}
	m.line(s + "._")
}

// fence writes body in a fenced code block whose fence is longer than any
// backtick run in body, so no content line can close it.
func (m *mdWriter) fence(info, body string) {
	body = sanitize(body)
	if body != "" && !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	f := strings.Repeat("`", max(3, longestRun(body, '`')+1))
	m.line(f + info)
	m.b.WriteString(body)
	m.line(f)
	m.line("")
}

func longestRun(s string, c byte) int {
	best, cur := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			cur++
			best = max(best, cur)
		} else {
			cur = 0
		}
	}
	return best
}

// table writes a GitHub table. Cells are inline Markdown; newlines become
// spaces and every "|" is escaped, which GitHub honours inside code spans
// too.
func (m *mdWriter) table(header []string, rows [][]string) {
	cell := func(s string) string {
		s = strings.Join(strings.Fields(s), " ")
		return strings.ReplaceAll(s, "|", `\|`)
	}
	var b strings.Builder
	b.WriteString("|")
	for _, h := range header {
		b.WriteString(" " + cell(h) + " |")
	}
	b.WriteString("\n|")
	for range header {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("|")
		for i := range header {
			c := ""
			if i < len(r) {
				c = cell(r[i])
			}
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n")
	}
	m.b.WriteString(b.String())
	m.line("")
}

// mdEscaper backslash-escapes the ASCII punctuation that starts inline
// Markdown (emphasis, code, links, HTML, entities, strikethrough).
var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", `*`, `\*`, `_`, `\_`, `[`, `\[`, `]`, `\]`,
	`<`, `\<`, `&`, `\&`, `~`, `\~`,
)

// blockStart matches the start of a line that would open a block instead
// of text: a blockquote, a list item, an ATX heading, or a thematic break
// made of dashes.
var blockStart = regexp.MustCompile(`^(?:>|[-+](?: |$)|-{2,}|#{1,6}(?: |$)|[0-9]{1,9}[.)](?: |$))`)

// mdText renders s as inline Markdown text on one line: sanitized,
// whitespace folded and inline markup escaped. It is for places where the
// text cannot start a line (table cells, after a label or a heading
// marker); mdLine is for the others.
func mdText(s string) string {
	return mdEscaper.Replace(oneLine(s))
}

// mdLine is mdText that may start a line, for example after "- " in a
// list: a start that would open a block (list item, heading, blockquote,
// thematic break) is escaped too.
func mdLine(s string) string {
	s = mdText(s)
	if m := blockStart.FindString(s); m != "" {
		// Escape the marker's punctuation: "1\. ", "\- ", "\# ", "\>".
		i := strings.LastIndexAny(m, ".)>")
		if m[0] == '-' || m[0] == '+' || m[0] == '#' {
			i = 0
		}
		return s[:i] + `\` + s[i:]
	}
	return s
}

// mdCode renders s as an inline code span on one line, with a delimiter
// longer than any backtick run inside; "" for an empty s.
func mdCode(s string) string {
	s = strings.Join(strings.Fields(sanitize(s)), " ")
	if s == "" {
		return ""
	}
	d := strings.Repeat("`", longestRun(s, '`')+1)
	if s[0] == '`' || s[len(s)-1] == '`' {
		s = " " + s + " "
	}
	return d + s + d
}

func orDash(s string) string { return orDefault(s, "—") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
