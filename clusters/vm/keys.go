package vm

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// writeKeys makes a fresh SSH host key for the guest and a client key for
// this host, per instance, so that no key is ever in the cached image:
//
//   - <dir>/boot/: the guest's host key, the client's public key as
//     authorized_keys and the shares list, all read by the guest's setup
//     service from the boot share;
//   - <dir>/id_ed25519: the client key;
//   - <dir>/known_hosts: the guest's host key for addr, so that the host
//     key is checked like any node's.
func writeKeys(dir, addr string, shares []Share) error {
	boot := filepath.Join(dir, bootDir)
	if err := os.MkdirAll(boot, 0o700); err != nil {
		return err
	}
	hostPub, hostPEM, err := newKey("skewtest-vm host key")
	if err != nil {
		return err
	}
	clientPub, clientPEM, err := newKey("skewtest-vm client key")
	if err != nil {
		return err
	}
	files := []struct {
		path string
		mode os.FileMode
		data []byte
	}{
		{filepath.Join(boot, bootHostKey), 0o600, hostPEM},
		{filepath.Join(boot, bootAuthorizedKeys), 0o600, ssh.MarshalAuthorizedKey(clientPub)},
		{filepath.Join(boot, bootShares), 0o644, []byte(sharesFile(shares))},
		{filepath.Join(dir, keyFile), 0o600, clientPEM},
		{filepath.Join(dir, knownHostsFile), 0o644, []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, hostPub) + "\n")},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// newKey returns a new ed25519 key: its public half and the private key
// in OpenSSH's PEM format.
func newKey(comment string) (ssh.PublicKey, []byte, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return sshPub, pem.EncodeToMemory(block), nil
}

// sharesFile is the guest setup service's list of shares: one
// "TAG PATH ro|rw" line each.
func sharesFile(shares []Share) string {
	var b strings.Builder
	for i, s := range shares {
		mode := "rw"
		if s.ReadOnly {
			mode = "ro"
		}
		fmt.Fprintf(&b, "%s %s %s\n", shareTag(i), s.guestPath(), mode)
	}
	return b.String()
}
