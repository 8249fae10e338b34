package kops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	osexec "os/exec" // kops version on this host, while validating settings
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// installHint says how to get kops.
const installHint = "install kops from https://github.com/kubernetes/kops/releases (or brew install kops), put it in PATH or point KOPS at it, or set KOPS_VERSION (e.g. v1.34.0) to download that release"

// Validate checks the settings without creating anything, and reports
// everything missing at once, each with its fix: the region, kops (found,
// and new enough for the plan's API server), AWS credentials (the SDK's
// default chain), the SSH key, the state store and admin CIDR formats.
// It is what makes `make test-skew PROVIDER=kops` without AWS set-up fail
// in seconds.
func (c *Config) Validate(ctx context.Context) error {
	var errs []error
	if c.Region == "" {
		errs = append(errs, errors.New("no AWS region: set AWS_REGION (e.g. us-east-1); KOPS_ZONES chooses zones in it (default: its zone a)"))
	}
	for _, z := range c.Zones {
		if c.Region != "" && !strings.HasPrefix(z, c.Region) {
			errs = append(errs, fmt.Errorf("KOPS_ZONES: zone %q is not in AWS_REGION %s", z, c.Region))
		}
	}
	if err := c.checkKops(ctx); err != nil {
		errs = append(errs, err)
	}
	if _, err := loadAWS(ctx, c.Region, nil); err != nil {
		errs = append(errs, fmt.Errorf("%w: set AWS_PROFILE (from aws configure or aws sso login), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run on an instance with a role", err))
	}
	if c.SSHKey != "" {
		for _, f := range []string{c.SSHKey, c.SSHKey + ".pub"} {
			if _, err := os.Stat(f); err != nil {
				errs = append(errs, fmt.Errorf("SSH_KEY: %v (kops installs SSH_KEY.pub on the nodes; leave SSH_KEY empty for a keypair made for the run)", err))
			}
		}
	}
	if c.StateStore != "" {
		if _, _, err := stateStoreBucket(c.StateStore); err != nil {
			errs = append(errs, err)
		}
	}
	if c.AdminAccess != "" {
		if _, _, err := net.ParseCIDR(c.AdminAccess); err != nil {
			errs = append(errs, fmt.Errorf("KOPS_ADMIN_ACCESS=%q: want a CIDR such as 203.0.113.7/32", c.AdminAccess))
		}
	}
	if c.RunID == "" && len(errs) == 0 {
		errs = append(errs, errors.New("kops: no run ID"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("PROVIDER=kops is not set up:\n%w", err)
	}
	return nil
}

// checkKops finds kops and checks its version against the plan. With
// KOPS_VERSION the download happens in Up; its version is checked here.
func (c *Config) checkKops(ctx context.Context) error {
	if c.Kops == "" && c.KopsVersion != "" {
		v, err := version.ParseSemantic(strings.TrimPrefix(c.KopsVersion, "v"))
		if err != nil {
			return fmt.Errorf("KOPS_VERSION=%q: want a kops release such as v1.34.0", c.KopsVersion)
		}
		return c.checkKopsVersion(v, "KOPS_VERSION="+c.KopsVersion)
	}
	path, err := c.kopsPath()
	if err != nil {
		return err
	}
	v, err := kopsVersion(ctx, path)
	if err != nil {
		return err
	}
	return c.checkKopsVersion(v, path)
}

// kopsPath is KOPS, else kops in PATH.
func (c *Config) kopsPath() (string, error) {
	if c.Kops != "" {
		fi, err := os.Stat(c.Kops)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("KOPS=%s is not an executable file: %s", c.Kops, installHint)
		}
		return c.Kops, nil
	}
	p, err := osexec.LookPath("kops")
	if err != nil {
		return "", fmt.Errorf("no kops: not found in PATH and KOPS is unset: %s", installHint)
	}
	return p, nil
}

var semverRE = regexp.MustCompile(`\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?`)

// kopsVersion runs kops version --short (kops prints e.g. "1.34.0", older
// releases "Client version: 1.34.0 (git-v1.34.0)").
func kopsVersion(ctx context.Context, path string) (*version.Version, error) {
	cctx, cancel := context.WithTimeout(ctx, kopsVersionTimeout)
	defer cancel()
	out, err := osexec.CommandContext(cctx, path, "version", "--short").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s version --short: %v: %s (%s)", path, err, strings.TrimSpace(string(out)), installHint)
	}
	m := semverRE.FindString(string(out))
	if m == "" {
		return nil, fmt.Errorf("%s version --short printed %q, no version", path, strings.TrimSpace(string(out)))
	}
	return version.ParseSemantic(m)
}

// checkKopsVersion refuses a kops older than the API server's minor by more
// than one: kops X.Y supports Kubernetes up to X.Y, and runs X.Y+1 with
// KOPS_RUN_TOO_NEW_VERSION=1, as kubetest2-kops sets.
func (c *Config) checkKopsVersion(v *version.Version, what string) error {
	api := c.APIServerVersion
	if api == nil {
		return nil
	}
	if v.Major() == api.Major() && v.Minor()+1 >= api.Minor() {
		return nil
	}
	return fmt.Errorf("kops %s (%s) is too old for the plan's API server v%s: kops 1.%d or newer is needed; %s",
		v, what, api, api.Minor()-1, installHint)
}
