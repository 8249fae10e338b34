package nodes

import "testing"

// The kubelet's refusal of a checkpoint another version wrote is found in
// its log, as the cpu manager (and the checkpoint manager under every
// other) words it; a log without one is not taken for one.
func TestFindRefusedCheckpoint(t *testing.T) {
	log := "I1206 01:00:00.000000    1 server.go:1] Starting kubelet\n" +
		"E1206 01:00:01.000000    1 cpu_manager.go:230] \"Failed to initialize CPU manager\" err=\"could not restore state from checkpoint: checkpoint is corrupted, please drain this node and delete the CPU manager checkpoint file \\\"/var/lib/kubelet/cpu_manager_state\\\" before restarting Kubelet\"  \n" +
		"E1206 01:00:01.000001    1 run.go:72] \"command failed\"\n"
	line, ok := FindRefusedCheckpoint(log)
	if !ok || line == "" || line[0] != 'E' || line[len(line)-1] == ' ' {
		t.Errorf("FindRefusedCheckpoint = %q, %v, want the cpu manager's line, trimmed", line, ok)
	}
	if line, ok := FindRefusedCheckpoint("I1206 kubelet started\nE1206 flag provided but not defined: --foo\n"); ok {
		t.Errorf("FindRefusedCheckpoint found %q in a log without a refusal", line)
	}
}
