package reports

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

var fixtures = []struct {
	name    string
	run     func() *Run
	verdict Verdict
}{
	{"pass_csi", passingCSIRun, Pass},
	{"expected_deviations_local", localVolumeRun, PassWithExpectedDeviations},
	{"fail_csi_block", failedRun, Fail},
	{"matrix_tour", matrixRun, Fail},
	{"gated_signoff", gatedSignoffRun, Pass},
	// Cut from real runs: no golden may describe a run the harness cannot
	// produce.
	{"real_local_volume", realRunFunc("local-volume.run.json"), PassWithExpectedDeviations},
	{"real_catalogue_reboot", realRunFunc("catalogue-reboot.run.json"), Pass},
	{"real_catalogue_vol_data_deleted", realRunFunc("catalogue-vol-data-deleted.run.json"), PassWithExpectedDeviations},
}

var renderers = []struct {
	ext    string
	render func(io.Writer, *Run) error
}{
	{"md", WriteMarkdown},
	{"junit.xml", WriteJUnit},
	{"json", WriteJSON},
	{"summary.txt", func(w io.Writer, r *Run) error {
		_, err := io.WriteString(w, Summary(r)+"\n")
		return err
	}},
}

func render(t *testing.T, f func(io.Writer, *Run) error, run *Run) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := f(&b, run); err != nil {
		t.Fatalf("render: %v", err)
	}
	return b.Bytes()
}

func TestGolden(t *testing.T) {
	for _, fx := range fixtures {
		run := fx.run()
		if run.Verdict != fx.verdict {
			t.Fatalf("%s: fixture verdict %q, want %q", fx.name, run.Verdict, fx.verdict)
		}
		for _, r := range renderers {
			t.Run(fx.name+"/"+r.ext, func(t *testing.T) {
				got := render(t, r.render, run)
				if again := render(t, r.render, fx.run()); !bytes.Equal(got, again) {
					t.Fatalf("output differs between two renderings of the same run")
				}
				golden := filepath.Join("testdata", fx.name+"."+r.ext+".golden")
				if *update {
					if err := os.MkdirAll("testdata", 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test ./reports -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from the output (run go test ./reports -update after checking):\n%s", golden, firstDiff(string(want), string(got)))
				}
			})
		}
	}
}

// firstDiff describes the first differing line of two texts.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\nwant: %q\ngot:  %q", i+1, w, g)
		}
	}
	return "(no line differs)"
}

// mdBlocks splits Markdown into the lines outside fenced code blocks and
// the contents of each block, following CommonMark's rule that a closing
// fence has at least as many backticks as the opening one and nothing but
// spaces after them. It fails the test on an unclosed block.
func mdBlocks(t *testing.T, md string) (outside []string, blocks [][]string) {
	t.Helper()
	openRE := regexp.MustCompile("^ {0,3}(`{3,})[^`]*$")
	closeRE := regexp.MustCompile("^ {0,3}(`{3,}) *$")
	fence := 0
	var cur []string
	for i, l := range strings.Split(md, "\n") {
		if fence == 0 {
			if m := openRE.FindStringSubmatch(l); m != nil {
				fence = len(m[1])
				cur = nil
				continue
			}
			outside = append(outside, l)
			continue
		}
		if m := closeRE.FindStringSubmatch(l); m != nil && len(m[1]) >= fence {
			fence = 0
			blocks = append(blocks, cur)
			continue
		}
		cur = append(cur, l)
		_ = i
	}
	if fence != 0 {
		t.Fatalf("unclosed code block; it holds %d lines starting %q", len(cur), cur)
	}
	return outside, blocks
}

// cellCount counts a table row's unescaped pipes.
func cellCount(row string) int {
	n, bs := 0, 0
	for i := 0; i < len(row); i++ {
		switch row[i] {
		case '\\':
			bs++
			continue
		case '|':
			if bs%2 == 0 {
				n++
			}
		}
		bs = 0
	}
	return n
}

func TestMarkdownIsWellFormed(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			md := string(render(t, WriteMarkdown, fx.run()))
			for _, c := range md {
				if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
					t.Fatalf("control character %U in Markdown", c)
				}
			}
			outside, _ := mdBlocks(t, md)
			// A tab is fine in a code block (a real run's commands are
			// indented with them), not in a table or text.
			for _, l := range outside {
				if strings.Contains(l, "\t") {
					t.Fatalf("tab outside a code block: %q", l)
				}
			}
			// Every table's rows have as many cells as its header.
			tables := 0
			for i := 0; i < len(outside); i++ {
				if !strings.HasPrefix(outside[i], "|") {
					continue
				}
				tables++
				want := cellCount(outside[i])
				if i+1 >= len(outside) || !regexp.MustCompile(`^\|( --- \|)+$`).MatchString(outside[i+1]) {
					t.Fatalf("table header %q not followed by a delimiter row", outside[i])
				}
				for ; i < len(outside) && strings.HasPrefix(outside[i], "|"); i++ {
					if got := cellCount(outside[i]); got != want {
						t.Errorf("row %q has %d pipes, header has %d", outside[i], got, want)
					}
				}
			}
			if tables < 4 {
				t.Errorf("found %d tables, want at least 4", tables)
			}
			for _, h := range []string{"## Environment and versions", "## Binaries", "## Hops", "## Kubelet metrics", "## ⚠️ Expected deviations", "## ❌ Unexpected deviations", "## Steps"} {
				if !strings.Contains(md, "\n"+h+"\n") {
					t.Errorf("missing section %q", h)
				}
			}
		})
	}
}

