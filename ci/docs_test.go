package ci

// The documentation's tests: README.md is the front door and docs/ the
// manual. They check what drifts when code changes and prose does not:
// the settings table (generated from skewrun.AllSettings), the make targets,
// programs and skewtest subcommands the pages tell people to run, and the
// links between pages.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/internal/testgate"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/mutation"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

const (
	// docsUpdateEnv set to 1 makes TestDocsSettings rewrite docs/settings.md.
	docsUpdateEnv = "UPDATE_DOCS"
	// docsRegenerate is the command that rewrites docs/settings.md.
	docsRegenerate = "UPDATE_DOCS=1 go test ./ci/ -run TestDocsSettings"
	// docsRegenerateEntries is the command that rewrites
	// docs/catalogue-entries.md.
	docsRegenerateEntries = "UPDATE_DOCS=1 go test ./ci/ -run TestDocsCatalogueEntries"
	// readmeMaxBytes bounds README.md: a front door, the manual is docs/.
	readmeMaxBytes = 12 << 10
	// measurementsPage is the one page that may quote commits.
	measurementsPage = "docs/measurements.md"
)

// docsSetting is one row of skewrun.AllSettings.
type docsSetting struct{ Name, Default, Help string }

// docsSettingsPage is docs/settings.md as skewrun.AllSettings makes it.
func docsSettingsPage(settings []docsSetting) string {
	var b strings.Builder
	b.WriteString("# Settings\n\n")
	b.WriteString("<!-- Generated from skewrun.AllSettings (scenarios/skewrun/env.go and each provider's Descriptor) by `" + docsRegenerate + "`. Do not edit. -->\n\n")
	b.WriteString("This page is generated from `skewrun.AllSettings`: the shared\n")
	b.WriteString("settings in `scenarios/skewrun/env.go`, then each provider's own from\n")
	b.WriteString("its `Descriptor` (`clusters/<provider>/descriptor.go`), named before\n")
	b.WriteString("their meaning; the table that `go run ./cmd/skewtest settings`\n")
	b.WriteString("prints. Do not edit it by hand: change the settings there and\n")
	b.WriteString("regenerate the page with\n\n")
	b.WriteString("```sh\n" + docsRegenerate + "\n```\n\n")
	b.WriteString("`go test ./ci/` fails while the page and the settings differ.\n\n")
	b.WriteString("Every setting is an environment variable, and also a make variable\n")
	b.WriteString("(`make test-skew PLAN=...`). What the settings about plans and kubelet\n")
	b.WriteString("binaries accept, and how they are checked: [plans and kubelets](plans.md).\n")
	b.WriteString("Each provider's own settings, explained: [providers](providers.md).\n\n")
	b.WriteString("| variable | default | meaning |\n| --- | --- | --- |\n")
	for _, s := range settings {
		var names []string
		for _, n := range strings.Split(s.Name, " / ") {
			names = append(names, "`"+n+"`")
		}
		def := ""
		if s.Default != "" {
			def = "`" + s.Default + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", strings.Join(names, " / "), docsCell(def), docsCell(docsText(s.Help)))
	}
	return b.String()
}

// docsText escapes what Markdown would take for HTML in plain text.
func docsText(s string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(s)
}

// docsCell escapes a table cell's pipes.
func docsCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func TestDocsSettings(t *testing.T) {
	var settings []docsSetting
	for _, s := range skewrun.AllSettings() {
		settings = append(settings, docsSetting{s.Name, s.Default, s.Help})
	}
	want := docsSettingsPage(settings)
	checkGeneratedPage(t, "settings.md", want, "skewrun.AllSettings", docsRegenerate)
}

// docs/catalogue-entries.md is the catalogue's entry list as the
// catalogue's data makes it (catalogue.Markdown), each entry with the
// providers whose nodes have what it needs.
func TestDocsCatalogueEntries(t *testing.T) {
	want := catalogue.Markdown(reconstruction.Catalogue(), func(e catalogue.Entry) []string { return clusters.RunningOn(e.Needs) }, docsRegenerateEntries)
	checkGeneratedPage(t, "catalogue-entries.md", want, "the catalogue", docsRegenerateEntries)
}

// checkGeneratedPage holds docs/<page> to want, generated from source;
// with UPDATE_DOCS=1 it writes want there instead.
func checkGeneratedPage(t *testing.T, page, want, source, regenerate string) {
	t.Helper()
	path := filepath.Join(repoRoot, "docs", page)
	if os.Getenv(docsUpdateEnv) == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s from %s", path, source)
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; generate it with %s", err, regenerate)
	}
	if diff := docsFirstDiff(string(got), want); diff != "" {
		t.Errorf("docs/%s is not what %s generates: %s; regenerate it with %s", page, source, diff, regenerate)
	}
}

