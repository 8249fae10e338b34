package suiteconfig

import (
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters"
)

func TestDeadlinesLeaveTheTeardownItsTime(t *testing.T) {
	t.Setenv("SKEWTEST_TIMEOUT_FACTOR", "")
	now := time.Now()
	for _, p := range []string{"local", "kind", "kops"} {
		deadline := now.Add(150 * time.Minute)
		grace, timeout, err := deadlines(p, now, deadline, true)
		if err != nil {
			t.Fatalf("PROVIDER=%s: %v", p, err)
		}
		if grace != clusters.TeardownBound(p) {
			t.Errorf("PROVIDER=%s: grace period %s, want the teardown bound %s", p, grace, clusters.TeardownBound(p))
		}
		if end := now.Add(timeout + grace); !end.Before(deadline) {
			t.Errorf("PROVIDER=%s: suite timeout %s plus grace %s ends at or after go test's deadline", p, timeout, grace)
		}
		if _, timeout, _ := deadlines(p, now, time.Time{}, false); timeout != 0 {
			t.Errorf("PROVIDER=%s: no go test deadline, yet a suite timeout of %s", p, timeout)
		}
	}
	if _, _, err := deadlines("kops", now, now.Add(30*time.Minute), true); err == nil {
		t.Error("a go test deadline shorter than a kops teardown was accepted")
	}
	t.Setenv("SKEWTEST_TIMEOUT_FACTOR", "3")
	if grace, _, _ := deadlines("local", now, time.Time{}, false); grace != 3*clusters.TeardownBound("local") {
		t.Errorf("SKEWTEST_TIMEOUT_FACTOR=3: grace %s, want %s", grace, 3*clusters.TeardownBound("local"))
	}
	if clusters.TeardownBound("kops") <= clusters.TeardownBound("local") {
		t.Error("a kops teardown (kops delete cluster and the sweep) is bounded no longer than a local one")
	}
}
