package secretscan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each credential is found, and the words around credentials in logs and
// events are not.
func TestCredentials(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"key.pem":    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n",
		"kubeconfig": "users:\n- name: admin\n  user:\n    client-certificate-data: LS0t\n    client-key-data: LS0tLS1CRUdJTi\n",
		"token.yaml": "users:\n- name: sa\n  user:\n    token: abcdef.0123456789abcdef\n",
		"env.txt":    "TOKEN=eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJpc3MiOiJrdWJlcm5ldGVzIn0.sig\n",
		// What a busy kubelet and the API's events say, with no credential.
		"kubelet.log": "E1206 projected.go:198] Error preparing data for projected volume kube-api-access-8cnws: failed to fetch token: Timeout: request did not complete\n",
		"events.yaml": "  message: |-\n    fetch token: Timeout: request did not complete within requested timeout\n  reason: FailedMount\n",
		"doc.md":      "a kubeconfig's `token:` or `client-key-data:` field is a credential\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := Dir(dir, Credentials...)
	if r.Files != len(files) {
		t.Errorf("read %d files, want %d", r.Files, len(files))
	}
	got := strings.Join(r.Hits, "\n")
	for _, want := range []string{"key.pem: a private key", "kubeconfig: a kubeconfig's client key", "token.yaml: a kubeconfig's token", "env.txt: a JSON web token"} {
		if !strings.Contains(got, filepath.Join(dir, want)) {
			t.Errorf("missed %q; found:\n%s", want, got)
		}
	}
	for _, clean := range []string{"kubelet.log", "events.yaml", "doc.md"} {
		if strings.Contains(got, filepath.Join(dir, clean)+":") {
			t.Errorf("%s holds no credential, but was named; found:\n%s", clean, got)
		}
	}
	if r := Dir(dir, Literal("the planted one", "0123456789abcdef")); len(r.Hits) != 1 || !strings.HasSuffix(r.Hits[0], "token.yaml: the planted one") {
		t.Errorf("a literal mark: %v", r.Hits)
	}
}