// docsFirstDiff names the first line where got and want differ, or "".
func docsFirstDiff(got, want string) string {
	if got == want {
		return ""
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("line %d is %q, want %q", i+1, gl, wl)
		}
	}
	return "they differ"
}

// docsPages are README.md and docs/*.md, relative to repoRoot.
func docsPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md")
	}
	var rel []string
	for _, p := range append([]string{filepath.Join(repoRoot, "README.md")}, pages...) {
		r, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		rel = append(rel, filepath.ToSlash(r))
	}
	return rel
}

func readDoc(t *testing.T, page string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docsCode is a piece of code on a page: a code span or a code block's
// line, with the line it starts on.
type docsCode struct {
	line  int
	text  string
	block bool
}

var (
	docsFence    = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z0-9_-]*)")
	docsSpan     = regexp.MustCompile("`([^`]+)`")
	docsShellish = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true}
)

// docsFenceOpens reports whether line opens a fenced code block, with
// its fence and language.
func docsFenceOpens(line string) (fence, lang string, ok bool) {
	m := docsFence.FindStringSubmatch(line)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// docsFenceCloses reports whether line closes the block fence opened: the
// same character, at least as many times, and nothing else.
func docsFenceCloses(line, fence string) bool {
	l := strings.TrimSpace(line)
	return len(l) >= len(fence) && l == strings.Repeat(fence[:1], len(l))
}

// docsFirstBlock is the lines of a page's first fenced code block.
func docsFirstBlock(text string) []string {
	var block []string
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		switch {
		case fence == "":
			if f, _, ok := docsFenceOpens(line); ok {
				fence = f
			}
		case docsFenceCloses(line, fence):
			return block
		default:
			block = append(block, line)
		}
	}
	return block
}

// docsCodeOf returns the code spans and code block lines of a Markdown
// page. Code spans may run over lines within a paragraph; a shell block's
// comments are left out.
func docsCodeOf(text string) []docsCode {
	var out []docsCode
	lines := strings.Split(text, "\n")
	var para []string
	paraStart := 0
	flush := func() {
		if len(para) == 0 {
			return
		}
		joined := strings.Join(para, "\n")
		for _, m := range docsSpan.FindAllStringSubmatchIndex(joined, -1) {
			out = append(out, docsCode{
				line: paraStart + strings.Count(joined[:m[0]], "\n"),
				text: strings.Join(strings.Fields(joined[m[2]:m[3]]), " "),
			})
		}
		para = nil
	}
	fence, lang := "", ""
	for i, line := range lines {
		if fence == "" {
			if f, l, ok := docsFenceOpens(line); ok {
				flush()
				fence, lang = f, l
				continue
			}
		} else if docsFenceCloses(line, fence) {
			fence = ""
			continue
		}
		if fence != "" {
			code := line
			if docsShellish[lang] {
				code = docsStripComment(code)
			}
			out = append(out, docsCode{line: i + 1, text: code, block: true})
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if len(para) == 0 {
			paraStart = i + 1
		}
		para = append(para, line)
	}
	flush()
	return out
}

// docsStripComment drops a shell comment: a # at the start or after a
// blank, outside quotes.
func docsStripComment(line string) string {
	quote := rune(0)
	prev := ' '
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && unicode.IsSpace(prev):
			return line[:i]
		}
		prev = r
	}
	return line
}

