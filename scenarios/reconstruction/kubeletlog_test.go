package reconstruction

import (
	"strings"
	"testing"
)

func TestLastKubeletError(t *testing.T) {
	const uid = "0d749d9d-c686-41c0-961d-89e5f807b8c1"
	// Lines as a v1.36.3 kubelet logged them for a local-volume run (the
	// first two cut, trimmed, from a real log), then an error line at level E.
	log := strings.Join([]string{
		`I1201 03:08:27.660933   20324 reconstruct.go:67] "Could not construct volume information" podName="` + uid + `" volumeSpecName="skewtest-local-e1ae-0" err="reconstructVolume.NewMounter failed for volume"`,
		`I1201 03:08:28.766340   20324 reconstruct.go:161] "Cleaning up mounts for volume that could not be reconstructed" podName="` + uid + `" volumeSpecName="skewtest-local-e1ae-0"`,
		`E1201 03:08:29.000000   20324 kubelet_volumes.go:263] "There were many similar errors. Turn up verbosity to see them." err="orphaned pod \"` + uid + `\" found, but error occurred when trying to remove the volumes dir: not a directory"`,
		`I1201 03:08:30.000000   20324 kubelet.go:1] "SyncLoop" pod="other"`,
	}, "\n")
	got := lastKubeletError(log, uid)
	if !strings.HasPrefix(got, "E1201 03:08:29") || !strings.Contains(got, "not a directory") {
		t.Errorf("lastKubeletError = %q, want the orphaned-pod error line", got)
	}
	if got := lastKubeletError(log, "no-such-uid"); got != "" {
		t.Errorf("lastKubeletError of an unknown UID = %q", got)
	}
	long := "E1201 x " + uid + " failed " + strings.Repeat("y", 1000)
	if got := lastKubeletError(long, uid); len(got) > maxQuoted+len("…") {
		t.Errorf("quoted %d bytes, want at most %d", len(got), maxQuoted)
	}
}
