// Package secretscan finds credentials in files a run wrote, before CI
// uploads them: whoever reads an artifact holding a private key, a
// kubeconfig's credential or a service account token would hold the
// cluster.
package secretscan

import (
	"os"
	"path/filepath"
	"regexp"
)

// Credentials are what a private key, a kubeconfig's credential or a
// bearer token looks like in a file. They match the credential, not the
// word: a kubelet's "failed to fetch token: Timeout" is no token.
var Credentials = []Mark{
	{Name: "a private key", Re: regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)},
	{Name: "a kubeconfig's client key", Re: regexp.MustCompile(`(?m)^\s*client-key(?:-data)?:\s*\S`)},
	{Name: "a kubeconfig's token", Re: regexp.MustCompile(`(?m)^\s*token:\s*\S`)},
	// A JWT's header, base64 of `{"alg":`: a service account token
	// anywhere, a log line or an environment dump included.
	{Name: "a JSON web token", Re: regexp.MustCompile(`eyJhbGciOi[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}`)},
}

// Mark is one kind of credential.
type Mark struct {
	Name string
	Re   *regexp.Regexp
}

// Literal is a mark for one known value, such as a credential a test
// planted.
func Literal(name, value string) Mark {
	return Mark{Name: name, Re: regexp.MustCompile(regexp.QuoteMeta(value))}
}

// Result is what Dir read and found.
type Result struct {
	// Files is how many regular files were read.
	Files int
	// Hits are "path: mark name", one per file and mark found.
	Hits []string
}

// Dir reads every regular file under dir and names those holding any of
// marks. Files it cannot read are skipped: a scan is of what was written.
func Dir(dir string, marks ...Mark) Result {
	var r Result
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		r.Files++
		for _, m := range marks {
			if m.Re.Match(b) {
				r.Hits = append(r.Hits, p+": "+m.Name)
			}
		}
		return nil
	})
	return r
}