func TestMarkdownPassing(t *testing.T) {
	md := string(render(t, WriteMarkdown, passingCSIRun()))
	for _, want := range []string{
		"# skewtest `csi-hostpath`: ✅ PASS\n",
		"| Plan | v1.37.2 → v1.36.3 → v1.37.2 |",
		"| Duration | 6m53s |",
		// Short digest in the table; the full one only in JSON.
		"| kubelet | v1.37.2 | `https://dl.k8s.io/release/v1.37.2/bin/linux/amd64/kubelet` | `" + fakeSHA("kubelet v1.37.2")[:12] + "` |",
		// Phase union in first-seen order, "—" where a hop lacks one, 1-2 decimals.
		"| Hop | From | To | Direction | Reconstruction | kubelet stop (s) | node Ready (s) | old mounts gone (s) | old pod dirs gone (s) | volume reconstructed (s) | Verdict |",
		`| <a id="hop-1"></a>1 | v1.37.2 | v1.36.3 | downgrade | new | 1.24 | 0.71 | 3.42 | 3.90 | — | ✅ pass |`,
		`| <a id="hop-2"></a>2 | v1.36.3 | v1.37.2 | upgrade | new | 1.10 | 0.65 | 2.80 | 12.3 | 2.10 | ✅ pass |`,
		"\n**Reconstruction path of each kubelet, from its own log:** new → new → new\n",
		"| 1 | `force_cleaned_failed_volume_operations_total` | _not exposed_ | — | — | informational; not exposed by v1.36.3 |",
		"### 5. verify cleanup (4.40s, ✅ pass)\n",
		"[`hop1/node-after.txt`](hop1/node-after.txt)",
		"```diff\n-/var/lib/kubelet/pods/" + uidA,
		"## ⚠️ Expected deviations\n\nNone.\n",
		"## ❌ Unexpected deviations\n\nNone.\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(md, fakeSHA("kubelet v1.37.2")) {
		t.Errorf("report shows the full digest; only 12 characters belong there")
	}
	if strings.Contains(md, "[!CAUTION]") || strings.Contains(md, "[!WARNING]") {
		t.Errorf("passing report carries a failure or deviation alert")
	}
}