// docsRepo is what the pages may name: make targets, main packages and
// skewtest's subcommands.
type docsRepo struct {
	root       string
	targets    map[string]bool
	commands   map[string]bool
	vmCommands map[string]bool
}

var (
	docsRule = regexp.MustCompile(`^([A-Za-z0-9_.%/-]+(?:\s+[A-Za-z0-9_.%/-]+)*)\s*:(?:[^=]|$)`)
	docsCase = regexp.MustCompile(`^\s*case\s+((?:"[^"]+"\s*,?\s*)+):`)
	// docsVerb is an entry of cmd/skewtest's command table.
	docsVerb   = regexp.MustCompile(`^\s*\{name:\s*("[^"]+")`)
	docsQuoted = regexp.MustCompile(`"([^"]+)"`)
	docsMake   = regexp.MustCompile(`(?:^|[\s;&|(])make((?:\s+[^\s;&|()]+)*)`)
	docsGoRun  = regexp.MustCompile(`(?:^|[\s;&|(])go\s+run((?:\s+[^\s;&|()]+)+)`)
	docsCmd    = regexp.MustCompile(`(?:^|[\s/;&|(])skewtest\s+([a-z][a-z0-9-]*)`)
	docsVMCmd  = regexp.MustCompile(`(?:^|[\s/;&|(])skewtest\s+vm\s+([a-z][a-z0-9-]*)`)
	docsTarget = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

// docsMakeTargets are the Makefile's rule targets and .PHONY names.
func docsMakeTargets(makefile string) map[string]bool {
	targets := map[string]bool{}
	for _, line := range strings.Split(makefile, "\n") {
		m := docsRule.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		names := strings.Fields(m[1])
		if slices.Contains(names, "export") || slices.Contains(names, "override") {
			continue
		}
		if len(names) == 1 && names[0] == ".PHONY" {
			rest := strings.SplitN(line, ":", 2)[1]
			for _, n := range strings.Fields(strings.SplitN(rest, "#", 2)[0]) {
				targets[n] = true
			}
			continue
		}
		for _, n := range names {
			targets[n] = true
		}
	}
	return targets
}

// docsCases are the strings of a Go file's case clauses, or the verbs of
// its command table.
func docsCases(src string) map[string]bool {
	cases := map[string]bool{}
	for _, line := range strings.Split(src, "\n") {
		m := docsCase.FindStringSubmatch(line)
		if m == nil {
			m = docsVerb.FindStringSubmatch(line)
		}
		if m != nil {
			for _, q := range docsQuoted.FindAllStringSubmatch(m[1], -1) {
				cases[q[1]] = true
			}
		}
	}
	return cases
}

func readDocsRepo(t *testing.T) docsRepo {
	t.Helper()
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(repoRoot, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	r := docsRepo{
		root:       repoRoot,
		targets:    docsMakeTargets(read("Makefile")),
		commands:   docsCases(read("cmd/skewtest/commands.go")),
		vmCommands: docsCases(read("cmd/skewtest/vm.go")),
	}
	if len(r.targets) < 5 || !r.targets["test"] || !r.targets["test-skew"] {
		t.Fatalf("parsed only these targets from the Makefile: %v", r.targets)
	}
	if !r.commands["run"] || !r.commands["settings"] || !r.vmCommands["up"] {
		t.Fatalf("parsed only these subcommands from cmd/skewtest: %v, vm %v", r.commands, r.vmCommands)
	}
	return r
}

// isMainPackage reports whether dir holds a Go main package.
func isMainPackage(dir string) bool {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return false
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line == "package main" || strings.HasPrefix(line, "package main ") {
				return true
			}
		}
	}
	return false
}

// docsGoRunFlagArgs are go run's flags that take the next word as their
// value when not written -flag=value.
var docsGoRunFlagArgs = map[string]bool{"-C": true, "-exec": true, "-tags": true, "-ldflags": true, "-gcflags": true, "-asmflags": true, "-mod": true, "-modfile": true, "-o": true, "-p": true, "-pgo": true, "-overlay": true, "-toolexec": true}

