package binaries

// This file reads the unified diffs of the patch source and applies them
// with git apply, run in a fixed environment: no system, global or user
// git configuration, no repository looked for above the directory it
// works in, the C locale, so that what the user's git is set up to do
// changes nothing.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec" // git apply on this host: the one applier of the patch source
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// patchDiff is a diff file, read once: what is hashed is what is applied.
type patchDiff struct {
	// Path is the diff's absolute path.
	Path string
	Data []byte
	// SHA256 is the hex sha256 of Data.
	SHA256 string
	// Files are the paths under the k8s.io/kubernetes module root that the
	// diff changes, creates or removes (both names of a rename), sorted.
	Files []string
}

// empty says whether the diff holds nothing but white space: the patch
// source builds the unpatched source from its copy then, as a control.
func (d *patchDiff) empty() bool { return len(bytes.TrimSpace(d.Data)) == 0 }

// readPatch reads the diff at p and lists the files it touches. A diff
// that does not exist, is not a unified diff git apply can read, or
// touches a path the module build cannot patch is ErrBadSource, naming
// the file.
func readPatch(ctx context.Context, p string) (*patchDiff, error) {
	abs, err := absPath(p)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, badSource("patch %s does not exist: give a unified diff of a kubernetes checkout (git diff > fix.diff) as patch:<file>@<version>", abs)
	}
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", abs, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, badSource("patch %s is not a file: give a unified diff of a kubernetes checkout (git diff > fix.diff)", abs)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", abs, err)
	}
	sum := sha256.Sum256(data)
	d := &patchDiff{Path: abs, Data: data, SHA256: hex.EncodeToString(sum[:])}
	if d.empty() {
		return d, nil
	}
	tmp, err := os.MkdirTemp("", "skewtest-patch-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out, err := gitApply(ctx, tmp, data, "--numstat", "-z")
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, errNoGit) {
			return nil, err
		}
		return nil, badSource("patch %s is not a unified diff git apply can read (%s): give the output of git diff in a kubernetes checkout, whose paths start a/ and b/", abs, gitMessage(out))
	}
	files, err := numstatFiles(out)
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", abs, err)
	}
	files = mergeSorted(files, renamedFrom(data))
	for _, f := range files {
		if err := checkPatchPath(f); err != nil {
			return nil, badSource("patch %s: %w", abs, err)
		}
	}
	d.Files = files
	return d, nil
}

// checkPatchPath refuses a path the module build cannot patch: one that
// leaves the module's root, and one of a staging module, which the build
// takes from that module at v0.MINOR.PATCH, not from k8s.io/kubernetes.
func checkPatchPath(f string) error {
	if f == "" || path.IsAbs(f) || path.Clean(f) != f || f == ".." || strings.HasPrefix(f, "../") {
		return fmt.Errorf("it touches %q, which is not a path inside the kubernetes source", f)
	}
	if strings.HasPrefix(f, "staging/src/") {
		return fmt.Errorf("it touches %s, a file of a staging module, which the module build takes from that module's own release (k8s.io/<name> v0.MINOR.PATCH), not from k8s.io/kubernetes: the patch source patches k8s.io/kubernetes alone (use checkout:/path/to/kubernetes for this change)", f)
	}
	return nil
}

// numstatFiles reads the paths of `git apply --numstat -z`: per file
// "added\tdeleted\tpath\0", or for a rename "added\tdeleted\t\0old\0new\0".
func numstatFiles(out []byte) ([]string, error) {
	fields := strings.Split(string(out), "\x00")
	set := map[string]bool{}
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if f == "" {
			continue
		}
		parts := strings.SplitN(f, "\t", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("unexpected git apply --numstat output %q", f)
		}
		if parts[2] != "" {
			set[parts[2]] = true
			continue
		}
		if i+2 >= len(fields) {
			return nil, fmt.Errorf("unexpected git apply --numstat output: a rename without its names")
		}
		set[fields[i+1]], set[fields[i+2]] = true, true
		i += 2
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("git apply --numstat listed no files")
	}
	return sortedKeys(set), nil
}

// renamedFrom lists the old names of the files the diff renames, which
// git apply --numstat leaves out: "rename from <path>" in a file's
// extended header, between "diff --git" and its first "---" or hunk.
func renamedFrom(diff []byte) []string {
	var out []string
	inHeader := false
	for _, l := range strings.Split(string(diff), "\n") {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			inHeader = true
		case strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "@@ "):
			inHeader = false
		case inHeader && strings.HasPrefix(l, "rename from "):
			name := strings.TrimPrefix(l, "rename from ")
			// git C-quotes a name with unusual characters.
			if unq, err := strconv.Unquote(name); err == nil && strings.HasPrefix(name, `"`) {
				name = unq
			}
			out = append(out, name)
		}
	}
	return out
}

