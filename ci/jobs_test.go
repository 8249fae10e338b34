package ci

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// repoRoot is where the Makefile, .ci and .github are, seen from this
// package's directory (go test runs in it).
const repoRoot = ".."

// thisRepo is the extra_refs entry a periodic clones.
const (
	thisOrg       = "kubernetes-sigs"
	thisRepo      = "skewtest"
	thisPathAlias = "sigs.k8s.io/skewtest"
)

// imageTools are the programs a job may run that come from its image, not
// from the repository: kubekins' entrypoint wrapper (it starts Docker for
// preset-dind-enabled jobs), and sudo/env to run make as root with the
// runner's PATH.
var imageTools = []string{"runner.sh", "sudo", "env", "make"}

// pendingTargets are targets the job targets call through $(MAKE) that
// other branches of issue 10 add. The check fails once one exists, so the
// entry is removed on merge and the target is checked from then on.
var pendingTargets = map[string]string{}

// requiredAnnotations are what TestGrid needs to show a periodic and alert
// on it.
var requiredAnnotations = []string{
	"testgrid-dashboards", "testgrid-tab-name", "testgrid-alert-email", "testgrid-num-failures-to-alert", "description",
}

// kindLabels are the presets test-infra's kind jobs use: Docker in Docker
// and the host mounts kind needs.
var kindLabels = []string{"preset-dind-enabled", "preset-kind-volume-mounts"}

// --- test-infra's periodic job format, the fields these jobs use ---

type prowConfig struct {
	Periodics []periodic `json:"periodics"`
}

type periodic struct {
	Name             string `json:"name"`
	Cluster          string `json:"cluster,omitempty"`
	Interval         string `json:"interval,omitempty"`
	Cron             string `json:"cron,omitempty"`
	Decorate         *bool  `json:"decorate,omitempty"`
	DecorationConfig *struct {
		Timeout string `json:"timeout,omitempty"`
	} `json:"decoration_config,omitempty"`
	ExtraRefs   []ref             `json:"extra_refs,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Spec        *podSpec          `json:"spec,omitempty"`
}

type ref struct {
	Org       string `json:"org"`
	Repo      string `json:"repo"`
	BaseRef   string `json:"base_ref,omitempty"`
	PathAlias string `json:"path_alias,omitempty"`
	WorkDir   bool   `json:"workdir,omitempty"`
}

type podSpec struct {
	Containers []container `json:"containers"`
}

type container struct {
	Image           string   `json:"image"`
	Command         []string `json:"command,omitempty"`
	Args            []string `json:"args,omitempty"`
	Env             []envVar `json:"env,omitempty"`
	SecurityContext *struct {
		Privileged *bool `json:"privileged,omitempty"`
	} `json:"securityContext,omitempty"`
	Resources struct {
		Requests map[string]any `json:"requests,omitempty"`
		Limits   map[string]any `json:"limits,omitempty"`
	} `json:"resources"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// --- GitHub Actions, the fields checked here (actionlint checks the rest) ---

type workflow struct {
	Jobs map[string]struct {
		Strategy struct {
			Matrix map[string]any `json:"matrix"`
		} `json:"strategy"`
		Steps []step `json:"steps"`
	} `json:"jobs"`
	// YAML 1.1 reads the key `on` as true; sigs.k8s.io/yaml follows it.
	On map[string]any `json:"true"`
}

type step struct {
	Name string `json:"name"`
	Uses string `json:"uses"`
	Run  string `json:"run"`
	If   string `json:"if"`
}

// --- the Makefile ---

type rule struct {
	prereqs []string
	recipe  []string
}

type makefile struct {
	rules map[string]rule
	vars  map[string]string
}

var (
	ruleLine = regexp.MustCompile(`^([A-Za-z0-9_.][A-Za-z0-9_. -]*?)\s*:($|[^=].*)$`)
	varLine  = regexp.MustCompile(`^([A-Za-z0-9_]+)\s*(?:\?|:)?=\s*(.*)$`)
	subMake  = regexp.MustCompile(`\$\(MAKE\)((?:\s+[^\s;&|]+)*)`)
	repoPath = regexp.MustCompile(`(?:^|[\s"'])((?:\./)?(?:\.ci|scripts|hack)/[^\s"';&|]+)`)
	varName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	pinnedBy = regexp.MustCompile(`^[\w.-]+/[\w.-]+(?:/[\w./-]+)?@[0-9a-f]{40}$`)
)

// parseMakefile reads rules (with their prerequisites and recipe lines,
// continuations joined) and simple variable assignments. It reads the
// Makefile as written rather than running make -p, which would run every
// $(shell ...) in it.
func parseMakefile(text string) makefile {
	mk := makefile{rules: map[string]rule{}, vars: map[string]string{}}
	var current []string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
		}
		switch {
		case strings.HasPrefix(line, "\t"):
			for _, t := range current {
				r := mk.rules[t]
				r.recipe = append(r.recipe, strings.TrimSpace(line))
				mk.rules[t] = r
			}
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
		case varLine.MatchString(line):
			m := varLine.FindStringSubmatch(line)
			mk.vars[m[1]] = strings.TrimSpace(m[2])
			current = nil
		case ruleLine.MatchString(line):
			m := ruleLine.FindStringSubmatch(line)
			current = strings.Fields(m[1])
			for _, t := range current {
				r := mk.rules[t]
				r.prereqs = append(r.prereqs, strings.Fields(strings.SplitN(m[2], "#", 2)[0])...)
				mk.rules[t] = r
			}
		default:
			current = nil
		}
	}
	return mk
}