// docsGoRunPackage is the package of go run's arguments: the first word
// that is neither a flag nor a flag's value.
func docsGoRunPackage(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a
		}
		if docsGoRunFlagArgs[a] {
			i++
		}
	}
	return ""
}

// checkDocCommands names every make target, go run package and skewtest
// subcommand in a page's code that does not exist.
func checkDocCommands(page, text string, r docsRepo) []string {
	var problems []string
	bad := func(c docsCode, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s (in %q)", page, c.line, fmt.Sprintf(format, args...), strings.TrimSpace(c.text)))
	}
	for _, c := range docsCodeOf(text) {
		for _, m := range docsMake.FindAllStringSubmatch(c.text, -1) {
			for _, w := range strings.Fields(m[1]) {
				if strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
					continue
				}
				if !docsTarget.MatchString(w) {
					break
				}
				if !r.targets[w] {
					bad(c, "make %s: the Makefile has no target %s", w, w)
				}
			}
		}
		for _, m := range docsGoRun.FindAllStringSubmatch(c.text, -1) {
			pkg := docsGoRunPackage(strings.Fields(m[1]))
			if !strings.HasPrefix(pkg, "./") {
				continue
			}
			if !isMainPackage(filepath.Join(r.root, filepath.FromSlash(pkg))) {
				bad(c, "go run %s: no main package in %s", pkg, pkg)
			}
		}
		for _, m := range docsCmd.FindAllStringSubmatch(c.text, -1) {
			if !r.commands[m[1]] {
				bad(c, "skewtest %s: cmd/skewtest/commands.go lists no subcommand %s", m[1], m[1])
			}
		}
		for _, m := range docsVMCmd.FindAllStringSubmatch(c.text, -1) {
			if !r.vmCommands[m[1]] {
				bad(c, "skewtest vm %s: cmd/skewtest/vm.go handles no vm subcommand %s", m[1], m[1])
			}
		}
	}
	return problems
}

func TestDocsCommandsExist(t *testing.T) {
	r := readDocsRepo(t)
	for _, page := range docsPages(t) {
		for _, p := range checkDocCommands(page, readDoc(t, page), r) {
			t.Error(p)
		}
	}
}

// docsWorkWording is wording about how work on the project was organised
// (its stops, issues and sessions), which the pages must not use: they
// speak of the project. Upstream references such as #130335 or
// kubernetes/kubernetes#130335 are not matched.
var docsWorkWording = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`(?i)\bstop \d+\b`), `"stop N"`},
	{regexp.MustCompile(`(?i)\bissue \d+\b`), `"issue N"`},
	{regexp.MustCompile(`(?i)\bsessions?\b`), `"session"`},
	{regexp.MustCompile(`(?i)\bthe developers\b`), `"the developers"`},
}

// docsFigureAfter is what follows "stop 8" when it is a figure ("stop
// 8.2 s"), not a stop of the work.
var docsFigureAfter = regexp.MustCompile(`^(?:\.\d+)?\s*(?:s|ms|min|seconds?|minutes?)\b`)

// docsCommit is a commit hash, which only the measurements page may quote.
var docsCommit = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)

// checkDocWording names every line of a page that speaks of how the work
// was organised, or quotes a commit outside the measurements page.
func checkDocWording(page, text string) []string {
	var problems []string
	for i, line := range strings.Split(text, "\n") {
		for _, w := range docsWorkWording {
			for _, loc := range w.re.FindAllStringIndex(line, -1) {
				if strings.HasPrefix(strings.ToLower(line[loc[0]:]), "stop ") && docsFigureAfter.MatchString(line[loc[1]:]) {
					continue
				}
				problems = append(problems, fmt.Sprintf("%s:%d: %s speaks of how the work was organised, not of the project: %q; say what the project does or measured instead", page, i+1, w.what, line[loc[0]:loc[1]]))
			}
		}
		if page == measurementsPage {
			continue
		}
		for _, h := range docsCommit.FindAllString(line, -1) {
			if strings.IndexFunc(h, unicode.IsDigit) >= 0 && strings.IndexFunc(h, unicode.IsLetter) >= 0 {
				problems = append(problems, fmt.Sprintf("%s:%d: commit %s: commits are quoted on %s only, with the figure measured at them", page, i+1, h, measurementsPage))
			}
		}
	}
	return problems
}