// mergeSorted is the sorted union of a and b.
func mergeSorted(a, b []string) []string {
	set := map[string]bool{}
	for _, s := range append(append([]string(nil), a...), b...) {
		set[s] = true
	}
	return sortedKeys(set)
}

// applyPatch applies d in dir, all of it or nothing (git apply checks
// every hunk before it writes); with check it only checks. A hunk that
// does not apply is ErrBadSource naming the file and the hunk.
func applyPatch(ctx context.Context, dir string, d *patchDiff, kv string, check bool) error {
	args := []string{"-p1", "--whitespace=nowarn"}
	if check {
		args = append(args, "--check")
	}
	out, err := gitApply(ctx, dir, d.Data, args...)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil || errors.Is(err, errNoGit) {
		return err
	}
	return badSource("patch %s does not apply to k8s.io/kubernetes@%s: %s; make the diff against %s (git diff in a kubernetes checkout of tag %s)",
		d.Path, kv, applyFailure(d.Data, out), kv, kv)
}

// patchFailedRE is git apply's message for a hunk that does not match:
// the file and the hunk's first line in the old file.
var patchFailedRE = regexp.MustCompile(`(?m)^error: patch failed: (.+):([0-9]+)$`)

// applyFailure says what git apply refused: the hunk, quoted from the
// diff, when it names one, and git's own message.
func applyFailure(diff, out []byte) string {
	msg := "git apply: " + gitMessage(out)
	m := patchFailedRE.FindSubmatch(out)
	if m == nil {
		return msg
	}
	file := string(m[1])
	line, _ := strconv.Atoi(string(m[2]))
	if n, header := hunkAt(diff, file, line); header != "" {
		return fmt.Sprintf("hunk %d of %s, %q (line %d of the diff), does not match the source (%s)", n.ordinal, file, header, n.diffLine, msg)
	}
	return fmt.Sprintf("a hunk of %s at its line %d does not match the source (%s)", file, line, msg)
}

type hunkPos struct{ ordinal, diffLine int }

var hunkHeaderRE = regexp.MustCompile(`^@@ -([0-9]+)(?:,[0-9]+)? \+[0-9]+(?:,[0-9]+)? @@`)

// hunkAt finds the hunk of file (a -p1 path) whose old side starts at
// line: its place among the file's hunks, its line in the diff and its
// header.
func hunkAt(diff []byte, file string, line int) (hunkPos, string) {
	var current string
	ordinal := 0
	for i, l := range strings.Split(string(diff), "\n") {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			current, ordinal = "", 0
		case strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "+++ "):
			name := strings.TrimSpace(strings.SplitN(l[4:], "\t", 2)[0])
			if name == "/dev/null" {
				continue
			}
			if _, rest, ok := strings.Cut(name, "/"); ok {
				if current != rest {
					ordinal = 0
				}
				current = rest
			}
		case strings.HasPrefix(l, "@@ "):
			m := hunkHeaderRE.FindStringSubmatch(l)
			if m == nil || current != file {
				continue
			}
			ordinal++
			if start, _ := strconv.Atoi(m[1]); start == line {
				return hunkPos{ordinal: ordinal, diffLine: i + 1}, strings.TrimSpace(oneLineTrim(l, 160))
			}
		}
	}
	return hunkPos{}, ""
}

// gitMessage is git's output on one line, at most 400 characters, less
// its advice to allow empty input: the patch source takes an empty file,
// and only that, as the empty patch.
func gitMessage(out []byte) string {
	s := strings.ReplaceAll(strings.TrimSpace(string(out)), ` (allow with "--allow-empty")`, "")
	return oneLineTrim(strings.ReplaceAll(s, "\n", "; "), 400)
}

// errNoGit is the error of a host without git.
var errNoGit = errors.New("the patch source applies diffs with git apply, and git is not on PATH: install it (scripts/install-deps.sh does, or apt-get install git)")

// gitApply runs `git apply args... -` in dir with diff on its standard
// input and returns its combined output.
func gitApply(ctx context.Context, dir string, diff []byte, args ...string) ([]byte, error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, errNoGit
	}
	cmd := exec.CommandContext(ctx, git, append(append([]string{"apply"}, args...), "-")...)
	cmd.Dir, cmd.Env = dir, gitEnv(dir)
	cmd.Stdin = bytes.NewReader(diff)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.Bytes(), err
}

// gitEnv is the whole environment of git apply in dir: outside a
// repository, even when dir lies in one (git apply would then patch only
// the part of the diff inside dir, relative to the repository's root), and
// without any configuration (apply.whitespace, core.autocrlf, ...).
func gitEnv(dir string) []string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	// HOME and XDG_CONFIG_HOME name no directory, for a git older than
	// GIT_CONFIG_GLOBAL (2.32).
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"LC_ALL=C",
		"HOME=" + os.DevNull,
		"XDG_CONFIG_HOME=" + os.DevNull,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(abs),
	}
}