// A patched kubelet's row names its diff and the files it touched; an
// empty patch (a mutation-testing control) says it is the unpatched
// source.
func TestMarkdownPatchedBinaries(t *testing.T) {
	run := passingCSIRun()
	run.Binaries = []Binary{
		{Component: "kubelet", Version: "v1.37.2", Source: "patch:fix.diff@v1.37.2", SHA256: fakeSHA("patched"), PatchSHA256: fakeSHA("fix.diff"), PatchFiles: "pkg/kubelet/kubelet.go,pkg/kubelet/new.go"},
		{Component: "kubelet", Version: "v1.37.2", Source: "patch:control.diff@v1.37.2", SHA256: fakeSHA("control"), PatchSHA256: fakeSHA("")},
	}
	md := string(render(t, WriteMarkdown, run))
	for _, want := range []string{
		"| kubelet | v1.37.2 | `patch:fix.diff@v1.37.2`; patch `sha256:" + fakeSHA("fix.diff")[:12] + "` touching `pkg/kubelet/kubelet.go`, `pkg/kubelet/new.go` | `" + fakeSHA("patched")[:12] + "` |",
		"| kubelet | v1.37.2 | `patch:control.diff@v1.37.2`; empty patch `sha256:" + fakeSHA("")[:12] + "` (the unpatched source, built as patches are) | `" + fakeSHA("control")[:12] + "` |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// Each kubelet's reconstruction path, read from its log: a column of the
// hop table, and one line under the title that reads like the plan. A
// replay of KEP-3756's sign-off (v1.28 → v1.27 → v1.28) says new → old →
// new; so does one binary whose middle entry turns the gate off.
func TestMarkdownReconstructionPaths(t *testing.T) {
	md := string(render(t, WriteMarkdown, gatedSignoffRun()))
	for _, want := range []string{
		"**Plan:** v1.28.15 → v1.28.15+NewVolumeManagerReconstruction=false → v1.28.15 · **Provider:** local",
		"\n**Reconstruction path of each kubelet, from its own log:** new → old → new\n",
		"| Hop | From | To | Direction | Reconstruction | old pod dirs gone (s) | Verdict |",
		`| <a id="hop-1"></a>1 | v1.28.15 | v1.28.15+NewVolumeManagerReconstruction=false | same | old | 5.10 | ✅ pass |`,
		`| <a id="hop-2"></a>2 | v1.28.15+NewVolumeManagerReconstruction=false | v1.28.15 | same | new | 4.20 | ✅ pass |`,
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}

	replay := &Run{Scenario: "reconstruction-csi", Plan: []string{"v1.28.15", "v1.27.16", "v1.28.15"}, InitialReconstructionPath: "new",
		Hops: []Hop{{Number: 1, From: "v1.28.15", To: "v1.27.16", Direction: "downgrade", ReconstructionPath: "old", Verdict: Pass},
			{Number: 2, From: "v1.27.16", To: "v1.28.15", Direction: "upgrade", ReconstructionPath: "new", Verdict: Pass}}}
	if got := ReconstructionPaths(replay); got != "new → old → new" {
		t.Errorf("sign-off replay paths %q, want new → old → new", got)
	}
	replay.Hops[1].ReconstructionPath = "both"
	md = string(render(t, WriteMarkdown, replay))
	if !strings.Contains(md, "| upgrade | ❌ both |") {
		t.Errorf("a kubelet with both paths' lines is not shown as an error:\n%s", md)
	}

	// Runs that read no path (older run.json files) have neither the
	// column nor the line; a matrix tour has the column only.
	none := &Run{Scenario: "s", Plan: []string{"v1.37.2", "v1.36.3"}, Hops: []Hop{{Number: 1, From: "v1.37.2", To: "v1.36.3", Direction: "downgrade"}}}
	if got := ReconstructionPaths(none); got != "" {
		t.Errorf("no path read, yet %q", got)
	}
	if md := string(render(t, WriteMarkdown, none)); strings.Contains(md, "Reconstruction") {
		t.Errorf("report of a run without paths mentions them:\n%s", md)
	}
	tour := matrixRun()
	tour.Hops[0].ReconstructionPath = "new"
	md = string(render(t, WriteMarkdown, tour))
	if strings.Contains(md, "Reconstruction path of each kubelet") || !strings.Contains(md, "| Reconstruction |") {
		t.Errorf("matrix tour: want the column and no plan-order line")
	}
}

func TestMarkdownExpectedDeviations(t *testing.T) {
	md := string(render(t, WriteMarkdown, localVolumeRun()))
	for _, want := range []string{
		"# skewtest `local-volume`: ⚠️ PASS WITH EXPECTED DEVIATIONS\n",
		"> [!WARNING]\n> Passed with 2 expected deviations.",
		// The pipe in the reason and the environment value is escaped.
		"unmount by path waits for the next reconcile \\| retry loop",
		"| Container runtime | containerd://2.2.0 \\| runc 1.3.0 |",
		"| hop 1, kubelet metrics | `reconstruct_volume_operations_errors_total` | 0 | 3 | " + localReason + " |",
		"| 1 | `reconstruct_volume_operations_errors_total` | 3 | 0 | ⚠️ pass with expected deviations | " + localReason + " |",
		"### 4. verify cleanup (15.0s, ⚠️ pass with expected deviations)\n",
		"- ⚠️ **Expected deviation** old mounts gone within 10s: expected \\<= 10s, observed 14.20s. _Reason:_",
		"$ curl -sk https://127.0.0.1:10250/metrics | grep ^reconstruct_volume\n",
		"## ❌ Unexpected deviations\n\nNone.\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Expected deviations are listed apart, not folded into a pass or a fail.
	exp := md[strings.Index(md, "## ⚠️ Expected deviations"):strings.Index(md, "## ❌ Unexpected deviations")]
	if !strings.Contains(exp, "old mounts gone within 10s") || !strings.Contains(exp, "reconstruct_volume_operations_errors_total") {
		t.Errorf("expected deviations section lacks a deviation:\n%s", exp)
	}
	if strings.Contains(md, "✅ PASS") || strings.Contains(md, "❌ FAIL") {
		t.Errorf("run with expected deviations titled as a plain pass or a fail")
	}
}

func TestMarkdownFailed(t *testing.T) {
	md := string(render(t, WriteMarkdown, failedRun()))
	podDir := "/var/lib/kubelet/pods/" + uidC
	for _, want := range []string{
		"# skewtest `csi-block`: ❌ FAIL\n",
		"> [!CAUTION]\n> **Failure:** verify cleanup: pod " + uidC + ": " + podDir,
		"### 4. verify cleanup (2m2s, ❌ fail)\n",
		"**Error:** pod " + uidC,
		"### 5. read kubelet metrics (⏭️ skipped)\n\n_Hop 1_\n\nNot run: an earlier step failed.\n",
		"### 8. verify cleanup (⏭️ skipped)\n",
		`| <a id="hop-2"></a>2 | v1.36.3 | v1.37.2 | upgrade | — | — | — | ⏭️ skipped |`,
		"**Reconstruction path of each kubelet, from its own log:** — → new → —\n",
		"$ rmdir " + podDir + "\n[stderr]\nrmdir: failed to remove '" + podDir + "': Directory not empty\n[exit code 1]\n```\n",
		// Control characters made visible, colour codes dropped.
		"bell:\\x07 nul:\\x00 colour:red\n",
		// 55 lines, 40 shown.
		"line 40\n… 15 more lines, see artifacts\n```",
		"| hop 1, step 4 (verify cleanup) | old pod dirs gone | within 120s of kubelet start | " + podDir + " still present | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(md, "line 41\n") {
		t.Errorf("report shows more than %d lines of a command", maxCommandLines)
	}
	// The stdout's own fence and table rows stay inside a code block.
	_, blocks := mdBlocks(t, md)
	found := false
	for _, b := range blocks {
		joined := strings.Join(b, "\n")
		if strings.Contains(joined, "\n```\n") && strings.Contains(joined, "\n| a | b |\n") {
			found = true
		}
	}
	if !found {
		t.Errorf("the stdout holding ``` and | is not kept whole inside one code block")
	}
	if strings.Contains(md, "\n````console\n$ rmdir") {
		t.Errorf("a command without backticks got a longer fence than needed")
	}
	if !strings.Contains(md, "\n````console\n$ findmnt") {
		t.Errorf("the command whose output holds ``` did not get a four-backtick fence")
	}
}

func TestMarkdownHelpers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "`plain`"},
		{"a`b", "``a`b``"},
		{"`x`", "`` `x` ``"},
		{"a ``` b", "````a ``` b````"},
		{"two\nlines", "`two lines`"},
		{"", ""},
	} {
		if got := mdCode(tc.in); got != tc.want {
			t.Errorf("mdCode(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, text, line string }{
		{"a_b*c", `a\_b\*c`, `a\_b\*c`},
		{"<none>", `\<none>`, `\<none>`},
		{"- item", "- item", `\- item`},
		{"# head", "# head", `\# head`},
		{"1. one", "1. one", `1\. one`},
		{"2) two", "2) two", `2\) two`},
		{"> quote", "> quote", `\> quote`},
		{"---", "---", `\---`},
		{"v1.37.2", "v1.37.2", "v1.37.2"},
		{"6.8.0-aws", "6.8.0-aws", "6.8.0-aws"},
		{"-1", "-1", "-1"},
		{"a >= 3", "a >= 3", "a >= 3"},
		{"#123 is fine", "#123 is fine", "#123 is fine"},
		{"a~b", `a\~b`, `a\~b`},
		{"multi\nline\ttext", "multi line text", "multi line text"},
	} {
		if got := mdText(tc.in); got != tc.text {
			t.Errorf("mdText(%q) = %q, want %q", tc.in, got, tc.text)
		}
		if got := mdLine(tc.in); got != tc.line {
			t.Errorf("mdLine(%q) = %q, want %q", tc.in, got, tc.line)
		}
	}
	var m mdWriter
	m.table([]string{"A", "B"}, [][]string{{mdCode("x|y"), mdText(`back\|slash`)}})
	if want := "| A | B |\n| --- | --- |\n| `x\\|y` | back\\\\\\|slash |\n\n"; m.b.String() != want {
		t.Errorf("table = %q, want %q", m.b.String(), want)
	}
	m = mdWriter{}
	m.fence("text", "a\n`````\nb")
	if want := "``````text\na\n`````\nb\n``````\n\n"; m.b.String() != want {
		t.Errorf("fence = %q, want %q", m.b.String(), want)
	}
}

func TestCommandOutputCap(t *testing.T) {
	var out, errs strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&out, "out %d\n", i)
		fmt.Fprintf(&errs, "err %d\n", i)
	}
	run := &Run{Scenario: "cap", Node: "n", Steps: []Step{{Index: 1, Name: "s", Verdict: Pass,
		Commands: []Command{{Command: "noisy", Stdout: out.String(), Stderr: errs.String(), ExitCode: 2, Node: "other"}}}}}
	md := string(render(t, WriteMarkdown, run))
	for _, want := range []string{"On `other`:\n", "out 20\n… 30 more lines, see artifacts\n[stderr]\nerr 1\n", "err 20\n… 30 more lines, see artifacts\n[exit code 2]\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(md, "out 21\n") || strings.Contains(md, "err 21\n") {
		t.Errorf("more than %d lines shown", maxCommandLines)
	}
}

