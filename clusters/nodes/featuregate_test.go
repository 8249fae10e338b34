package nodes

import (
	"strings"
	"testing"
)

func TestFindRejectedFeatureGate(t *testing.T) {
	for _, tc := range []struct {
		name, log, gate string
	}{
		// Measured: kubelets v1.36.3 and v1.37.2 given {NewVolumeManagerReconstruction: false}.
		{"unknown gate", "I1201 07:28:30.1 kubelet starting\npanic: failed to merge global and in-flight KubeletConfiguration while setting defaults, error: unrecognized feature gate: NewVolumeManagerReconstruction\n\ngoroutine 1 [running]:", "NewVolumeManagerReconstruction"},
		// component-base's words for a gate locked to its default.
		{"locked gate", `E1201 run.go:72] "command failed" err="failed to set feature gates from initial flags-based config: cannot set feature gate SELinuxMountReadWriteOncePod to false, feature is locked to true"`, "SELinuxMountReadWriteOncePod"},
		{"no gate", "E1201 run.go:72] \"command failed\" err=\"failed to run Kubelet: misconfiguration\"", ""},
	} {
		gate, line, ok := FindRejectedFeatureGate(tc.log)
		if gate != tc.gate || ok != (tc.gate != "") {
			t.Errorf("%s: gate %q ok %v, want %q", tc.name, gate, ok, tc.gate)
		}
		if ok && (!strings.Contains(line, tc.gate) || strings.Contains(line, "\n")) {
			t.Errorf("%s: line %q should be the kubelet's one line naming the gate", tc.name, line)
		}
	}
	err := &RejectedFeatureGateError{Node: "skewtest-worker", Version: "v1.37.2", Gate: "G", Line: "unrecognized feature gate: G"}
	for _, want := range []string{"kubelet v1.37.2", "skewtest-worker", "feature gate G", "unrecognized feature gate: G"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
