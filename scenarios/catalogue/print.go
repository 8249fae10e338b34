package catalogue

import (
	"fmt"
	"io"
	"strings"
)

// Write prints the catalogue for `skewtest scenarios`: per entry its name,
// shape or fault, status and Ginkgo label, what it plants and checks, and
// its expected outcome per kubelet version range with the upstream
// references and the fix, and a known bug's exact symptom. runsOn names
// the providers an entry that runs runs on.
func Write(w io.Writer, entries []Entry, runsOn func(Entry) []string) error {
	counts := map[Status]int{}
	kinds := map[Kind]int{}
	for _, e := range entries {
		counts[e.Status]++
		kinds[e.Kind]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d scenarios (%d shapes, %d faults): %d run, %d need driver features, %d not yet implemented. Run them all: make test-skew GINKGO_ARGS=-ginkgo.label-filter=%s\n",
		len(entries), kinds[Shape], kinds[Fault], counts[Runs], counts[NeedsDriver], counts[NotYet], CatalogueLabel)
	for _, e := range entries {
		kind := string(e.Kind)
		if e.Item > 0 {
			kind = fmt.Sprintf("fault %d", e.Item)
		}
		status := string(e.Status)
		switch {
		case e.Status == Runs:
			status = "runs on " + strings.Join(runsOn(e), ", ")
		case e.Waits != "":
			status += ": " + e.Waits
		}
		fmt.Fprintf(&b, "\n%s (%s) · %s · label %s\n", e.Name, kind, status, e.Label())
		fmt.Fprintf(&b, "  plants: %s\n", e.Plants)
		fmt.Fprintf(&b, "  checks: %s\n", e.Checks)
		for _, x := range e.Expect {
			fmt.Fprintf(&b, "  kubelet %s → %s: %s", x.Versions(), x.Outcome, x.Says)
			var refs []string
			for _, r := range x.Refs {
				refs = append(refs, r.ID+" "+r.URL)
			}
			if len(refs) > 0 {
				fmt.Fprintf(&b, " [%s]", strings.Join(refs, "; "))
			}
			if x.FixedIn != "" {
				fmt.Fprintf(&b, " fixed in %s", x.FixedIn)
			} else if x.Outcome == KnownBug {
				b.WriteString(" not fixed yet")
			}
			b.WriteString("\n")
			if x.Outcome == KnownBug {
				fmt.Fprintf(&b, "    symptom (%s), exactly: %s\n", x.Bug, x.Symptom)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
