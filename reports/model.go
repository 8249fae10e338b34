// Package reports turns one run of a scenario into what its readers need: a
// Markdown sign-off report for the release team, JUnit XML for CI dashboards
// (Prow and TestGrid read $ARTIFACTS/junit_*.xml), JSON with the same
// content, and an artifacts directory.
package reports

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Verdict is the outcome of a run or a check.
type Verdict string

const (
	// Pass: every check passed with no deviation.
	Pass Verdict = "pass"
	// PassWithExpectedDeviations: every check passed, and some observed
	// values differ from the ideal in ways the scenario documents (for
	// example local-volume reconstruction errors). Reported apart from Pass.
	PassWithExpectedDeviations Verdict = "pass-with-expected-deviations"
	// Fail: a step failed or an unexpected deviation was seen.
	Fail Verdict = "fail"
	// Skipped: the step did not run because an earlier one failed.
	Skipped Verdict = "skipped"
)

// Run is everything one scenario run recorded.
type Run struct {
	ID       string    `json:"id"`
	Scenario string    `json:"scenario"`
	Provider string    `json:"provider"`
	Node     string    `json:"node"`
	Plan     []string  `json:"plan"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Environment is an ordered table: host, kernel, Go, API server
	// version, container runtime, volume kind, replicas...
	Environment []KeyValue `json:"environment"`
	Binaries    []Binary   `json:"binaries"`
	Steps       []Step     `json:"steps"`
	Hops        []Hop      `json:"hops"`
	// Trails are set by a matrix tour: the hop sequence split into trails,
	// each run on its own node at once. Hops then carry their Node.
	Trails []Trail `json:"trails,omitempty"`
	// Unreached are the (from, to) pairs a matrix tour planned but did not
	// run, with why (an earlier hop on the same trail left the node
	// unusable, the run was interrupted, ...), and the hops of a run whose
	// precondition could not be restored after an earlier hop's known bug
	// changed the node (scenarios.ErrNotReached).
	Unreached []UnreachedHop `json:"unreached,omitempty"`
	// Timings are run-level phases: cluster bring-up, workload Running,
	// teardown, the whole run.
	Timings []Timing `json:"timings,omitempty"`
	Verdict Verdict  `json:"verdict"`
	// Failure is the first failure, one line, naming the UID, path or
	// metric; empty on a pass.
	Failure string `json:"failure,omitempty"`
	// Infrastructure says the run failed because of its infrastructure
	// (the cluster did not come up, a build or download failed, teardown
	// failed), not because of the kubelet under test: JUnit reports it as
	// an <error>, which dashboards show as a flake, not a regression.
	Infrastructure bool `json:"infrastructure,omitempty"`
	// ArtifactsDir is where this run's files are.
	ArtifactsDir string `json:"artifactsDir,omitempty"`
	// InitialReconstructionPath is Hop.ReconstructionPath for the plan's
	// first kubelet, read from its log before the first hop.
	InitialReconstructionPath string `json:"initialReconstructionPath,omitempty"`
}

// Fail sets the run's verdict to Fail with why, its first failure.
func (r *Run) Fail(why string) { r.Verdict, r.Failure = Fail, why }

// KeyValue is one row of an ordered table.
type KeyValue struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Binary is one binary a run used, as resolved once per run.
type Binary struct {
	Component string `json:"component"`
	Version   string `json:"version"`
	Source    string `json:"source"`
	SHA256    string `json:"sha256"`
	// BuildTags are the Go build tags a module build used (providerless
	// where the proxy lacks a cloud provider's staging module), so a
	// reviewer sees the binary was not the default build.
	BuildTags string `json:"buildTags,omitempty"`
	// PatchSHA256 and PatchFiles (comma-separated) name the diff a patch:
	// build applied to its version's source and the files it touched, so a
	// reviewer knows which change the run tested; an empty patch (a
	// control) has the sha256 and no files.
	PatchSHA256 string `json:"patchSHA256,omitempty"`
	PatchFiles  string `json:"patchFiles,omitempty"`
}

// Step is one named step of a scenario, in order.
type Step struct {
	Index    int       `json:"index"`
	Name     string    `json:"name"`
	Hop      int       `json:"hop,omitempty"` // 1-based hop number; 0 for steps outside hops
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Verdict  Verdict   `json:"verdict"`
	// Error is why the step failed, with the UID, path or metric.
	Error      string      `json:"error,omitempty"`
	Commands   []Command   `json:"commands,omitempty"`
	Evidence   []Evidence  `json:"evidence,omitempty"`
	Deviations []Deviation `json:"deviations,omitempty"`
	// Notes are short progress facts worth keeping ("node Ready at v1.36.3
	// after 0.7s").
	Notes []string `json:"notes,omitempty"`
}

// Duration of the step.
func (s Step) Duration() time.Duration { return s.Finished.Sub(s.Started) }

// Command is one command a step ran on a node.
type Command struct {
	Node     string        `json:"node,omitempty"`
	Command  string        `json:"command"`
	Stdout   string        `json:"stdout,omitempty"`
	Stderr   string        `json:"stderr,omitempty"`
	ExitCode int           `json:"exitCode"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
}