func TestDocsSpeakOfTheProject(t *testing.T) {
	for _, page := range docsPages(t) {
		for _, p := range checkDocWording(page, readDoc(t, page)) {
			t.Error(p)
		}
	}
}

var (
	docsHeading  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	docsLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	docsLink     = regexp.MustCompile(`\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	docsIDAttr   = regexp.MustCompile(`\b(?:id|name)="([^"]+)"`)
	docsMakeTest = regexp.MustCompile(`(?:^|\s)make test(?:\s|$)`)
)

// docsSlug is the anchor GitHub makes of a heading.
func docsSlug(heading string) string {
	heading = docsLinkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsNumber(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// docsProse is a page without its code blocks and code spans, line by
// line, so that a link or heading in code is not taken for one.
func docsProse(text string) []string {
	lines := strings.Split(text, "\n")
	out := make([]string, len(lines))
	fence := ""
	for i, line := range lines {
		if fence == "" {
			if f, _, ok := docsFenceOpens(line); ok {
				fence = f
				continue
			}
		} else {
			if docsFenceCloses(line, fence) {
				fence = ""
			}
			continue
		}
		out[i] = docsSpan.ReplaceAllString(line, "code")
	}
	return out
}

// docsAnchors are the anchors of a page: its headings' slugs (a repeated
// one numbered as GitHub does) and explicit id attributes.
func docsAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	lines := strings.Split(text, "\n")
	prose := docsProse(text)
	for i, line := range prose {
		if m := docsHeading.FindStringSubmatch(line); m != nil {
			// The heading as written, code spans included.
			raw := docsHeading.FindStringSubmatch(lines[i])[1]
			s := docsSlug(raw)
			if n := seen[s]; n > 0 {
				anchors[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range docsIDAttr.FindAllStringSubmatch(lines[i], -1) {
			anchors[m[1]] = true
		}
	}
	return anchors
}

// checkDocLinks names every relative link of a page whose file, or whose
// anchor in a Markdown file, does not exist. readPage reads a page by its
// path relative to the repository; it fails for a missing file.
func checkDocLinks(page, text string, readPage func(string) (string, bool), isFile func(string) bool) []string {
	var problems []string
	for i, line := range docsProse(text) {
		for _, m := range docsLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := page
			if file != "" {
				resolved = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), file)))
				if !isFile(resolved) {
					problems = append(problems, fmt.Sprintf("%s:%d: link %s: no file %s", page, i+1, target, resolved))
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			body, ok := readPage(resolved)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s:%d: link %s: cannot read %s", page, i+1, target, resolved))
				continue
			}
			if !docsAnchors(body)[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: link %s: %s has no heading or id %q", page, i+1, target, resolved, anchor))
			}
		}
	}
	return problems
}

// checkReadme names what keeps README.md from being a front door: its
// size, and a first code block that is not the two commands a new user
// runs.
func checkReadme(text string) []string {
	var problems []string
	if len(text) > readmeMaxBytes {
		problems = append(problems, fmt.Sprintf("README.md: %d bytes, at most %d: move the detail into docs/", len(text), readmeMaxBytes))
	}
	block := docsFirstBlock(text)
	skew := slices.IndexFunc(block, func(l string) bool { return strings.Contains(l, "make test-skew") })
	test := slices.IndexFunc(block, func(l string) bool { return docsMakeTest.MatchString(l) })
	if skew < 0 || test < 0 || test < skew {
		problems = append(problems, fmt.Sprintf("README.md: the first code block must hold `make test-skew` and then `make test`, the two commands a new user runs; it holds %q", block))
	}
	return problems
}

func TestReadmeIsAFrontDoor(t *testing.T) {
	for _, p := range checkReadme(readDoc(t, "README.md")) {
		t.Error(p)
	}
	readPage := func(p string) (string, bool) {
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(p)))
		return string(b), err == nil
	}
	isFile := func(p string) bool {
		_, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(p)))
		return err == nil
	}
	for _, page := range docsPages(t) {
		for _, p := range checkDocLinks(page, readDoc(t, page), readPage, isFile) {
			t.Error(p)
		}
	}
}

