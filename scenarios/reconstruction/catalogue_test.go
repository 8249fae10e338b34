package reconstruction

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

// Every entry is well formed (catalogue.Entry.Check), named and labelled
// once, and the catalogue's numbered faults are all there.
func TestCatalogueIsWellFormed(t *testing.T) {
	all := Catalogue()
	if len(all) != len(registry.entries) || len(all) < 12 {
		t.Errorf("%d entries of %d registered, want them all and at least 12", len(all), len(registry.entries))
	}
	names, labels := map[string]bool{}, map[string]bool{}
	items := map[int]bool{}
	for _, e := range all {
		if names[e.Name] || labels[e.Label()] {
			t.Errorf("duplicate entry %s", e.Name)
		}
		names[e.Name], labels[e.Label()] = true, true
		if err := e.Check(); err != nil {
			t.Error(err)
		}
		if e.Kind == catalogue.Fault {
			items[e.Item] = true
		}
	}
	for i := 1; i <= 12; i++ {
		if !items[i] {
			t.Errorf("fault %d of the catalogue's list has no entry", i)
		}
	}
	if _, ok := CatalogueEntry("reboot"); !ok {
		t.Error("CatalogueEntry(reboot) found nothing")
	}
}

// The catalogue's order: baseline shapes, added shapes, numbered faults,
// the others; ties by name.
func TestCatalogueOrder(t *testing.T) {
	var got []string
	for _, e := range Catalogue() {
		got = append(got, e.Name)
	}
	if got[0] != "csi-filesystem" || got[1] != "local-volume" {
		t.Errorf("the baseline shapes first: %v", got)
	}
	for i := 1; i < len(got); i++ {
		a, _ := CatalogueEntry(got[i-1])
		b, _ := CatalogueEntry(got[i])
		if a.Kind == catalogue.Fault && b.Kind == catalogue.Fault && a.Item != 0 && (b.Item != 0 && b.Item < a.Item) {
			t.Errorf("%s (%d) before %s (%d)", a.Name, a.Item, b.Name, b.Item)
		}
		if a.Kind == catalogue.Fault && b.Kind == catalogue.Shape {
			t.Errorf("fault %s before shape %s", a.Name, b.Name)
		}
		if a.Kind == catalogue.Fault && a.Item == 0 && b.Item != 0 {
			t.Errorf("unnumbered %s before numbered %s", a.Name, b.Name)
		}
	}
}

// shapes-restart's workload is every shape the scenario adds.
func TestShapesRestartHasEveryShape(t *testing.T) {
	f, err := LookupFault("shapes-restart")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(f.Shapes, ","), strings.Join(allShapes(), ","); got != want {
		t.Errorf("shapes-restart's shapes %s, want every shape: %s", got, want)
	}
}

func TestWrite(t *testing.T) {
	var b strings.Builder
	if err := catalogue.Write(&b, Catalogue(), func(catalogue.Entry) []string { return []string{"here", "there"} }); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, e := range Catalogue() {
		if !strings.Contains(out, "\n"+e.Name+" (") || !strings.Contains(out, "label "+e.Label()) {
			t.Errorf("entry %s or its label missing", e.Name)
		}
		if e.Status == catalogue.Runs && !strings.Contains(out, "runs on here, there · label "+e.Label()) {
			t.Errorf("entry %s: where it runs missing", e.Name)
		}
		for _, x := range e.Expect {
			for _, r := range x.Refs {
				if !strings.Contains(out, r.ID+" "+r.URL) {
					t.Errorf("%s: reference %s missing", e.Name, r.ID)
				}
			}
		}
	}
	for _, want := range []string{"(fault 5)", "known bug", "not fixed yet", "label-filter=catalogue",
		"symptom (reconstruction failure), exactly: shows pods/<old-uid> dir, pods/<old-uid>/volumes/kubernetes.io~csi/<pv>/mount mounted; logs",
		"reconstruct_volume_operations_errors_total == " + string(catalogue.Unreconstructable)} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}

	// Every entry runs today; an entry added before its code must still
	// print what it waits for.
	waiting := Catalogue()[0]
	waiting.Name, waiting.Status, waiting.Waits = "waiting-entry", catalogue.NeedsDriver, "a stall knob"
	b.Reset()
	if err := catalogue.Write(&b, []catalogue.Entry{waiting}, func(catalogue.Entry) []string { return nil }); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "needs driver: a stall knob") {
		t.Errorf("an entry waiting for the driver prints %q", b.String())
	}
}

// A name registered twice (two files declaring one entry) stops the
// package as it loads, and leaves the first registration alone.
func TestAddEntryRefusesATwin(t *testing.T) {
	first, _ := CatalogueEntry("reboot")
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `"reboot" registered twice`) {
			t.Errorf("registering reboot again: %v", r)
		}
		if e, _ := CatalogueEntry("reboot"); e.Plants != first.Plants || len(registry.entries) != len(Catalogue()) {
			t.Errorf("the twin changed the registry")
		}
	}()
	addFault(catalogue.Entry{Name: "reboot", Plants: "a twin"}, Fault{})
}
