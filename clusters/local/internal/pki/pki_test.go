package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func readPEM(t *testing.T, path, wantType string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, rest := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM block", path)
	}
	if block.Type != wantType {
		t.Errorf("%s: PEM type %q, want %q", path, block.Type, wantType)
	}
	if len(rest) != 0 {
		t.Errorf("%s: %d bytes after the PEM block", path, len(rest))
	}
	return block.Bytes
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s has mode %o, want %o", path, got, want)
	}
}

// samePublicKey reports whether key's public half is pub.
func samePublicKey(t *testing.T, key *ecdsa.PrivateKey, pub crypto.PublicKey) bool {
	t.Helper()
	p, ok := pub.(*ecdsa.PublicKey)
	return ok && key.PublicKey.Equal(p)
}

func TestNewCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "pki")
	ca, err := NewCA(dir, "skewtest-ca")
	if err != nil {
		t.Fatal(err)
	}
	if ca.CertFile != filepath.Join(dir, "ca.crt") || ca.KeyFile != filepath.Join(dir, "ca.key") {
		t.Errorf("files %s, %s; want ca.crt, ca.key in %s", ca.CertFile, ca.KeyFile, dir)
	}
	checkMode(t, dir, 0o700)
	checkMode(t, ca.KeyFile, 0o600)

	cert, err := x509.ParseCertificate(readPEM(t, ca.CertFile, "CERTIFICATE"))
	if err != nil {
		t.Fatal(err)
	}
	if !cert.Equal(ca.Cert) {
		t.Error("ca.crt differs from CA.Cert")
	}
	if !cert.IsCA || !cert.BasicConstraintsValid || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("not a CA: IsCA %v, basic constraints %v, key usage %b", cert.IsCA, cert.BasicConstraintsValid, cert.KeyUsage)
	}
	if cert.Subject.CommonName != "skewtest-ca" {
		t.Errorf("CommonName %q", cert.Subject.CommonName)
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		t.Errorf("CA is not self-signed: %v", err)
	}
	now := time.Now()
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		t.Errorf("CA not valid now: %v..%v", cert.NotBefore, cert.NotAfter)
	}
	key, err := x509.ParseECPrivateKey(readPEM(t, ca.KeyFile, "EC PRIVATE KEY"))
	if err != nil {
		t.Fatal(err)
	}
	if !samePublicKey(t, key, cert.PublicKey) {
		t.Error("ca.key does not match ca.crt")
	}
	if !samePublicKey(t, key, ca.Key.Public()) {
		t.Error("ca.key does not match CA.Key")
	}
}