// JUnit as a reader sees it, declared apart from the writer's structs.
type xSuites struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []xSuite `xml:"testsuite"`
}

type xSuite struct {
	Name       string `xml:"name,attr"`
	Tests      int    `xml:"tests,attr"`
	Failures   int    `xml:"failures,attr"`
	Errors     int    `xml:"errors,attr"`
	Skipped    int    `xml:"skipped,attr"`
	Time       string `xml:"time,attr"`
	Properties []struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	} `xml:"properties>property"`
	Cases     []xCase `xml:"testcase"`
	SystemOut string  `xml:"system-out"`
}

type xCase struct {
	Classname string `xml:"classname,attr"`
	Name      string `xml:"name,attr"`
	Time      string `xml:"time,attr"`
	Failure   *struct {
		Message string `xml:"message,attr"`
		Body    string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
	} `xml:"error"`
	Skipped   *struct{} `xml:"skipped"`
	SystemOut string    `xml:"system-out"`
}

func parseJUnit(t *testing.T, data []byte) xSuites {
	t.Helper()
	var s xSuites
	if err := xml.Unmarshal(data, &s); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, data)
	}
	if len(s.Suites) != 1 {
		t.Fatalf("%d test suites, want 1", len(s.Suites))
	}
	return s
}

func TestJUnitCounts(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		run                       *Run
		suite                     string
		tests, failures, skipped  int
		failedCase, passedWithOut string
	}{
		{name: "pass", run: passingCSIRun(), suite: "skewtest csi-hostpath v1.37.2→v1.36.3→v1.37.2", tests: 8},
		{name: "deviations", run: localVolumeRun(), suite: "skewtest local-volume v1.36.3→v1.37.2", tests: 5, passedWithOut: "[hop 1] verify cleanup"},
		{name: "fail", run: failedRun(), suite: "skewtest csi-block v1.37.2→v1.36.3→v1.37.2", tests: 8, failures: 1, skipped: 4, failedCase: "[hop 1] verify cleanup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := parseJUnit(t, render(t, WriteJUnit, tc.run))
			suite := s.Suites[0]
			if suite.Name != tc.suite {
				t.Errorf("suite name %q, want %q", suite.Name, tc.suite)
			}
			if suite.Tests != tc.tests || suite.Failures != tc.failures || suite.Skipped != tc.skipped {
				t.Errorf("suite attrs tests/failures/skipped = %d/%d/%d, want %d/%d/%d", suite.Tests, suite.Failures, suite.Skipped, tc.tests, tc.failures, tc.skipped)
			}
			if s.Tests != tc.tests || s.Failures != tc.failures || s.Skipped != tc.skipped {
				t.Errorf("testsuites attrs = %d/%d/%d, want %d/%d/%d", s.Tests, s.Failures, s.Skipped, tc.tests, tc.failures, tc.skipped)
			}
			var failures, skipped int
			for _, c := range suite.Cases {
				if c.Classname != "skewtest."+tc.run.Scenario {
					t.Errorf("case %q classname %q", c.Name, c.Classname)
				}
				if c.Failure != nil {
					failures++
					if c.Name != tc.failedCase {
						t.Errorf("case %q failed, want only %q to", c.Name, tc.failedCase)
					}
				}
				if c.Skipped != nil {
					skipped++
				}
				if c.Name == tc.passedWithOut {
					if c.Failure != nil || c.Skipped != nil {
						t.Errorf("case %q with expected deviations does not pass", c.Name)
					}
					if !strings.Contains(c.SystemOut, "expected deviation: old mounts gone within 10s") || !strings.Contains(c.SystemOut, "reconcile | retry loop") {
						t.Errorf("case %q system-out lacks its expected deviation: %q", c.Name, c.SystemOut)
					}
				}
			}
			if len(suite.Cases) != tc.tests || failures != tc.failures || skipped != tc.skipped {
				t.Errorf("counted cases/failures/skipped = %d/%d/%d, want %d/%d/%d", len(suite.Cases), failures, skipped, tc.tests, tc.failures, tc.skipped)
			}
		})
	}
}

