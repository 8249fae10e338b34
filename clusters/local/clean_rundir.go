package local

import (
	"fmt"
	"os"
	"path/filepath"
)

// CheckRunDir tells whether dir is a local run's directory, the only kind
// `skewtest clean` may remove when it looks through the run roots: it
// holds a local state file that parses and names the nodes the run
// directory's name (the run ID) gives, "skewtest-<last 4 of the run ID>"
// for the first node's CNI network and so on. nil when it is one; an
// error saying why not otherwise.
func CheckRunDir(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return fmt.Errorf("no local run state: %w", err)
	}
	st, err := parseState(b)
	if err != nil {
		return fmt.Errorf("%s is not a local run's state: %w", filepath.Join(dir, stateFile), err)
	}
	if len(st.Nodes) == 0 {
		return fmt.Errorf("%s is not a local run's state: it names no node", filepath.Join(dir, stateFile))
	}
	runID := filepath.Base(filepath.Clean(dir))
	for i, ns := range st.Nodes {
		want := layoutOf(dir, i).state(runID)
		if ns.Name != want.Name || ns.CNINetwork != want.CNINetwork {
			return fmt.Errorf("%s is not the state of run %s: node %d is %s, network %q (want %s, %q)",
				filepath.Join(dir, stateFile), runID, i, ns.Name, ns.CNINetwork, want.Name, want.CNINetwork)
		}
	}
	return nil
}
