package sshnode

import "testing"

func TestRemoteCommand(t *testing.T) {
	for _, tc := range []struct {
		sudo      bool
		env, argv []string
		want      string
	}{
		{false, nil, []string{"true"}, "true"},
		{false, nil, []string{"sh", "-c", "echo $X; exit 3"}, `sh -c 'echo $X; exit 3'`},
		{true, nil, []string{"systemctl", "stop", "kubelet"}, "sudo -n systemctl stop kubelet"},
		{true, []string{"A=b c", "D=e"}, []string{"cat", "it's"}, `sudo -n env 'A=b c' D=e cat 'it'\''s'`},
		{false, []string{"A=1"}, []string{"env"}, "env A=1 env"},
	} {
		if got := remoteCommand(tc.sudo, tc.env, tc.argv); got != tc.want {
			t.Errorf("remoteCommand(%v, %q, %q) = %q, want %q", tc.sudo, tc.env, tc.argv, got, tc.want)
		}
	}
}

func TestHostPort(t *testing.T) {
	d := &Dialer{port: 2222}
	for in, want := range map[string]string{
		"10.0.0.1":       "10.0.0.1:2222",
		"10.0.0.1:22":    "10.0.0.1:22",
		"node.example":   "node.example:2222",
		"fd00::1":        "[fd00::1]:2222",
		"[fd00::1]":      "[fd00::1]:2222",
		"[fd00::1]:2200": "[fd00::1]:2200",
	} {
		if got := d.HostPort(in); got != want {
			t.Errorf("HostPort(%q) = %q, want %q", in, got, want)
		}
	}
}