// Evidence is something a step observed: a node-state snapshot, a diff, a
// metrics scrape. Text is what the report shows; the full content, if
// larger, is in the artifact at Path (relative to the artifacts dir).
type Evidence struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // "snapshot", "diff", "metrics", "log", "text"
	Text string `json:"text,omitempty"`
	Path string `json:"path,omitempty"`
}

// Deviation is an observed value that differs from the ideal. Expected
// deviations are documented by the scenario (Reason says why) and do not
// fail the run; unexpected ones do.
type Deviation struct {
	Check    string `json:"check"`
	Expected string `json:"expected"`
	Observed string `json:"observed"`
	// Reason is the scenario's documented explanation; empty means the
	// deviation was not expected.
	Reason string `json:"reason,omitempty"`
}

// IsExpected reports whether the scenario documented this deviation.
func (d Deviation) IsExpected() bool { return d.Reason != "" }

// NotSeenPrefix starts the Observed of a deviation that records a known
// bug the catalogue expected and the run did not see.
const NotSeenPrefix = "not seen: "

// Reproduced tells whether d records a known bug that reproduced: an
// expected deviation that does not say it was not seen.
func (d Deviation) Reproduced() bool {
	return d.IsExpected() && !strings.HasPrefix(d.Observed, NotSeenPrefix)
}

// Hop is one kubelet version change and what it measured.
type Hop struct {
	Number int `json:"number"` // 1-based
	// Node is the node the hop ran on; set when a run uses several nodes
	// (a matrix tour's trails).
	Node      string `json:"node,omitempty"`
	From      string `json:"from"`
	To        string `json:"to"`
	Direction string `json:"direction"` // "upgrade", "downgrade", "same"
	// FromGates and ToGates are the kubelet feature gates the hop's two
	// plan entries set (v1.28.15+NewVolumeManagerReconstruction=false);
	// two entries of one version with different gates make a hop too.
	FromGates map[string]bool `json:"fromGates,omitempty"`
	ToGates   map[string]bool `json:"toGates,omitempty"`
	// ReconstructionPath is which reconstruction the To kubelet ran, read
	// from its own log since its start (not inferred from its version or
	// gates): "new", "old", "none seen (<why>)" or "both" (lines of both
	// in one kubelet's log: an error). Empty when not read.
	ReconstructionPath string `json:"reconstructionPath,omitempty"`
	// OldPodUIDs are the UIDs force-deleted while the kubelet was down.
	OldPodUIDs []string `json:"oldPodUIDs,omitempty"`
	// Restored says what was restored before the hop stopped its kubelet,
	// and why: what the known bug of the hop before changed that this
	// hop's fault needs (a running pod's volume unmounted, a container
	// never started again), and how it was brought back. Empty when
	// nothing was.
	Restored string `json:"restored,omitempty"`
	// Timings are ordered phase durations, e.g. "kubelet stop",
	// "node Ready", "old mounts gone", "old pod dirs gone"; the cleanup
	// ones are measured from the kubelet's start.
	Timings []Timing `json:"timings"`
	Metrics []Metric `json:"metrics,omitempty"`
	// VolumesAtStart are the old pods' volume directories the hop's
	// kubelet found when it started: what it had to reconstruct, and what
	// reconstruct_volume_operations_total counts.
	VolumesAtStart int `json:"volumesAtStart,omitempty"`
	// Kubelet is what the hop's kubelet used from its start until the
	// re-created pods ran, the old pods' state gone (until the metrics
	// check on a hop that did not wait for them); nil when the node
	// cannot tell (nodes.WithKubeletUsage).
	Kubelet *KubeletUsage `json:"kubelet,omitempty"`
	Verdict Verdict       `json:"verdict"`
}

