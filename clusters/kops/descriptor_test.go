package kops

import (
	"strings"
	"testing"
	"time"
)

// The provider's settings, as skewtest run reads them.
func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"KOPS": "/opt/kops", "AWS_DEFAULT_REGION": "eu-west-1", "KOPS_ZONES": "eu-west-1a, eu-west-1b",
		"KOPS_STATE_STORE": "s3://b/p", "SSH_KEY": "/k/id", "KOPS_TTL": "2h", "KOPS_CREATE_ARGS": "--a  --b",
	}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.Kops != "/opt/kops" || c.Region != "eu-west-1" || strings.Join(c.Zones, "|") != "eu-west-1a|eu-west-1b" ||
		c.StateStore != "s3://b/p" || c.SSHKey != "/k/id" || c.TTL != 2*time.Hour || strings.Join(c.CreateArgs, "|") != "--a|--b" {
		t.Errorf("Config = %+v", c)
	}
	env["AWS_REGION"] = "us-east-1"
	if c, _ := ConfigFromEnv(func(k string) string { return env[k] }); c.Region != "us-east-1" {
		t.Errorf("AWS_REGION beside AWS_DEFAULT_REGION: region %s, want AWS_REGION's", c.Region)
	}
	for _, bad := range []string{"soon", "0s", "-1h"} {
		env["KOPS_TTL"] = bad
		if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), `KOPS_TTL="`+bad+`"`) {
			t.Errorf("KOPS_TTL=%s: %v, want an error naming it", bad, err)
		}
	}
}