func TestJUnitFailureDetails(t *testing.T) {
	s := parseJUnit(t, render(t, WriteJUnit, failedRun()))
	suite := s.Suites[0]
	var c *xCase
	for i := range suite.Cases {
		if suite.Cases[i].Failure != nil {
			c = &suite.Cases[i]
		}
	}
	if c == nil {
		t.Fatal("no failed case")
	}
	if c.Time != "121.500" {
		t.Errorf("time %q, want 121.500", c.Time)
	}
	msg := c.Failure.Message
	if strings.ContainsAny(msg, "\n\r") || !strings.Contains(msg, uidC) || !strings.HasPrefix(msg, "verify cleanup: pod ") {
		t.Errorf("failure message %q is not one line naming the UID", msg)
	}
	for _, want := range []string{
		"/var/lib/kubelet/pods/" + uidC + "/volumes/kubernetes.io~csi/pvc-4e5f6a7b/mount still mounted",
		"unexpected deviation: old pod dirs gone",
		"$ rmdir /var/lib/kubelet/pods/" + uidC + "\n[stderr]\nrmdir: failed to remove",
		"[exit code 1]",
		"| a | b |\nbell:\\x07 nul:\\x00 colour:red\n```\n[exit code 0]",
	} {
		if !strings.Contains(c.Failure.Body, want) {
			t.Errorf("failure body lacks %q:\n%s", want, c.Failure.Body)
		}
	}
	for _, c := range suite.Cases {
		if strings.HasPrefix(c.Name, "[hop 2] ") && c.Skipped == nil {
			t.Errorf("case %q after the failure is not skipped", c.Name)
		}
	}
	props := map[string]string{}
	for _, p := range suite.Properties {
		props[p.Name] = p.Value
	}
	if props["verdict"] != "fail" || !strings.Contains(props["failure"], uidC) || props["env.Volume kind"] != "CSI raw block" {
		t.Errorf("properties = %v", props)
	}
}

