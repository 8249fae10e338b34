package catalogue

import (
	"fmt"
	"strings"
)

// Markdown is the catalogue's entry list as docs/catalogue-entries.md
// holds it (ci/docs_test.go generates and checks the page): per entry its
// name, kind, label, where it runs and what it needs of a node, what it
// plants and checks, and its expected outcome per kubelet version range
// with the references, the fix and a known bug's exact symptom. runsOn
// names the providers an entry that runs runs on; regenerate says how to
// rewrite the page.
func Markdown(entries []Entry, runsOn func(Entry) []string, regenerate string) string {
	var b strings.Builder
	counts, kinds := map[Status]int{}, map[Kind]int{}
	for _, e := range entries {
		counts[e.Status]++
		kinds[e.Kind]++
	}
	b.WriteString("# The catalogue's entries\n\n")
	b.WriteString("<!-- Generated from the catalogue (scenarios/reconstruction, each entry beside its code) by `" + regenerate + "`. Do not edit. -->\n\n")
	b.WriteString("This page is generated from the catalogue's data\n")
	b.WriteString("(each entry declared beside its code in `scenarios/reconstruction`), as\n")
	b.WriteString("`go run ./cmd/skewtest scenarios`\n")
	b.WriteString("prints it; how an entry is judged, and what the runs saw, is\n")
	b.WriteString("[the catalogue](catalogue.md). Do not edit it by hand: change the\n")
	b.WriteString("entries and regenerate it with\n\n")
	b.WriteString("```sh\n" + regenerate + "\n```\n\n")
	fmt.Fprintf(&b, "%d entries (%d shapes, %d faults): %d run, %d need driver features, %d not yet implemented.\n",
		len(entries), kinds[Shape], kinds[Fault], counts[Runs], counts[NeedsDriver], counts[NotYet])
	b.WriteString("An entry runs on the providers whose nodes have every capability it\n")
	b.WriteString("needs (each provider's descriptor declares its nodes'; [contributing](contributing.md)).\n")
	for _, e := range entries {
		kind := string(e.Kind)
		if e.Item > 0 {
			kind = fmt.Sprintf("fault %d", e.Item)
		}
		fmt.Fprintf(&b, "\n## `%s`\n\n", e.Name)
		fmt.Fprintf(&b, "%s · label `%s` · %s\n\n", kind, e.Label(), mdStatus(e, runsOn))
		fmt.Fprintf(&b, "- **Plants**: %s.\n", mdText(e.Plants))
		fmt.Fprintf(&b, "- **Checks**: %s.\n", mdText(e.Checks))
		for _, x := range e.Expect {
			fmt.Fprintf(&b, "- **Kubelet %s**: %s: %s.", mdText(x.Versions()), x.Outcome, mdText(x.Says))
			var refs []string
			for _, r := range x.Refs {
				refs = append(refs, fmt.Sprintf("[%s](%s)", r.ID, r.URL))
			}
			if len(refs) > 0 {
				fmt.Fprintf(&b, " %s.", strings.Join(refs, ", "))
			}
			if x.FixedIn != "" {
				fmt.Fprintf(&b, " Fixed in %s.", mdText(x.FixedIn))
			} else if x.Outcome == KnownBug {
				b.WriteString(" Not fixed yet.")
			}
			b.WriteString("\n")
			if x.Outcome == KnownBug {
				fmt.Fprintf(&b, "  - Symptom (%s), exactly: %s\n", mdText(x.Bug), mdCode(x.Symptom.String()))
			}
		}
	}
	return b.String()
}

// mdStatus says where an entry runs and what it needs of a node, or why
// it does not run.
func mdStatus(e Entry, runsOn func(Entry) []string) string {
	if e.Status != Runs {
		if e.Waits != "" {
			return fmt.Sprintf("%s: %s", e.Status, mdText(e.Waits))
		}
		return string(e.Status)
	}
	s := "runs on " + strings.Join(runsOn(e), ", ")
	if len(e.Needs) > 0 {
		var needs []string
		for _, c := range e.Needs {
			needs = append(needs, "`"+string(c)+"`")
		}
		s += " (needs " + strings.Join(needs, ", ") + ")"
	}
	return s
}

// mdText escapes what Markdown would take for HTML or emphasis in plain
// text, and drops a final full stop the page adds itself.
func mdText(s string) string {
	s = strings.TrimSuffix(s, ".")
	return strings.NewReplacer("<", "&lt;", ">", "&gt;", "*", `\*`, "_", `\_`).Replace(s)
}

// mdCode is s as inline code, fenced by more backticks than it holds.
func mdCode(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}
