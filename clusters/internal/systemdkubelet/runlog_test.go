package systemdkubelet

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"testing"
)

// The argv runs for real against stand-ins for systemctl and journalctl
// (this host has no systemd): it must ask journalctl for the unit's
// current invocation only, and fail when the unit has none.
func TestRunLogScript(t *testing.T) {
	for _, tc := range []struct {
		name, invocation, want string
		fail                   bool
	}{
		{name: "current invocation", invocation: "0f3a", want: "--no-pager -o cat _SYSTEMD_INVOCATION_ID=0f3a\n"},
		{name: "never started", invocation: "", fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name, body string) {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			write("systemctl", `[ "$*" = "show -p InvocationID --value kubelet" ] || { echo "unexpected: $*" >&2; exit 9; }; echo "`+tc.invocation+`"`+"\n")
			write("journalctl", `echo "$*"`+"\n")
			argv := []string{"sh", "-c", runLogScript, "sh", "kubelet"}
			cmd := osexec.Command(argv[0], argv[1:]...)
			cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin"}
			out, err := cmd.Output()
			if tc.fail {
				if err == nil {
					t.Fatalf("argv succeeded with no invocation ID, printing %q", out)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %v", argv, err)
			}
			if string(out) != tc.want {
				t.Errorf("journalctl called with %q, want %q", out, tc.want)
			}
		})
	}
}