// The checkers fail on planted bad lines, and pass the good ones beside
// them.
func TestDocsCheckersFail(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"cmd/tool", "lib"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "cmd/tool/main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "lib/lib.go"), []byte("package lib\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := docsRepo{
		root:       root,
		targets:    docsMakeTargets(".PHONY: test phony-only\nFOO := bar\nexport BAZ := 1\ntest: deps\n\tgo test ./...\ntest-skew deps:\n"),
		commands:   docsCases("switch args[0] {\n\tcase \"run\", \"matrix\":\n\tcase \"vm\":\n"),
		vmCommands: docsCases("\tcase \"up\":\n"),
	}
	for _, want := range []string{"test", "test-skew", "deps", "phony-only"} {
		if !r.targets[want] {
			t.Errorf("docsMakeTargets: no target %s in %v", want, r.targets)
		}
	}
	if r.targets["FOO"] || r.targets["BAZ"] || r.targets["export"] {
		t.Errorf("docsMakeTargets took an assignment for a target: %v", r.targets)
	}

	good := "Run `make test` and `make -k test-skew PROVIDER=kind`, or\n`go run ./cmd/tool\n  run`.\n\n```sh\nsudo -E make test deps   # make nothing-here, skewtest bogus\nbin/skewtest matrix\ngo run ./cmd/tool vm up\n```\n\n```text\nmake believe\n```\n"
	if p := checkDocCommands("good.md", good, r); len(p) != 1 || !strings.Contains(p[0], "believe") {
		// A text block is code too: "make believe" names a target.
		t.Errorf("checkDocCommands on good lines and one text block: %q", p)
	}
	for _, bad := range []struct{ text, want string }{
		{"Then `make no-such-target`.\n", "good.md:1: make no-such-target"},
		{"One\n\nthen `make test\n  nope`.\n", "good.md:3: make nope"},
		{"```sh\n\nmake test-skew missing\n```\n", "good.md:3: make missing"},
		{"Run `go run ./lib`.\n", "go run ./lib: no main package"},
		{"Run `go run -tags x ./nowhere`.\n", "go run ./nowhere: no main package"},
		{"```sh\nbin/skewtest frobnicate\n```\n", "no subcommand frobnicate"},
		{"```sh\nskewtest vm frob\n```\n", "no vm subcommand frob"},
	} {
		p := checkDocCommands("good.md", bad.text, r)
		if len(p) != 1 || !strings.Contains(p[0], bad.want) {
			t.Errorf("checkDocCommands(%q) = %q, want one problem with %q", bad.text, p, bad.want)
		}
	}

	fine := "Fixed upstream in #130335 (kubernetes/kubernetes#130335, issue #3756);\nthe kubelet stopped in 8.2 s (stop 8.2 s, stop 7 s); a non-stop run; SSH's MaxSessions.\n"
	if p := checkDocWording("docs/x.md", fine); len(p) != 0 {
		t.Errorf("checkDocWording on fine lines: %q", p)
	}
	for _, bad := range []string{
		"As measured at stop 12, on a busier machine.",
		"The 5 minutes Issue 10 asks for.",
		"when the session's deadline stopped it",
		"Three sessions later.",
		"What the developers found.",
		"fixed in 3939bab",
	} {
		if p := checkDocWording("docs/x.md", "ok\n"+bad+"\n"); len(p) != 1 || !strings.HasPrefix(p[0], "docs/x.md:2: ") {
			t.Errorf("checkDocWording(%q) = %q, want one problem on line 2", bad, p)
		}
	}
	if p := checkDocWording(measurementsPage, "at 3939bab: 28.3 s\n"); len(p) != 0 {
		t.Errorf("checkDocWording on the measurements page's commit: %q", p)
	}

	pages := map[string]string{
		"README.md":       "# T\n\n```sh\nmake test-skew\nmake test\n```\n\nSee [a](docs/a.md), [b](docs/a.md#the-b-section), [here](#t), [web](https://example.com/x.md#y), `[not](a link)`.\n",
		"docs/a.md":       "# A\n\n## The `b` section\n\n## Again\n\n## Again\n\n<a id=\"custom\"></a>\n\n[up](../README.md) [c](a.md#again-1) [d](#custom)\n\n```md\n[in code](nowhere.md)\n# not a heading\n```\n",
		"docs/missing.md": "",
	}
	readPage := func(p string) (string, bool) { s, ok := pages[p]; return s, ok }
	isFile := func(p string) bool { _, ok := pages[p]; return ok }
	for page, text := range pages {
		if p := checkDocLinks(page, text, readPage, isFile); len(p) != 0 {
			t.Errorf("checkDocLinks(%s) on good links: %q", page, p)
		}
	}
	for _, bad := range []struct{ text, want string }{
		{"[x](docs/nope.md)", "no file docs/nope.md"},
		{"[x](docs/a.md#not-there)", `has no heading or id "not-there"`},
		{"[x](#nowhere)", `README.md has no heading or id "nowhere"`},
		{"[x](docs/a.md#not-a-heading)", `has no heading or id "not-a-heading"`},
	} {
		p := checkDocLinks("README.md", "# T\n\n"+bad.text+"\n", readPage, isFile)
		if len(p) != 1 || !strings.Contains(p[0], bad.want) || !strings.HasPrefix(p[0], "README.md:3: ") {
			t.Errorf("checkDocLinks(%q) = %q, want one problem on line 3 with %q", bad.text, p, bad.want)
		}
	}

	if p := checkReadme(pages["README.md"]); len(p) != 0 {
		t.Errorf("checkReadme on a good README: %q", p)
	}
	for _, bad := range []string{
		"# T\n\n```sh\nmake test\nmake test-skew\n```\n",
		"# T\n\n```sh\nmake test-skew\n```\n\n```sh\nmake test\n```\n",
		"# T\n\n```sh\nmake test-skew\nmake test-images\n```\n",
		"# T\n\n```sh\nmake test-skew\nmake test\n```\n" + strings.Repeat("x", readmeMaxBytes),
	} {
		if p := checkReadme(bad); len(p) != 1 {
			t.Errorf("checkReadme(%.60q...) = %q, want one problem", bad, p)
		}
	}

	settings := []docsSetting{{"A / B", "x|y", "a <run-id> | b"}, {"C", "", "c"}}
	page := docsSettingsPage(settings)
	for _, want := range []string{"| `A` / `B` | `x\\|y` | a &lt;run-id&gt; \\| b |\n", "| `C` |  | c |\n", docsRegenerate} {
		if !strings.Contains(page, want) {
			t.Errorf("docsSettingsPage lacks %q:\n%s", want, page)
		}
	}
	if d := docsFirstDiff(page, page+"| D | | d |\n"); !strings.Contains(d, "want \"| D | | d |\"") {
		t.Errorf("docsFirstDiff names %q for a missing row", d)
	}
	if d := docsFirstDiff(page, page); d != "" {
		t.Errorf("docsFirstDiff of equal pages: %q", d)
	}
}

