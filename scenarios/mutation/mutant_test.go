package mutation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec" // git apply --check on the base version's source
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/internal/testgate"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
)

// The project's set: at least 15 mutants that count, each with what it
// breaks, the area it changes and a diff of the kubelet's source; every
// area and every way through covered; killers that name catalogue
// entries; every equivalent one with its reason.
func TestSet(t *testing.T) {
	set, err := Set()
	if err != nil {
		t.Fatal(err)
	}
	areas, ways := map[string]int{}, map[string]int{}
	scored := 0
	for _, m := range set {
		if m.Equivalent == "" {
			scored++
		}
		areas[m.Area]++
		ways[m.Way]++
		if len(m.Breaks) < 40 || !strings.HasSuffix(m.Breaks, ".") {
			t.Errorf("mutant %s: Breaks %q is not a sentence saying what it breaks", m.Name, m.Breaks)
		}
		if m.Reverts != "none" && !strings.Contains(m.Reverts, "#") {
			t.Errorf("mutant %s: Reverts %q names no upstream PR or issue (or none)", m.Name, m.Reverts)
		}
		if !bytes.HasPrefix(m.Patch(), []byte("diff --git a/")) || !bytes.Contains(m.Patch(), []byte("\n+++ b/")) {
			t.Errorf("mutant %s: its patch is not a git diff of the kubelet's source", m.Name)
		}
		for _, k := range m.Killers {
			if _, ok := reconstruction.CatalogueEntry(k); !ok {
				t.Errorf("mutant %s: killer %q is no catalogue entry", m.Name, k)
			}
		}
	}
	if scored < 15 {
		t.Errorf("%d mutants count, want at least 15", scored)
	}
	for _, a := range Areas {
		if areas[a] == 0 {
			t.Errorf("no mutant changes the %s", a)
		}
	}
	for w := range Ways {
		if ways[w] == 0 {
			t.Errorf("no mutant proves the way through %q closed", w)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	diff := "diff --git a/x.go b/x.go\n--- a/x.go\n+++ b/x.go\n"
	for _, tc := range []struct{ name, text, want string }{
		{"no blank line", "Breaks: x.\nReverts: none\nArea: emptyDir\n" + diff, "blank line"},
		{"no diff", "Breaks: x.\nReverts: none\nArea: emptyDir\n\nnot a diff\n", "diff --git"},
		{"no area", "Breaks: x.\nReverts: none\n\n" + diff, "no Area"},
		{"unknown area", "Breaks: x.\nReverts: none\nArea: scheduler\n\n" + diff, `area "scheduler"`},
		{"unknown way", "Breaks: x.\nReverts: none\nArea: emptyDir\nWay: sideways\n\n" + diff, `way "sideways"`},
		{"unknown key", "Breaks: x.\nReverts: none\nArea: emptyDir\nColour: red\n\n" + diff, "unknown header Colour"},
		{"twice", "Breaks: x.\nBreaks: y.\nReverts: none\nArea: emptyDir\n\n" + diff, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse("m", []byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parse: %v, want an error naming %q", err, tc.want)
			}
		})
	}
	m, err := parse("m", []byte("Breaks: x.\nReverts: none\nArea: emptyDir\nKillers: a, b\nEquivalent: nothing kept\n\n"+diff))
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Patch()) != diff || strings.Join(m.Killers, "|") != "a|b" || m.Equivalent != "nothing kept" {
		t.Errorf("parsed %+v", m)
	}
}

func TestSelect(t *testing.T) {
	set := []Mutant{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	got, err := Select(set, "c, a")
	if err != nil || len(got) != 2 || got[0].Name != "a" || got[1].Name != "c" {
		t.Errorf("Select(c, a) = %v, %v; want a, c in the set's order", got, err)
	}
	if all, _ := Select(set, ""); len(all) != 3 {
		t.Errorf("Select() = %d mutants, want the whole set", len(all))
	}
	if _, err := Select(set, "a,zz"); err == nil || !strings.Contains(err.Error(), "no mutant zz") || !strings.Contains(err.Error(), "a, b, c") {
		t.Errorf("Select(a,zz): %v; want the unknown name and the set", err)
	}
}

// Every mutant applies to the base version's source, as the patch source
// builds it: a diff the kubelet's source moved away from is caught here,
// not after minutes of a batch.
func TestMutantsApply(t *testing.T) {
	testgate.RequireTools(t, "go", "git")
	base, _, err := Versions()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+base).Output()
	if err != nil {
		testgate.SkipOrFail(t, fmt.Sprintf("the Go module proxy did not give k8s.io/kubernetes@%s: %v", base, err), "run where the Go module proxy is reachable")
		return
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download: %v %s", err, out)
	}
	set, err := Set()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range set {
		f := filepath.Join(t.TempDir(), m.Name+".diff")
		if err := os.WriteFile(f, m.Patch(), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("git", "apply", "--check", "-p1", f)
		cmd.Dir = mod.Dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("mutant %s does not apply to k8s.io/kubernetes@%s: %v\n%s", m.Name, base, err, out)
		}
	}
}