func readMakefile(t *testing.T) makefile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	mk := parseMakefile(string(b))
	if len(mk.rules) < 5 {
		t.Fatalf("parsed only %d rules from the Makefile: %v", len(mk.rules), mk.rules)
	}
	return mk
}

// splitWords splits a shell command line into words, honouring quotes. It
// refuses what would make the line more than one command: separators,
// pipes, redirections, command substitution, several lines.
func splitWords(line string) ([]string, error) {
	line = strings.TrimSpace(line)
	if strings.Contains(line, "\n") {
		return nil, fmt.Errorf("%q: several lines; a job step runs one make invocation", line)
	}
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, c := range line {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
				continue
			}
			if quote == '"' && c == '`' {
				return nil, fmt.Errorf("%q: command substitution; a job step runs one make invocation", line)
			}
			w.WriteRune(c)
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case strings.ContainsRune(";&|<>`()", c):
			return nil, fmt.Errorf("%q: shell operator %q; a job step runs one make invocation, with no inline script", line, c)
		default:
			w.WriteRune(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: unterminated quote", line)
	}
	if inWord {
		words = append(words, w.String())
	}
	if strings.Contains(line, "$(") {
		return nil, fmt.Errorf("%q: command substitution; a job step runs one make invocation", line)
	}
	return words, nil
}

// stripRoot removes `sudo -E [env VAR=value...]`: jobs run make as root
// with the runner's environment and PATH.
func stripRoot(argv []string) ([]string, error) {
	if len(argv) == 0 || argv[0] != "sudo" {
		return argv, nil
	}
	if len(argv) < 2 || argv[1] != "-E" {
		return nil, fmt.Errorf("%q: sudo without -E loses the job's environment (ARTIFACTS, PROVIDER, SKEWTEST_CACHE)", strings.Join(argv, " "))
	}
	argv = argv[2:]
	if len(argv) > 0 && argv[0] == "env" {
		argv = argv[1:]
		for len(argv) > 0 && isAssignment(argv[0]) {
			argv = argv[1:]
		}
	}
	return argv, nil
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	return ok && varName.MatchString(name)
}

