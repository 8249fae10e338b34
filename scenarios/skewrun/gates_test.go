package skewrun

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// Feature gates in PLAN are checked before anything is made (exit 2):
// against each entry's version on every provider, and refused outright on
// a provider that cannot put them into the kubelet's configuration.
func TestValidatePlanGates(t *testing.T) {
	t.Parallel()
	kubelets := []string{"file:/nonexistent/a", "file:/nonexistent/b", "file:/nonexistent/c"}
	for _, tc := range []struct {
		provider, plan string
		want           []string // empty: accepted
	}{
		{"local", "v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.15", nil},
		{"kind", "v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.15",
			[]string{"PLAN=v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.15", "plan entries 2 (v1.28.15+NewVolumeManagerReconstruction=false)", "PROVIDER=kind cannot give the kubelet", "PROVIDER=local"}},
		{"local", "v1.37.2,v1.35.4+NewVolumeManagerReconstruction=false,v1.37.2",
			[]string{`plan entry 2 "v1.35.4+NewVolumeManagerReconstruction=false": kubelet v1.35.4 does not know feature gate NewVolumeManagerReconstruction (removed in 1.32)`, "taken by kubelets 1.27-1.29"}},
		{"existing", "v1.37.2,v1.36.3+SELinuxMountReadWriteOncePod=false,v1.37.2",
			[]string{"kubelet v1.36.3 has feature gate SELinuxMountReadWriteOncePod locked to true"}},
		{"local", "v1.28.15,v1.28.15+Bogus=true,v1.28.15",
			[]string{"feature gate Bogus is not in skewtest's table", "NewVolumeManagerReconstruction, SELinuxChangePolicy, SELinuxMount, SELinuxMountReadWriteOncePod"}},
	} {
		_, err := validate(Options{Provider: tc.provider, Plan: tc.plan, Kubelets: kubelets, ArtifactsDir: t.TempDir()})
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s %s: %v", tc.provider, tc.plan, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, exitcode.ErrInvalid) || exitcode.Of(err) != 2 {
			t.Errorf("%s %s: %v (exit %d), want bad input", tc.provider, tc.plan, err, exitcode.Of(err))
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s: %q lacks %q", tc.provider, tc.plan, err, w)
			}
		}
	}
}