// A run that failed outside any step must not look green.
func TestJUnitRunFailureWithoutFailedStep(t *testing.T) {
	run := &Run{Scenario: "m", Steps: []Step{{Index: 1, Name: "read metrics", Hop: 1, Verdict: Pass}},
		Hops: []Hop{{Number: 1, Metrics: []Metric{{Name: "reconstruct_volume_operations_errors_total", Value: 1, Present: true, Expected: "0", Verdict: Fail}}}}}
	run.ComputeVerdict()
	s := parseJUnit(t, render(t, WriteJUnit, run))
	suite := s.Suites[0]
	if suite.Tests != 2 || suite.Failures != 1 || len(suite.Cases) != 2 {
		t.Fatalf("tests/failures/cases = %d/%d/%d, want 2/1/2", suite.Tests, suite.Failures, len(suite.Cases))
	}
	last := suite.Cases[1]
	if last.Name != "run verdict" || last.Failure == nil || !strings.Contains(last.Failure.Message, "reconstruct_volume_operations_errors_total = 1, expected 0") {
		t.Errorf("last case = %+v", last)
	}
}

// A run that failed because of its infrastructure is an <error> (a flake
// on TestGrid), in a step or in the run verdict, never a <failure>.
func TestJUnitInfrastructureFailureIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  *Run
		want string // the erroring case
	}{
		{"bring-up failed before any step", &Run{Scenario: "i", Verdict: Fail, Failure: "cluster bring-up: etcd did not start", Infrastructure: true}, "run verdict"},
		{"a step failed", &Run{Scenario: "i", Infrastructure: true, Steps: []Step{{Index: 1, Name: "deploy", Verdict: Fail, Error: "registry unreachable"}}}, "deploy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run.ComputeVerdict()
			s := parseJUnit(t, render(t, WriteJUnit, tc.run))
			suite := s.Suites[0]
			if suite.Errors != 1 || suite.Failures != 0 || s.Errors != 1 || s.Failures != 0 {
				t.Fatalf("errors/failures = suite %d/%d, testsuites %d/%d; want 1/0 for both", suite.Errors, suite.Failures, s.Errors, s.Failures)
			}
			var found bool
			for _, c := range suite.Cases {
				if c.Failure != nil {
					t.Errorf("case %q has a <failure>", c.Name)
				}
				if c.Error != nil {
					found = c.Name == tc.want && c.Error.Type == "InfrastructureError" && c.Error.Message != ""
				}
			}
			if !found {
				t.Errorf("no <error type=InfrastructureError> on case %q: %+v", tc.want, suite.Cases)
			}
		})
	}
	// The same run without the mark is a <failure>.
	run := &Run{Scenario: "i", Verdict: Fail, Failure: "hop 1: old mounts left"}
	run.ComputeVerdict()
	if s := parseJUnit(t, render(t, WriteJUnit, run)); s.Suites[0].Failures != 1 || s.Suites[0].Errors != 0 {
		t.Errorf("kubelet failure: failures/errors = %d/%d, want 1/0", s.Suites[0].Failures, s.Suites[0].Errors)
	}
}