// docs/mutation.md's generated section is mutation.DocsSection of the
// set: a mutant added, changed or marked equivalent shows there, for
// review.
func TestDocsMutants(t *testing.T) {
	set, err := mutation.Set()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(repoRoot, "docs", "mutation.md")
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- BEGIN generated", "<!-- END generated -->"
	i := strings.Index(string(page), begin)
	nl := strings.Index(string(page)[max(i, 0):], "\n")
	j := strings.Index(string(page), end)
	if i < 0 || nl < 0 || j < i {
		t.Fatalf("%s has no generated section (%q ... %q)", path, begin, end)
	}
	head, tail := string(page)[:i+nl+1], string(page)[j:]
	want := head + mutation.DocsSection(set) + tail
	if os.Getenv(docsUpdateEnv) == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s from mutation.Set", path)
		return
	}
	if diff := docsFirstDiff(string(page), want); diff != "" {
		t.Errorf("docs/mutation.md's mutants are not what mutation.DocsSection generates: %s; regenerate it with UPDATE_DOCS=1 go test ./ci/ -run TestDocsMutants", diff)
	}
}

// docs/design.md names every provider capability clusters/capabilities
// declares, so that the list a newcomer reads is the package's.
func TestDocsCapabilities(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(repoRoot, "clusters", "capabilities", "capabilities.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, sp := range g.Specs {
			ts := sp.(*ast.TypeSpec)
			if _, ok := ts.Type.(*ast.InterfaceType); ok && ts.Name.IsExported() {
				names = append(names, ts.Name.Name)
			}
		}
	}
	if len(names) < 10 {
		t.Fatalf("found %d capabilities in clusters/capabilities (%v): the parse is wrong", len(names), names)
	}
	for _, n := range names {
		if !strings.Contains(string(page), "`"+n+"`") {
			t.Errorf("docs/design.md does not name the capability %s of clusters/capabilities", n)
		}
	}
}

