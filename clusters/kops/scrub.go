package kops

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// credentialVars are the environment variables of the AWS SDK's default
// chain that hold secrets. kops inherits them; their values must never
// reach a log, a report or an artifact.
var credentialVars = []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ACCESS_KEY_ID",
	"AWS_CONTAINER_AUTHORIZATION_TOKEN"}

// redacted replaces a credential's value.
const redacted = "[redacted]"

// minSecretLen keeps scrub from replacing short values that could be
// ordinary words.
const minSecretLen = 8

// scrub replaces the values of credentialVars, as this process's
// environment holds them, with [redacted].
func scrub(s string) string {
	for _, v := range credentialVars {
		if val := os.Getenv(v); len(val) >= minSecretLen {
			s = strings.ReplaceAll(s, val, redacted)
		}
	}
	return s
}

// scrubDir rewrites every regular file under dir that holds a credential,
// for files other programs wrote there (kops toolbox dump, kubectl
// cluster-info dump): they copy nodes' and pods' environments and logs.
func scrubDir(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if s := scrub(string(b)); s != string(b) {
			return os.WriteFile(path, []byte(s), 0o644)
		}
		return nil
	})
}