func TestIssue(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(dir, "skewtest-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA(filepath.Join(dir, "other"), "other-ca")
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		req  Request
		// Usages the cert must verify for; badUsages it must not.
		usages, badUsages []x509.ExtKeyUsage
		verifyDNS         string
	}{
		{
			name: "server",
			req: Request{
				Name: "apiserver", CommonName: "kube-apiserver",
				DNSNames: []string{"localhost", "kubernetes", "kubernetes.default.svc"},
				IPs:      []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1"), net.ParseIP("::1")},
				Server:   true,
			},
			usages:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			badUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			verifyDNS: "kubernetes.default.svc",
		},
		{
			name: "client with organization",
			req: Request{
				Name: "admin", CommonName: "kubernetes-admin",
				Organization: []string{"system:masters"},
				Client:       true,
			},
			usages:    []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			badUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		},
		{
			name: "server and client",
			req: Request{
				Name: "kubelet", CommonName: "system:node:node-1",
				Organization: []string{"system:nodes", "skewtest"},
				DNSNames:     []string{"node-1"},
				IPs:          []net.IP{net.ParseIP("127.0.0.1")},
				Server:       true, Client: true,
			},
			usages:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			verifyDNS: "node-1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "issued")
			p, err := ca.Issue(out, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if p.CertFile != filepath.Join(out, tc.req.Name+".crt") || p.KeyFile != filepath.Join(out, tc.req.Name+".key") {
				t.Errorf("files %s, %s", p.CertFile, p.KeyFile)
			}
			checkMode(t, p.KeyFile, 0o600)
			for file, want := range map[string][]byte{p.CertFile: p.CertPEM, p.KeyFile: p.KeyPEM} {
				got, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s differs from the returned PEM", file)
				}
			}
			// The key matches the certificate.
			if _, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile); err != nil {
				t.Errorf("LoadX509KeyPair: %v", err)
			}

			cert, err := x509.ParseCertificate(readPEM(t, p.CertFile, "CERTIFICATE"))
			if err != nil {
				t.Fatal(err)
			}
			if cert.IsCA {
				t.Error("issued certificate is a CA")
			}
			if cert.Subject.CommonName != tc.req.CommonName {
				t.Errorf("CommonName %q, want %q", cert.Subject.CommonName, tc.req.CommonName)
			}
			// Several O= values form a DER SET, which is sorted: compare as sets.
			if !slices.Equal(sorted(cert.Subject.Organization), sorted(tc.req.Organization)) {
				t.Errorf("Organization %q, want %q", cert.Subject.Organization, tc.req.Organization)
			}
			if !slices.Equal(cert.DNSNames, tc.req.DNSNames) {
				t.Errorf("DNSNames %q, want %q", cert.DNSNames, tc.req.DNSNames)
			}
			if !slices.EqualFunc(cert.IPAddresses, tc.req.IPs, net.IP.Equal) {
				t.Errorf("IPAddresses %v, want %v", cert.IPAddresses, tc.req.IPs)
			}
			if !slices.Equal(cert.ExtKeyUsage, tc.usages) {
				t.Errorf("ExtKeyUsage %v, want %v", cert.ExtKeyUsage, tc.usages)
			}

			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			for _, u := range tc.usages {
				if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{u}, DNSName: tc.verifyDNS}); err != nil {
					t.Errorf("Verify for usage %v: %v", u, err)
				}
			}
			for _, u := range tc.badUsages {
				if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{u}}); err == nil {
					t.Errorf("Verify for usage %v succeeded, want an incompatible usage error", u)
				}
			}
			for _, ip := range tc.req.IPs {
				if err := cert.VerifyHostname(ip.String()); err != nil {
					t.Errorf("VerifyHostname(%s): %v", ip, err)
				}
			}
			if tc.verifyDNS != "" {
				if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: tc.usages, DNSName: "not-in-the-sans.example"}); err == nil {
					t.Error("Verify for a name outside the SANs succeeded")
				}
			}
			// Another CA does not vouch for it.
			otherRoots := x509.NewCertPool()
			otherRoots.AddCert(other.Cert)
			if _, err := cert.Verify(x509.VerifyOptions{Roots: otherRoots, KeyUsages: tc.usages}); err == nil {
				t.Error("certificate verifies against an unrelated CA")
			}
		})
	}
}

func TestIssueDistinctKeysAndSerials(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.Issue(dir, Request{Name: "a", CommonName: "a", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.Issue(dir, Request{Name: "b", CommonName: "b", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	ca1, _ := x509.ParseCertificate(readPEM(t, a.CertFile, "CERTIFICATE"))
	cb, _ := x509.ParseCertificate(readPEM(t, b.CertFile, "CERTIFICATE"))
	if ca1.SerialNumber.Cmp(cb.SerialNumber) == 0 || ca1.SerialNumber.Cmp(ca.Cert.SerialNumber) == 0 {
		t.Errorf("serial numbers repeat: %v %v %v", ca.Cert.SerialNumber, ca1.SerialNumber, cb.SerialNumber)
	}
	if ca1.SerialNumber.Sign() <= 0 {
		t.Errorf("serial %v is not positive", ca1.SerialNumber)
	}
	if slices.Equal(a.KeyPEM, b.KeyPEM) {
		t.Error("two issued certificates share a key")
	}
}

func TestNewServiceAccountKey(t *testing.T) {
	dir := t.TempDir()
	privFile, pubFile, err := NewServiceAccountKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if privFile != filepath.Join(dir, "sa.key") || pubFile != filepath.Join(dir, "sa.pub") {
		t.Errorf("files %s, %s", privFile, pubFile)
	}
	checkMode(t, privFile, 0o600)

	priv, err := x509.ParseECPrivateKey(readPEM(t, privFile, "EC PRIVATE KEY"))
	if err != nil {
		t.Fatalf("sa.key: %v", err)
	}
	pub, err := x509.ParsePKIXPublicKey(readPEM(t, pubFile, "PUBLIC KEY"))
	if err != nil {
		t.Fatalf("sa.pub: %v", err)
	}
	if !samePublicKey(t, priv, pub) {
		t.Fatal("sa.pub is not the public half of sa.key")
	}
	// What the API server does with them: sign with one, verify with the other.
	digest := sha256.Sum256([]byte("token"))
	sig, err := ecdsa.SignASN1(rand.Reader, priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	if !ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), digest[:], sig) {
		t.Error("a signature by sa.key does not verify with sa.pub")
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }
