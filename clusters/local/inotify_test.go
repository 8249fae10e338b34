package local

import (
	"strconv"
	"testing"

	"sigs.k8s.io/skewtest/clusters/internal/sysctl"
)

// A cluster that fits under the host's inotify instances changes nothing;
// one that does not asks for the run's value; one too large even for that
// is refused. Sixteen nodes at the kernel's default of 128, as measured,
// need the raise.
func TestInotifyFit(t *testing.T) {
	run, err := strconv.Atoi(sysctl.RunValues[inotifyInstancesKey])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		nodes, held, limit int
		raise, refused     bool
	}{
		{nodes: 1, held: 5, limit: 128},
		{nodes: 8, held: 5, limit: 128},
		{nodes: 16, held: 5, limit: 128, raise: true},
		{nodes: 16, held: 5, limit: 4096},
		{nodes: 16, held: 1000, limit: 128, refused: true},
	} {
		need, raise, err := inotifyFit(tc.nodes, tc.held, tc.limit, run)
		if raise != tc.raise || (err != nil) != tc.refused {
			t.Errorf("%d nodes, %d held, limit %d: need %d, raise %v, err %v; want raise %v, refused %v", tc.nodes, tc.held, tc.limit, need, raise, err, tc.raise, tc.refused)
		}
	}
}
