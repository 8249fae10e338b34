package reconstruction

import (
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/scenarios/catalogue"
)

// The catalogue says an entry runs exactly when the scenario implements it
// (the baseline shapes run as the sign-off plans).
func TestFaultsMatchTheCatalogue(t *testing.T) {
	faults := Faults()
	for _, e := range catalogue.All() {
		_, implemented := faults[e.Name]
		baseline := e.Name == "csi-filesystem" || e.Name == "local-volume"
		if (e.Status == catalogue.Runs) != (implemented || baseline) {
			t.Errorf("catalogue entry %s has status %q; implemented as a fault: %v", e.Name, e.Status, implemented)
		}
	}
	for name, f := range faults {
		if f.Observe == nil {
			t.Errorf("fault %s observes nothing: it could never fail", name)
		}
		if f.Plant == nil && !f.KeepPods {
			t.Errorf("fault %s plants nothing and deletes as the baseline does", name)
		}
	}
	if _, err := LookupFault("block"); err == nil || !strings.Contains(err.Error(), "not implemented as a fault yet") {
		t.Errorf("LookupFault(block) = %v", err)
	}
	if _, err := LookupFault("nope"); err == nil || !strings.Contains(err.Error(), "no catalogue fault") {
		t.Errorf("LookupFault(nope) = %v", err)
	}
}
