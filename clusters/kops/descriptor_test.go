package kops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/procfs"
)

// The provider's settings, as skewtest run reads them.
func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"KOPS": "/opt/kops", "AWS_DEFAULT_REGION": "eu-west-1", "KOPS_ZONES": "eu-west-1a, eu-west-1b",
		"KOPS_STATE_STORE": "s3://b/p", "SSH_KEY": "/k/id", "KOPS_TTL": "2h", "KOPS_CREATE_ARGS": "--a  --b",
	}
	c, err := configFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.Kops != "/opt/kops" || c.Region != "eu-west-1" || strings.Join(c.Zones, "|") != "eu-west-1a|eu-west-1b" ||
		c.StateStore != "s3://b/p" || c.SSHKey != "/k/id" || c.TTL != 2*time.Hour || strings.Join(c.CreateArgs, "|") != "--a|--b" {
		t.Errorf("Config = %+v", c)
	}
	env["AWS_REGION"] = "us-east-1"
	if c, _ := configFromEnv(func(k string) string { return env[k] }); c.Region != "us-east-1" {
		t.Errorf("AWS_REGION beside AWS_DEFAULT_REGION: region %s, want AWS_REGION's", c.Region)
	}
	for _, bad := range []string{"soon", "0s", "-1h"} {
		env["KOPS_TTL"] = bad
		if _, err := configFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), `KOPS_TTL="`+bad+`"`) {
			t.Errorf("KOPS_TTL=%s: %v, want an error naming it", bad, err)
		}
	}
}

// kops runs take no host lock: clean tells a live run by the process its
// state records. A run whose process lives is left alone, one whose
// process is gone is cleaned, and one whose state records no process is
// cleaned only when its directory is named.
func TestInspectTellsALiveRunByItsOwner(t *testing.T) {
	t.Parallel()
	if Descriptor.CleansHost {
		t.Error("kops's runs hold the host lock: a kops run would hold up local runs for the life of its cluster")
	}
	self := procfs.Self()
	gone := self
	gone.Start++ // the same pid, another process
	for _, tc := range []struct {
		name            string
		owner           procfs.Owner
		live, undecided bool
	}{
		{"this process", self, true, false},
		{"a process that is gone", gone, false, false},
		{"no process recorded", procfs.Owner{}, false, true},
	} {
		dir := filepath.Join(t.TempDir(), RunDirPrefix+"20261202-100000-ab12")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := writeState(dir, &State{RunID: "20261202-100000-ab12", Owner: tc.owner}); err != nil {
			t.Fatal(err)
		}
		r := Descriptor.Inspect(dir)
		if r.NotARun != nil || (r.Live != "") != tc.live || (r.Undecided != "") != tc.undecided {
			t.Errorf("%s: Inspect = %+v, want live %v, undecided %v", tc.name, r, tc.live, tc.undecided)
		}
	}
}

// The worker's kubelet root directory is the running kubelet's
// --root-dir, in either form; none given is the default (empty here).
func TestRootDirFlag(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/local/bin/kubelet\x00--config=/var/lib/kubelet/kubelet.conf\x00--root-dir=/var/lib/skewtest/x/kubelet\x00": "/var/lib/skewtest/x/kubelet",
		"/usr/local/bin/kubelet\x00--root-dir\x00/srv/kubelet\x00--v=2\x00":                                              "/srv/kubelet",
		"/usr/local/bin/kubelet\x00--config=/var/lib/kubelet/kubelet.conf\x00":                                           "",
	} {
		if got := rootDirFlag(in); got != want {
			t.Errorf("rootDirFlag(%q) = %q, want %q", in, got, want)
		}
	}
}
