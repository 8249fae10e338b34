package skewrun

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// borrowed is a provider of a cluster the run does not own (the existing
// provider's kind), recording the order of Down and the removals.
type borrowed struct {
	events *[]string
	shared bool
}

func (b *borrowed) Name() string                       { return "borrowed" }
func (b *borrowed) Up(context.Context) error           { return nil }
func (b *borrowed) IsUp(context.Context) (bool, error) { return true, nil }
func (b *borrowed) RESTConfig() (*rest.Config, error)  { return &rest.Config{}, nil }
func (b *borrowed) KubeconfigPath() string             { return "" }
func (b *borrowed) TestNodes(context.Context) ([]nodes.Node, error) {
	return nil, nil
}
func (b *borrowed) DumpClusterLogs(context.Context, string) error { return nil }
func (b *borrowed) Down(context.Context) error {
	*b.events = append(*b.events, "down")
	return nil
}

// sharedBorrowed also says its cluster is shared.
type sharedBorrowed struct{ borrowed }

func (sharedBorrowed) SharedCluster() string { return "https://cluster.example:6443" }

// leftScenario is a scenario that left something in the cluster, or not.
type leftScenario struct {
	left   bool
	remove func(context.Context, time.Duration) error
}

func (l *leftScenario) LeftInCluster() bool { return l.left }
func (l *leftScenario) Workload() string    { return "StatefulSet skewtest/web" }
func (l *leftScenario) Remove(ctx context.Context, timeout time.Duration) error {
	return l.remove(ctx, timeout)
}

// A failed run on a cluster it shares with its owner must not leave its
// workload there: finishRun removes it after Down (which put the node's own
// kubelet back to finish the pods), and a removal that fails is in the
// run's error beside the kubelet's failure; on a cluster of the run's own, Down
// takes it, and nothing is removed one by one.
func TestFinishRemovesWhatAFailedRunLeftInASharedCluster(t *testing.T) {
	for _, tc := range []struct {
		name      string
		shared    bool
		removeErr error
		want      []string
		wantExit  int
	}{
		{name: "shared cluster", shared: true, want: []string{"down", "remove StatefulSet skewtest/web"}, wantExit: exitcode.Kubelet},
		{name: "shared cluster, removal fails", shared: true, removeErr: errors.New("namespace skewtest (Terminating)"), want: []string{"down", "remove StatefulSet skewtest/web"}, wantExit: exitcode.Kubelet},
		{name: "own cluster", want: []string{"down"}, wantExit: exitcode.Kubelet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var events []string
			b := borrowed{events: &events}
			c := &runCluster{Provider: &b, v: &validated{Options: Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Out: io.Discard, TimeoutFactor: 2}, ArtifactsRoot: t.TempDir()}}
			if tc.shared {
				c.Provider = &sharedBorrowed{b}
			}
			var gotTimeout time.Duration
			c.leave(&leftScenario{left: true, remove: func(_ context.Context, timeout time.Duration) error {
				events = append(events, "remove StatefulSet skewtest/web")
				gotTimeout = timeout
				return tc.removeErr
			}})
			// A scenario that removed all it made is not removed again.
			c.leave(&leftScenario{remove: func(context.Context, time.Duration) error {
				events = append(events, "remove what a scenario did not leave")
				return nil
			}})
			run := &reports.Run{ID: "r1", ArtifactsDir: t.TempDir(), Started: time.Now(), Verdict: reports.Fail, Failure: "hop 1: old pods not cleaned up"}
			_, err := finishRun(context.Background(), c, run, classify(errors.New("hop 1 failed"), exitcode.ErrKubelet))
			if strings.Join(events, ",") != strings.Join(tc.want, ",") {
				t.Errorf("finishRun did %q, want %q", events, tc.want)
			}
			if code := exitcode.Of(err); code != tc.wantExit {
				t.Errorf("exit %d (%v), want %d", code, err, tc.wantExit)
			}
			if tc.shared && gotTimeout != 2*3*time.Minute {
				t.Errorf("the removal was bounded by %s, want the teardown bound scaled by the timeout factor (6m)", gotTimeout)
			}
			if tc.removeErr != nil && !strings.Contains(err.Error(), "https://cluster.example:6443") {
				t.Errorf("the error %q does not name the cluster the workload is left in", err)
			}
		})
	}
}

// bigLogs is a provider whose own log collection writes a file beyond
// reports.MaxLogBytes, as kind's or kops toolbox dump's can.
type bigLogs struct{ borrowed }

func (b *bigLogs) DumpClusterLogs(_ context.Context, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "node"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "node", "journal.log"), bytes.Repeat([]byte("x"), reports.MaxLogBytes+1<<20), 0o644)
}

// What a provider's own log collection wrote is cut as skewtest's own
// logs are, whichever provider wrote it.
func TestCollectLogsCapsTheProvidersFiles(t *testing.T) {
	var events []string
	c := &runCluster{Provider: &bigLogs{borrowed{events: &events}}, v: &validated{Options: Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Out: io.Discard, TimeoutFactor: 1}, ArtifactsRoot: t.TempDir()}}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.CollectLogs(ctx, dir)
	fi, err := os.Stat(filepath.Join(dir, "node", "journal.log"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > reports.MaxLogBytes+200 {
		t.Errorf("the provider's journal is %d bytes after CollectLogs, want at most %d and the note", fi.Size(), reports.MaxLogBytes)
	}
}