// makeTargets returns the targets of one make invocation, refusing flags
// that would read another Makefile or directory.
func makeTargets(argv []string) ([]string, error) {
	if len(argv) == 0 || argv[0] != "make" {
		return nil, fmt.Errorf("%q is not a make invocation", strings.Join(argv, " "))
	}
	var targets []string
	for _, a := range argv[1:] {
		switch {
		case a == "-f" || a == "-C" || strings.HasPrefix(a, "--file") || strings.HasPrefix(a, "--directory") || strings.HasPrefix(a, "--makefile"):
			return nil, fmt.Errorf("%q: %s reads another Makefile; jobs run this repository's", strings.Join(argv, " "), a)
		case strings.HasPrefix(a, "-"):
		case isAssignment(a):
		default:
			targets = append(targets, a)
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("%q names no target; jobs name the target they run", strings.Join(argv, " "))
	}
	return targets, nil
}

// checkArgv checks one job command: make with targets the Makefile has, or
// a program in the repository.
func checkArgv(argv []string, mk makefile, root string) error {
	argv, err := stripRoot(argv)
	if err != nil {
		return err
	}
	if len(argv) > 0 && argv[0] == "runner.sh" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return errors.New("empty command")
	}
	if argv[0] != "make" {
		if slices.Contains(imageTools, argv[0]) {
			return fmt.Errorf("%q: run make, not %s", strings.Join(argv, " "), argv[0])
		}
		return checkProgram(argv[0], root)
	}
	targets, err := makeTargets(argv)
	if err != nil {
		return err
	}
	return checkTargets(targets, mk, root)
}

