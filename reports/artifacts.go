package reports

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names WriteAll writes in the artifacts dir.
const (
	MarkdownFileName = "report.md"
	JSONFileName     = "run.json"
)

// FindFiles calls fn with every regular file named name under dir,
// recursively, in lexical order. dir may be a symlink; the symlinks below
// it (such as $ARTIFACTS/latest) are not followed, so that a file is
// found once. An error walking or from fn stops the search and is
// returned.
func FindFiles(dir, name string, fn func(path string) error) error {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != name || !d.Type().IsRegular() {
			return nil
		}
		return fn(path)
	})
}

// DefaultArtifactsDir is $ARTIFACTS when set and non-empty (Prow sets it
// and collects junit_*.xml from it), else ./_artifacts/<runID>.
//
// $ARTIFACTS is one dir for the whole CI job: runs sharing a job share it,
// and the later run's report.md and run.json replace the earlier one's.
func DefaultArtifactsDir(runID string) string {
	if dir := os.Getenv("ARTIFACTS"); dir != "" {
		return dir
	}
	return "." + string(filepath.Separator) + filepath.Join("_artifacts", runID)
}

// NewRunID returns an ID like 20261130-072100-1a2b: now in UTC to the
// second, then 4 random hex digits so runs started in the same second
// differ.
func NewRunID(now time.Time) string {
	var b [2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// JUnitFileName is junit_skewtest_<scenario>.xml with the scenario lowered
// and every character outside [a-z0-9-] turned into '-'. Underscores are
// turned too: TestGrid reads junit_<context>_<timestamp>.xml and splits on
// them.
func JUnitFileName(scenario string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(scenario) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	for strings.Contains(s, "--") {
		s = strings.ReplaceAll(s, "--", "-")
	}
	if s == "" {
		s = "unnamed"
	}
	return "junit_skewtest_" + s + ".xml"
}

// WriteAll writes report.md, junit_skewtest_<scenario>.xml and run.json
// into dir, creating it (0755) if needed. Each file is written to a
// temporary file in dir and renamed into place, so a reader never sees a
// half-written file. When run.ArtifactsDir is empty the files record dir
// as the artifacts dir (run itself is not modified). It writes every file
// it can and returns the paths written, in that order, with the errors of
// the others joined.
func WriteAll(dir string, run *Run) (paths []string, err error) {
	if run == nil {
		return nil, errors.New("reports: nil run")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("reports: creating artifacts dir: %w", err)
	}
	r := *run
	if r.ArtifactsDir == "" {
		r.ArtifactsDir = dir
	}
	files := []struct {
		name  string
		write func(io.Writer, *Run) error
	}{
		{MarkdownFileName, WriteMarkdown},
		{JUnitFileName(run.Scenario), WriteJUnit},
		{JSONFileName, WriteJSON},
	}
	var errs []error
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := WriteFileAtomic(p, func(w io.Writer) error { return f.write(w, &r) }); err != nil {
			errs = append(errs, fmt.Errorf("reports: writing %s: %w", p, err))
			continue
		}
		paths = append(paths, p)
	}
	return paths, errors.Join(errs...)
}

// writeFileAtomic writes path (mode 0644) through a temporary file in the
// same dir and a rename.
func WriteFileAtomic(path string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriter(f)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// Summary is a one-paragraph plain-text summary for terminals: verdict,
// the failure, each hop's time to cleanup, deviations and where the report
// is.
func Summary(run *Run) string {
	if run == nil {
		return "skewtest: no run"
	}
	var parts []string
	head := "skewtest"
	if s := oneLine(run.Scenario); s != "" {
		head += " " + s
	}
	verdict := strings.ToUpper(strings.ReplaceAll(string(run.Verdict), "-", " "))
	if verdict == "" {
		verdict = "NO VERDICT"
	}
	head += ": " + oneLine(verdict)
	var ctx []string
	if len(run.Plan) > 0 {
		ctx = append(ctx, "plan "+fmtPlan(run.Plan, " → "))
	}
	if run.Provider != "" || run.Node != "" {
		ctx = append(ctx, strings.TrimSpace("on "+oneLine(run.Provider)+" node "+oneLine(run.Node)))
	}
	if d, ok := span(run.Started, run.Finished); ok {
		ctx = append(ctx, "took "+fmtDuration(d))
	}
	if len(ctx) > 0 {
		head += " (" + strings.Join(ctx, ", ") + ")"
	}
	parts = append(parts, head+".")
	if run.Verdict == Fail {
		f := oneLine(run.Failure)
		if f == "" {
			f = "no failure recorded"
		}
		parts = append(parts, "Failure: "+f+".")
	}
	var hops []string
	for _, h := range run.Hops {
		s := fmt.Sprintf("hop %d %s %s → %s ", h.Number, oneLine(h.Direction), oneLine(withGates(h.From, h.FromGates)), oneLine(withGates(h.To, h.ToGates)))
		s = strings.Join(strings.Fields(s), " ") + " "
		switch d, ok := cleanupTime(h); {
		case h.Verdict == Skipped:
			s += "skipped"
		case ok:
			s += fmtSeconds(d) + "s"
		default:
			s += "not measured"
		}
		if h.Verdict == Fail {
			s += " (failed)"
		}
		hops = append(hops, s)
	}
	if len(hops) > 0 {
		parts = append(parts, "Time to cleanup after kubelet start: "+strings.Join(hops, "; ")+".")
	}
	for _, h := range run.Hops {
		if h.Restored != "" {
			parts = append(parts, fmt.Sprintf("Before hop %d, restored: %s.", h.Number, strings.TrimSuffix(oneLine(h.Restored), ".")))
		}
	}
	// A tour's unreached pairs already failed it, with the first named.
	for _, u := range run.Unreached {
		if len(run.Trails) > 0 {
			break
		}
		parts = append(parts, fmt.Sprintf("Not reached: %s %s → %s: %s.", unreachedName(u), oneLine(u.From), oneLine(u.To), strings.TrimSuffix(oneLine(u.Reason), ".")))
	}
	exp, unexp := deviations(run)
	if len(exp) > 0 || len(unexp) > 0 {
		parts = append(parts, fmt.Sprintf("Deviations: %d expected, %d unexpected.", len(exp), len(unexp)))
	}
	if run.ArtifactsDir != "" {
		parts = append(parts, "Report: "+filepath.Join(run.ArtifactsDir, MarkdownFileName)+".")
	}
	return strings.Join(parts, " ")
}