func TestJUnitStripsForbiddenCharacters(t *testing.T) {
	run := &Run{Scenario: "ctl\x01", Steps: []Step{{Index: 1, Name: "n\x02ame", Verdict: Fail, Error: "bad\x1b\x0b\r\nthing\uffff",
		Commands: []Command{{Command: "x", Stdout: "]]> \x00 \xff", ExitCode: 3}}}}}
	run.ComputeVerdict()
	data := render(t, WriteJUnit, run)
	for _, b := range data {
		if b < 0x20 && b != '\n' {
			t.Fatalf("byte %#x in JUnit output", b)
		}
	}
	s := parseJUnit(t, data)
	c := s.Suites[0].Cases[0]
	if c.Name != `n\x02ame` || !strings.Contains(c.Failure.Body, "]]> \\x00 \uFFFD") {
		t.Errorf("case %q body %q", c.Name, c.Failure.Body)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			run := fx.run()
			data := render(t, WriteJSON, run)
			got, err := ReadJSON(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, run) {
				t.Errorf("round trip differs:\n%s", firstDiff(fmt.Sprintf("%+v", run), fmt.Sprintf("%+v", got)))
			}
			if again := render(t, WriteJSON, got); !bytes.Equal(again, data) {
				t.Errorf("re-encoding differs:\n%s", firstDiff(string(data), string(again)))
			}
		})
	}
	if !bytes.Contains(render(t, WriteJSON, passingCSIRun()), []byte(`"sha256": "`+fakeSHA("kubelet v1.37.2")+`"`)) {
		t.Errorf("JSON lacks the full digest")
	}
	if _, err := ReadJSON(strings.NewReader(`{"id": 1}`)); err == nil {
		t.Errorf("ReadJSON accepted a malformed run")
	}
	if _, err := ReadJSON(strings.NewReader(`{} {}`)); err == nil {
		t.Errorf("ReadJSON accepted trailing data")
	}
}

func TestJSONNonFiniteMetrics(t *testing.T) {
	run := &Run{Hops: []Hop{{Number: 1, Metrics: []Metric{
		{Name: "nan", Value: math.NaN(), Present: true},
		{Name: "inf", Value: math.Inf(1), Present: true},
		{Name: "neg", Value: math.Inf(-1), Present: true, Reason: "<none>"},
	}}}}
	data := render(t, WriteJSON, run)
	for _, want := range []string{`"value": "NaN"`, `"value": "+Inf"`, `"value": "-Inf"`, `"reason": "<none>"`} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("JSON lacks %s:\n%s", want, data)
		}
	}
	got, err := ReadJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	m := got.Hops[0].Metrics
	if !math.IsNaN(m[0].Value) || !math.IsInf(m[1].Value, 1) || !math.IsInf(m[2].Value, -1) || m[2].Reason != "<none>" || !m[2].Present {
		t.Errorf("metrics read back as %+v", m)
	}
}

func TestWriteAll(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "artifacts")
	run := failedRun()
	paths, err := WriteAll(dir, run)
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{"report.md", "junit_skewtest_csi-block.xml", "run.json"}
	if len(paths) != len(wantNames) {
		t.Fatalf("paths = %q", paths)
	}
	for i, p := range paths {
		if p != filepath.Join(dir, wantNames[i]) {
			t.Errorf("path %d = %q, want %q", i, p, filepath.Join(dir, wantNames[i]))
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s mode %v, want 0644", p, fi.Mode().Perm())
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("dir holds %d entries, want 3 (no temporary files left)", len(entries))
	}
	if run.ArtifactsDir != "" {
		t.Errorf("WriteAll modified the run: ArtifactsDir %q", run.ArtifactsDir)
	}
	want := failedRun()
	want.ArtifactsDir = dir
	md, _ := os.ReadFile(paths[0])
	if !bytes.Equal(md, render(t, WriteMarkdown, want)) {
		t.Errorf("report.md differs from WriteMarkdown")
	}
	if !strings.Contains(string(md), "full outputs are in `"+dir+"`") {
		t.Errorf("report.md does not name the artifacts dir")
	}
	xmlData, _ := os.ReadFile(paths[1])
	if s := parseJUnit(t, xmlData); s.Failures != 1 {
		t.Errorf("junit failures = %d, want 1", s.Failures)
	}
	f, err := os.Open(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("run.json does not read back as the run")
	}

	// Rewriting replaces the files in place.
	if _, err := WriteAll(dir, localVolumeRun()); err != nil {
		t.Fatal(err)
	}
	if md2, _ := os.ReadFile(paths[0]); bytes.Equal(md2, md) {
		t.Errorf("report.md not replaced")
	}

	// A dir that cannot be created is an error.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if paths, err := WriteAll(filepath.Join(file, "sub"), run); err == nil || len(paths) != 0 {
		t.Errorf("WriteAll under a file = %q, %v; want an error", paths, err)
	}
}