// docs/design.md's layout table has a row for every top-level directory
// of the repository and names every package directly under scenarios/,
// reports/ and clusters/, so that a newcomer's map is the tree's.
func TestDocsLayout(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(page), "\n## Layout\n")
	if !ok {
		t.Fatal("docs/design.md has no Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	rows := map[string]string{}
	for _, line := range strings.Split(layout, "\n") {
		if m := docsLayoutRow.FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	top, err := os.ReadDir(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range top {
		n := e.Name()
		// Hidden directories other than .ci, and what builds and runs write
		// (ignored by git), are no part of the layout.
		if !e.IsDir() || n == "bin" || n == "_artifacts" || n == "_cache" || (strings.HasPrefix(n, ".") && n != ".ci") {
			continue
		}
		found := false
		for p := range rows {
			if p == n || strings.HasPrefix(p, n+"/") {
				found = true
			}
		}
		if !found {
			t.Errorf("docs/design.md's layout has no row for the directory %s/", n)
		}
		checked++
	}
	for _, parent := range []string{"scenarios", "reports", "clusters"} {
		entries, err := os.ReadDir(filepath.Join(repoRoot, parent))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !e.IsDir() || e.Name() == "internal" || e.Name() == "testdata" || e.Name() == "_artifacts" {
				continue
			}
			if !strings.Contains(layout, "`"+e.Name()+"`") && !strings.Contains(layout, "`"+parent+"/"+e.Name()+"`") {
				t.Errorf("docs/design.md's layout does not name the package %s/%s", parent, e.Name())
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d directories: the walk is wrong", checked)
	}
}

// docsLayoutRow is a row of design.md's layout table: its path.
var docsLayoutRow = regexp.MustCompile("^\\| `([^`]+)` \\|")

// docsOutsidePaths are references to files outside the repository (the
// notes its authors worked from), which a reader of the code or the
// manual cannot open.
var docsOutsidePaths = regexp.MustCompile(`\.\./shared|shared/notes|\.library/|(?:kubelet-reconstruction|reconstruction-bugs|reconstruction-history|mutation-testing|local-cluster-facts|kind-offline-facts|kops-aws-facts)\.md`)

// No Go file, page or script of the repository cites a path outside it;
// recorded reports under testdata keep what the runs said.
func TestNoPathsOutsideTheRepository(t *testing.T) {
	testgate.RequireTools(t, "git")
	out, err := exec.Command("git", "-C", repoRoot, "ls-files").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	checked := 0
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(f, "/testdata/") || !(strings.HasSuffix(f, ".go") || strings.HasSuffix(f, ".md") || strings.HasSuffix(f, ".sh") || strings.HasSuffix(f, ".yaml") || f == "Makefile" || strings.HasPrefix(f, ".ci/")) {
			continue
		}
		if f == "ci/docs_test.go" {
			continue // the pattern itself
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if m := docsOutsidePaths.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, outside the repository: say what it says, or cite a public source", f, i+1, m)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d files: the listing is wrong", checked)
	}
}