// KubeletUsage is what one kubelet process used since it started.
type KubeletUsage struct {
	PID        int     `json:"pid"`
	CPUSeconds float64 `json:"cpuSeconds"`
	// PeakRSSBytes is its peak resident memory (VmHWM).
	PeakRSSBytes int64 `json:"peakRSSBytes"`
}

// Timing is one measured phase.
type Timing struct {
	Phase    string        `json:"phase"`
	Duration time.Duration `json:"duration"`
}

// Metric is one kubelet metric read after a hop, with what was expected.
type Metric struct {
	Name     string  `json:"name"`
	Value    float64 `json:"value"`
	Present  bool    `json:"present"` // false when this kubelet version does not expose it
	Expected string  `json:"expected,omitempty"`
	Verdict  Verdict `json:"verdict,omitempty"`
	Reason   string  `json:"reason,omitempty"`
}

// Trail is one node's share of a matrix tour: a plan that node ran from
// its first version, hop after hop.
type Trail struct {
	Node    string   `json:"node"`
	Plan    []string `json:"plan"`
	Verdict Verdict  `json:"verdict"`
}

// UnreachedHop is a planned hop that did not run, and why.
type UnreachedHop struct {
	// Number is the hop's number in its run's plan; 0 for a tour's pair,
	// whose hops are numbered as they ran.
	Number int    `json:"number,omitempty"`
	Node   string `json:"node,omitempty"`
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
}

// unreachedName is "hop N", or "the hop" for a tour's pair, which has no
// number.
func unreachedName(u UnreachedHop) string {
	if u.Number > 0 {
		return fmt.Sprintf("hop %d", u.Number)
	}
	return "the hop"
}

// SkipReason is why a skipped step did not run: its own error when it
// found its hop cannot be reached, its note when a step before it found
// that, else an earlier failure.
func SkipReason(s Step) string {
	switch {
	case s.Error != "":
		return "not reached: " + oneLine(s.Error)
	case len(s.Notes) > 0:
		return oneLine(s.Notes[0])
	}
	return "an earlier step failed"
}

// withGates renders a hop's version with its entry's feature gates as the
// plan writes them, sorted by name: "v1.28.15+NewVolumeManagerReconstruction=false".
func withGates(v string, gates map[string]bool) string {
	names := make([]string, 0, len(gates))
	for n := range gates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v += fmt.Sprintf("+%s=%t", n, gates[n])
	}
	return v
}

// ReconstructionPaths is the reconstruction path of each kubelet of the
// run in plan order, the first kubelet's and then each hop's, as read from
// their logs: "new → old → new" for a replay of KEP-3756's sign-off
// (v1.28 → v1.27 → v1.28). A kubelet whose log was not read is "—". Empty
// when no path was read.
func ReconstructionPaths(run *Run) string {
	seen := run.InitialReconstructionPath != ""
	paths := []string{orDash(run.InitialReconstructionPath)}
	for _, h := range run.Hops {
		seen = seen || h.ReconstructionPath != ""
		paths = append(paths, orDash(h.ReconstructionPath))
	}
	if !seen {
		return ""
	}
	return strings.Join(paths, " → ")
}
