package skewrun

import (
	"context"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// A batch with one bad run is refused whole, naming the run and the
// setting, before anything is built, locked or made.
func TestRunBatchRejectsBadInputBeforeCreatingAnything(t *testing.T) {
	d := newRunDirs(t)
	base := Options{ArtifactsDir: d.artifacts, RunRoot: d.runRoot, CacheDir: d.cache, Kubelets: []string{"file:/does/not/exist", "file:/also/missing", "file:/does/not/exist"}}
	bad := base
	bad.Scenario = "no-such-fault"
	res, err := RunBatch(context.Background(), base, []Job{{Name: "signoff", Options: base}, {Name: "broken entry", Options: bad}})
	if res != nil || !errors.Is(err, exitcode.ErrInvalid) || exitcode.Of(err) != exitcode.Invalid {
		t.Fatalf("RunBatch = %v, %v; want nil and bad input (exit 2)", res, err)
	}
	for _, want := range []string{`run "broken entry"`, "SCENARIO=no-such-fault"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
	d.assertNothingCreated(t)
}