func TestDefaultArtifactsDir(t *testing.T) {
	t.Setenv("ARTIFACTS", "/logs/artifacts")
	if got := DefaultArtifactsDir("id1"); got != "/logs/artifacts" {
		t.Errorf("with $ARTIFACTS: %q", got)
	}
	t.Setenv("ARTIFACTS", "")
	if got, want := DefaultArtifactsDir("id1"), "."+string(filepath.Separator)+filepath.Join("_artifacts", "id1"); got != want {
		t.Errorf("without $ARTIFACTS: %q, want %q", got, want)
	}
}

func TestNewRunID(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 21, 0, 0, time.FixedZone("CET", 3600))
	re := regexp.MustCompile(`^20261130-072100-[0-9a-f]{4}$`)
	seen := map[string]bool{}
	for range 20 {
		id := NewRunID(now)
		if !re.MatchString(id) {
			t.Fatalf("NewRunID = %q, want it to match %s", id, re)
		}
		seen[id] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 IDs in the same second are all %q", NewRunID(now))
	}
}

func TestJUnitFileName(t *testing.T) {
	for in, want := range map[string]string{
		"csi-hostpath":       "junit_skewtest_csi-hostpath.xml",
		"Local Volume":       "junit_skewtest_local-volume.xml",
		"csi_block/raw":      "junit_skewtest_csi-block-raw.xml",
		"../../etc":          "junit_skewtest_etc.xml",
		"":                   "junit_skewtest_unnamed.xml",
		"CSI  hostpath (v2)": "junit_skewtest_csi-hostpath-v2.xml",
	} {
		if got := JUnitFileName(in); got != want {
			t.Errorf("JUnitFileName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		run  *Run
		want []string
	}{
		{passingCSIRun(), []string{
			"skewtest csi-hostpath: PASS (plan v1.37.2 → v1.36.3 → v1.37.2, on kind node skewtest-worker, took 6m53s).",
			"hop 1 downgrade v1.37.2 → v1.36.3 3.90s; hop 2 upgrade v1.36.3 → v1.37.2 12.3s.",
			"Report: " + filepath.Join("_artifacts/20261130-072100-a1b2", "report.md") + ".",
		}},
		{localVolumeRun(), []string{"PASS WITH EXPECTED DEVIATIONS", "Deviations: 2 expected, 0 unexpected."}},
		{failedRun(), []string{"FAIL", "Failure: verify cleanup: pod " + uidC, "hop 1 downgrade v1.37.2 → v1.36.3 not measured (failed); hop 2 upgrade v1.36.3 → v1.37.2 skipped."}},
	} {
		s := Summary(tc.run)
		if strings.Contains(s, "\n") {
			t.Errorf("summary is not one paragraph: %q", s)
		}
		for _, w := range tc.want {
			if !strings.Contains(s, w) {
				t.Errorf("summary %q lacks %q", s, w)
			}
		}
	}
}

func TestHopAnchor(t *testing.T) {
	for _, tc := range []struct {
		hop  Hop
		want string
	}{
		{Hop{Number: 2}, "hop-2"},
		{Hop{Number: 7, Node: "skewtest-worker2"}, "hop-7"},
	} {
		if got := HopAnchor(tc.hop); got != tc.want {
			t.Errorf("HopAnchor(%+v) = %q, want %q", tc.hop, got, tc.want)
		}
	}
	md := string(render(t, WriteMarkdown, passingCSIRun()))
	for _, h := range passingCSIRun().Hops {
		if want := `<a id="` + HopAnchor(h) + `"></a>`; strings.Count(md, want) != 1 {
			t.Errorf("report has %d anchors %s, want 1", strings.Count(md, want), want)
		}
	}
}

func TestVolumeKind(t *testing.T) {
	for _, tc := range []struct {
		run  Run
		want string
	}{
		{Run{Scenario: ReconstructionScenarioPrefix + "local", Environment: []KeyValue{{Key: EnvVolumeKind, Value: "csi"}}}, "csi"},
		{Run{Scenario: ReconstructionScenarioPrefix + "local"}, "local"},
		{Run{Scenario: "csi-hostpath"}, ""},
	} {
		if got := tc.run.VolumeKind(); got != tc.want {
			t.Errorf("VolumeKind of %+v = %q, want %q", tc.run, got, tc.want)
		}
	}
}

func TestStepJudgesEntry(t *testing.T) {
	s := Step{Name: "hop 1: catalogue fault pvc-terminating on kubelet v1.32.2"}
	if !s.JudgesEntry("pvc-terminating") || s.JudgesEntry("terminating") || s.JudgesEntry("reboot") {
		t.Errorf("JudgesEntry on %q", s.Name)
	}
	if (Step{Name: "hop 1: kubelet metrics"}).JudgesEntry("pvc-terminating") {
		t.Error("a step that judges nothing")
	}
}