// checkTargets checks that the targets exist, and so do their prerequisites,
// the targets their recipes call through $(MAKE) and the repository
// programs they run.
func checkTargets(targets []string, mk makefile, root string) error {
	var errs []error
	for _, t := range targets {
		r, ok := mk.rules[t]
		if !ok {
			errs = append(errs, fmt.Errorf("make target %q is not in the Makefile", t))
			continue
		}
		for _, p := range r.prereqs {
			if _, ok := mk.rules[p]; !ok {
				if _, err := os.Stat(filepath.Join(root, p)); err != nil {
					errs = append(errs, fmt.Errorf("make target %q: prerequisite %q is neither a target nor a file", t, p))
				}
			}
		}
		for _, line := range r.recipe {
			for _, m := range subMake.FindAllStringSubmatch(line, -1) {
				sub, _ := makeTargets(append([]string{"make"}, strings.Fields(m[1])...))
				for _, s := range sub {
					_, exists := mk.rules[s]
					what, pending := pendingTargets[s]
					switch {
					case pending && exists:
						errs = append(errs, fmt.Errorf("make target %q, %s, now exists: remove it from pendingTargets so that it is checked", s, what))
					case pending:
						// Another branch adds it; checked once it lands.
					case !exists:
						errs = append(errs, fmt.Errorf("make target %q runs $(MAKE) %s, which is not in the Makefile", t, s))
					}
				}
			}
			for _, m := range repoPath.FindAllStringSubmatch(line, -1) {
				if strings.ContainsAny(m[1], "*?[$") {
					continue // a glob or a variable, not one path
				}
				if err := checkProgram(m[1], root); err != nil {
					errs = append(errs, fmt.Errorf("make target %q: %w", t, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

func checkProgram(path string, root string) error {
	if filepath.IsAbs(path) || !strings.Contains(path, "/") {
		return fmt.Errorf("%q: not a program in the repository (jobs run make targets or repository paths)", path)
	}
	fi, err := os.Stat(filepath.Join(root, path))
	if err != nil {
		return fmt.Errorf("program %q is not in the repository: %w", path, err)
	}
	if fi.Mode()&0o111 == 0 {
		return fmt.Errorf("program %q is not executable", path)
	}
	return nil
}

// checkPeriodic checks one Prow periodic.
func checkPeriodic(p periodic, mk makefile, root string) error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(p.Name+": "+format, a...)) }
	if p.Name == "" {
		add("no name")
	}
	if (p.Interval == "") == (p.Cron == "") {
		add("needs exactly one of interval and cron")
	}
	if p.Decorate == nil || !*p.Decorate {
		add("decorate must be true: pod utilities clone the repository and upload $ARTIFACTS")
	}
	if !slices.ContainsFunc(p.ExtraRefs, func(r ref) bool {
		return r.Org == thisOrg && r.Repo == thisRepo && r.BaseRef != "" && r.PathAlias == thisPathAlias
	}) {
		add("extra_refs lacks %s/%s with a base_ref and path_alias %s", thisOrg, thisRepo, thisPathAlias)
	}
	for _, a := range requiredAnnotations {
		if strings.TrimSpace(p.Annotations[a]) == "" {
			add("annotation %s is missing", a)
		}
	}
	if n, err := strconv.Atoi(p.Annotations["testgrid-num-failures-to-alert"]); err != nil || n < 1 {
		add("testgrid-num-failures-to-alert %q is not a positive number", p.Annotations["testgrid-num-failures-to-alert"])
	}
	if p.Spec == nil || len(p.Spec.Containers) != 1 {
		add("spec must have one container")
		return errors.Join(errs...)
	}
	c := p.Spec.Containers[0]
	if !strings.Contains(c.Image, "/kubekins-e2e:") {
		add("image %q is not kubekins-e2e (runner.sh, Go, Docker in Docker)", c.Image)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		add("securityContext.privileged must be true: the runs mount volumes and start kubelets or Docker")
	}
	for _, r := range []string{"cpu", "memory"} {
		if c.Resources.Requests[r] == nil || c.Resources.Limits[r] == nil {
			add("resources: requests and limits of %s are required", r)
		}
	}
	argv := append(slices.Clone(c.Command), c.Args...)
	if err := checkArgv(argv, mk, root); err != nil {
		add("%v", err)
	}
	if slices.Contains(argv, "PROVIDER=kind") || slices.Contains(c.Env, envVar{Name: "PROVIDER", Value: "kind"}) {
		for _, l := range kindLabels {
			if p.Labels[l] != "true" {
				add("a kind job needs label %s: \"true\"", l)
			}
		}
	}
	return errors.Join(errs...)
}

// checkWorkflow checks a GitHub Actions workflow's run: lines and pins.
func checkWorkflow(wf workflow, mk makefile, root string) error {
	var errs []error
	if len(wf.Jobs) == 0 {
		errs = append(errs, errors.New("no jobs"))
	}
	for name, job := range wf.Jobs {
		for i, s := range job.Steps {
			where := fmt.Sprintf("job %s step %d (%s)", name, i+1, s.Name+s.Uses)
			switch {
			case s.Uses != "" && !strings.HasPrefix(s.Uses, "./") && !pinnedBy.MatchString(s.Uses):
				errs = append(errs, fmt.Errorf("%s: %q is not pinned by a full commit SHA", where, s.Uses))
			case s.Run != "":
				argv, err := splitWords(s.Run)
				if err == nil {
					err = checkArgv(argv, mk, root)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", where, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

func readYAML(t *testing.T, path string, v any, strict bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strict {
		err = yaml.UnmarshalStrict(b, v)
	} else {
		err = yaml.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestPeriodics(t *testing.T) {
	mk := readMakefile(t)
	files, err := filepath.Glob("prow/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Prow job files in ci/prow: %v", err)
	}
	for _, f := range files {
		var cfg prowConfig
		// Strict: a misspelt field would be dropped by Prow without a word.
		readYAML(t, f, &cfg, true)
		if len(cfg.Periodics) == 0 {
			t.Errorf("%s: no periodics", f)
		}
		names := map[string]bool{}
		for _, p := range cfg.Periodics {
			if names[p.Name] {
				t.Errorf("%s: job name %s twice", f, p.Name)
			}
			names[p.Name] = true
			if err := checkPeriodic(p, mk, repoRoot); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
		// make test-hosts does not fit CI's budget under TCG: a nightly job
		// must run it (docs/hosts.md).
		if !slices.ContainsFunc(cfg.Periodics, func(p periodic) bool {
			return p.Spec != nil && slices.Contains(p.Spec.Containers[0].Args, "test-hosts")
		}) {
			t.Errorf("%s: no periodic runs make test-hosts", f)
		}
		for _, provider := range []string{"local", "kind"} {
			if !slices.ContainsFunc(cfg.Periodics, func(p periodic) bool {
				return p.Spec != nil && slices.Contains(p.Spec.Containers[0].Args, "PROVIDER="+provider)
			}) {
				t.Errorf("%s: no periodic runs PROVIDER=%s", f, provider)
			}
		}
	}
}

func TestWorkflows(t *testing.T) {
	mk := readMakefile(t)
	files, err := filepath.Glob(filepath.Join(repoRoot, ".github", "workflows", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows in .github/workflows: %v", err)
	}
	for _, f := range files {
		var wf workflow
		readYAML(t, f, &wf, false)
		if err := checkWorkflow(wf, mk, repoRoot); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}

	var nightly workflow
	readYAML(t, filepath.Join(repoRoot, ".github", "workflows", "nightly.yaml"), &nightly, false)
	for _, trigger := range []string{"schedule", "workflow_dispatch"} {
		if _, ok := nightly.On[trigger]; !ok {
			t.Errorf("nightly.yaml: not triggered by %s (on: %v)", trigger, nightly.On)
		}
	}
	job := nightly.Jobs["nightly"]
	if got := fmt.Sprint(job.Strategy.Matrix["provider"]); got != "[local kind]" {
		t.Errorf("nightly.yaml: matrix.provider = %s, want [local kind]", got)
	}
	var runs []string
	for _, s := range job.Steps {
		if s.Run != "" {
			runs = append(runs, s.Run)
		}
	}
	var hostRuns []string
	for _, s := range nightly.Jobs["hosts"].Steps {
		hostRuns = append(hostRuns, s.Run)
	}
	if !slices.ContainsFunc(hostRuns, func(r string) bool { return strings.HasSuffix(r, " make test-hosts") }) {
		t.Errorf("nightly.yaml: job hosts runs %q, want make test-hosts", hostRuns)
	}
	// The kind node image and the suite on kind are the nightly's alone
	// (.ci/run runs the local provider's suite).
	var kindRuns []string
	for _, s := range nightly.Jobs["kind-suite"].Steps {
		kindRuns = append(kindRuns, s.Run)
	}
	for _, want := range []string{" make test-images", " make test-skew PROVIDER=kind"} {
		if !slices.ContainsFunc(kindRuns, func(r string) bool { return strings.HasSuffix(r, want) }) {
			t.Errorf("nightly.yaml: job kind-suite runs %q, want%s", kindRuns, want)
		}
	}
	if !slices.ContainsFunc(runs, func(r string) bool { return strings.HasSuffix(r, " make nightly") }) ||
		!slices.ContainsFunc(runs, func(r string) bool { return strings.HasSuffix(r, " make nightly-signoff") }) {
		t.Errorf("nightly.yaml: runs %q, want make nightly and make nightly-signoff", runs)
	}
}

// TestCIRun checks the steps of .ci/run (lines `step NAME COMMAND...`):
// each runs a make target that exists or a program in the repository, and
// together they run lint, the fast tests, the patch source's image tests
// and the suite.
func TestCIRun(t *testing.T) {
	mk := readMakefile(t)
	f, err := os.Open(filepath.Join(repoRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ran []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "step ") {
			continue
		}
		words, err := splitWords(line)
		if err != nil || len(words) < 3 {
			t.Errorf(".ci/run: %q: want step NAME COMMAND... (%v)", line, err)
			continue
		}
		argv := words[2:]
		if err := checkArgv(argv, mk, repoRoot); err != nil {
			t.Errorf(".ci/run: %v", err)
		}
		if argv[0] == "make" {
			targets, _ := makeTargets(argv)
			ran = append(ran, targets...)
		}
	}
	for _, want := range []string{"lint", "test", "test-images", "test-skew"} {
		if !slices.Contains(ran, want) {
			t.Errorf(".ci/run does not run make %s (it runs %q)", want, ran)
		}
	}
}

// TestImagesPackagesListed checks that every package with a test file
// behind the images build tag is in the Makefile's IMAGES_PKGS: a package
// missing there would be tested by neither make test nor make test-images.
func TestImagesPackagesListed(t *testing.T) {
	mk := readMakefile(t)
	tag := mk.vars["IMAGES_TAG"]
	if tag == "" {
		t.Fatal("the Makefile has no IMAGES_TAG")
	}
	listed := strings.Fields(mk.vars["IMAGES_PKGS"])
	var tagged []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != repoRoot && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		first, _, _ := strings.Cut(string(b), "\n")
		if first == "//go:build "+tag {
			rel, _ := filepath.Rel(repoRoot, filepath.Dir(path))
			tagged = append(tagged, "./"+filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tagged) == 0 {
		t.Fatalf("no test file has //go:build %s; make test-images would test nothing", tag)
	}
	for _, pkg := range tagged {
		if !slices.Contains(listed, pkg) {
			t.Errorf("%s has //go:build %s tests but is not in IMAGES_PKGS (%q): neither make test nor make test-images runs them", pkg, tag, listed)
		}
	}
}

// TestCheckersFail proves the checks above can fail.
func TestCheckersFail(t *testing.T) {
	mk := parseMakefile("PROVIDER ?= local\nSHELL := /bin/bash\n.PHONY: a b\na: b\n\techo a\nb:\n\t.ci/exit-code true\nc: missing-prereq\nd:\n\t$(MAKE) nope\ne:\n\t.ci/no-such-script\nf:\n\t$(MAKE) -k a b X=1\ng:a b # comment\n")
	for _, want := range []string{"a", "b", "c", "d", "e", "f", ".PHONY"} {
		if _, ok := mk.rules[want]; !ok {
			t.Errorf("parseMakefile: no rule %s in %v", want, mk.rules)
		}
	}
	if got := mk.rules["g"].prereqs; !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("parseMakefile: g's prerequisites %q, want [a b]", got)
	}
	if _, ok := mk.rules["SHELL"]; ok || mk.vars["PROVIDER"] != "local" {
		t.Errorf("parseMakefile took an assignment for a rule: rules %v vars %v", mk.rules, mk.vars)
	}

	yes := true
	good := periodic{
		Name: "ci-good", Cron: "0 3 * * *", Decorate: &yes,
		ExtraRefs:   []ref{{Org: thisOrg, Repo: thisRepo, BaseRef: "main", PathAlias: thisPathAlias}},
		Labels:      map[string]string{"preset-dind-enabled": "true", "preset-kind-volume-mounts": "true"},
		Annotations: map[string]string{"testgrid-dashboards": "d", "testgrid-tab-name": "t", "testgrid-alert-email": "a@example.com", "testgrid-num-failures-to-alert": "2", "description": "x"},
	}
	goodContainer := func() container {
		c := container{Image: "gcr.io/k8s-staging-test-infra/kubekins-e2e:v1", Command: []string{"runner.sh"}, Args: []string{"make", "-k", "a", "f", "PROVIDER=kind"}}
		c.SecurityContext = &struct {
			Privileged *bool `json:"privileged,omitempty"`
		}{Privileged: &yes}
		c.Resources.Requests = map[string]any{"cpu": 7, "memory": "9000Mi"}
		c.Resources.Limits = map[string]any{"cpu": 7, "memory": "9000Mi"}
		return c
	}
	job := func(edit func(p *periodic, c *container)) periodic {
		p := good
		p.Labels = maps.Clone(good.Labels)
		p.Annotations = maps.Clone(good.Annotations)
		c := goodContainer()
		edit(&p, &c)
		p.Spec = &podSpec{Containers: []container{c}}
		return p
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".ci"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".ci", "exit-code"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "not-executable.sh"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkPeriodic(job(func(*periodic, *container) {}), mk, root); err != nil {
		t.Fatalf("the good job fails: %v", err)
	}

	periodics := []struct {
		name string
		edit func(p *periodic, c *container)
		want string
	}{
		{"missing target", func(_ *periodic, c *container) { c.Args = []string{"make", "no-such-target"} }, `make target "no-such-target" is not in the Makefile`},
		{"missing prerequisite", func(_ *periodic, c *container) { c.Args = []string{"make", "c"} }, `prerequisite "missing-prereq"`},
		{"missing sub-make target", func(_ *periodic, c *container) { c.Args = []string{"make", "d"} }, `$(MAKE) nope`},
		{"missing script in recipe", func(_ *periodic, c *container) { c.Args = []string{"make", "e"} }, `".ci/no-such-script" is not in the repository`},
		{"missing program", func(_ *periodic, c *container) { c.Args = []string{"./hack/e2e.sh"} }, `"./hack/e2e.sh" is not in the repository`},
		{"program not executable", func(_ *periodic, c *container) { c.Args = []string{"./not-executable.sh"} }, "not executable"},
		{"another Makefile", func(_ *periodic, c *container) { c.Args = []string{"make", "-f", "other.mk", "a"} }, "reads another Makefile"},
		{"no target", func(_ *periodic, c *container) { c.Args = []string{"make", "PROVIDER=kind"} }, "names no target"},
		{"bash -c", func(_ *periodic, c *container) { c.Args = []string{"bash", "-c", "make a"} }, `"bash": not a program in the repository`},
		{"not decorated", func(p *periodic, _ *container) { p.Decorate = nil }, "decorate must be true"},
		{"no annotation", func(p *periodic, _ *container) { delete(p.Annotations, "testgrid-alert-email") }, "annotation testgrid-alert-email is missing"},
		{"bad alert count", func(p *periodic, _ *container) { p.Annotations["testgrid-num-failures-to-alert"] = "two" }, "not a positive number"},
		{"no schedule", func(p *periodic, _ *container) { p.Cron = "" }, "exactly one of interval and cron"},
		{"other repo", func(p *periodic, _ *container) {
			p.ExtraRefs = []ref{{Org: "kubernetes", Repo: "kubernetes", BaseRef: "master"}}
		}, "extra_refs lacks"},
		{"not privileged", func(_ *periodic, c *container) { c.SecurityContext = nil }, "privileged must be true"},
		{"no limits", func(_ *periodic, c *container) { c.Resources.Limits = nil }, "requests and limits of cpu"},
		{"kind without dind", func(p *periodic, _ *container) { delete(p.Labels, "preset-dind-enabled") }, "needs label preset-dind-enabled"},
		{"other image", func(_ *periodic, c *container) { c.Image = "golang:1.26" }, "not kubekins-e2e"},
	}
	for _, tc := range periodics {
		t.Run("periodic/"+tc.name, func(t *testing.T) {
			err := checkPeriodic(job(tc.edit), mk, root)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkPeriodic = %v, want an error containing %q", err, tc.want)
			}
		})
	}

	runs := []struct {
		run, uses string
		want      string // "" for a good step
	}{
		{run: `sudo -E env "PATH=$PATH" make a`},
		{run: `make -k a f PROVIDER=kind`},
		{uses: "actions/checkout@08c6903cd8c0fde910a37f88322edcfb5dd907a8"},
		{run: "make no-such-target", want: `"no-such-target" is not in the Makefile`},
		{run: "make a && echo done", want: "shell operator '&'"},
		{run: "make a; make b", want: "shell operator ';'"},
		{run: "make a > log", want: "shell operator '>'"},
		{run: "make a\nmake b\n", want: "several lines"},
		{run: `make "$(cat targets)"`, want: "command substitution"},
		{run: "sudo make a", want: "sudo without -E"},
		{run: "go test ./...", want: `"go": not a program in the repository`},
		{run: "make 'a", want: "unterminated quote"},
		{uses: "actions/checkout@v5", want: "not pinned by a full commit SHA"},
	}
	for _, tc := range runs {
		wf := workflow{Jobs: map[string]struct {
			Strategy struct {
				Matrix map[string]any `json:"matrix"`
			} `json:"strategy"`
			Steps []step `json:"steps"`
		}{"j": {Steps: []step{{Run: tc.run, Uses: tc.uses}}}}}
		err := checkWorkflow(wf, mk, root)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("step run=%q uses=%q: %v", tc.run, tc.uses, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("step run=%q uses=%q: checkWorkflow = %v, want an error containing %q", tc.run, tc.uses, err, tc.want)
		}
	}

	// A pending target that has landed must be taken off the list.
	saved := pendingTargets
	pendingTargets = map[string]string{"signoff": "the sign-off page"}
	defer func() { pendingTargets = saved }()
	landed := parseMakefile("n:\n\t$(MAKE) signoff DIR=x\nsignoff:\n\techo page\n")
	if err := checkTargets([]string{"n"}, landed, root); err == nil || !strings.Contains(err.Error(), "remove it from pendingTargets") {
		t.Errorf("checkTargets with a landed pending target = %v", err)
	}
}

// TestExitCode runs .ci/exit-code on commands exiting with each code
// skewtest documents: the job's verdict, the recorded code and the
// annotation.
func TestExitCode(t *testing.T) {
	script, err := filepath.Abs(filepath.Join(repoRoot, ".ci", "exit-code"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		code, want int
		says       string
	}{
		{0, 0, "skewtest exit 0: pass"},
		{1, 1, "::error::skewtest exit 1: the kubelet misbehaved"},
		{2, 2, "::error::skewtest exit 2: bad input"},
		{3, 0, "::warning::skewtest exit 3: infrastructure failure"},
		{130, 130, "::error::skewtest exit 130: interrupted by SIGINT"},
		{143, 143, "::error::skewtest exit 143: interrupted by SIGTERM"},
		{7, 7, "::error::skewtest exit 7: not a code skewtest documents"},
	} {
		t.Run(strconv.Itoa(tc.code), func(t *testing.T) {
			artifacts := filepath.Join(t.TempDir(), "artifacts")
			cmd := exec.Command(script, "sh", "-c", fmt.Sprintf("echo from-the-command; exit %d", tc.code))
			cmd.Env = append(os.Environ(), "ARTIFACTS="+artifacts)
			out, err := cmd.CombinedOutput()
			got := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				got = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("exit %d: the step exits %d, want %d\n%s", tc.code, got, tc.want, out)
			}
			if !strings.Contains(string(out), "from-the-command\n") || !strings.Contains(string(out), tc.says) {
				t.Errorf("exit %d: output %q, want the command's and %q", tc.code, out, tc.says)
			}
			if b, err := os.ReadFile(filepath.Join(artifacts, "exit-code")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(tc.code) {
				t.Errorf("exit %d: $ARTIFACTS/exit-code = %q, %v", tc.code, b, err)
			}
		})
	}

	t.Run("no ARTIFACTS", func(t *testing.T) {
		cmd := exec.Command(script, "true")
		cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "ARTIFACTS=") })
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "usage: ARTIFACTS=DIR") {
			t.Errorf("without ARTIFACTS: %v %s, want exit 2 and the usage", err, out)
		}
	})
}
