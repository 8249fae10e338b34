// Command skewtest-runc-shim is an OCI runtime for dockerd
// (--add-runtime): it removes CAP_SYS_RESOURCE from the spec runc is about
// to read (see package capshim) and then execs the real runc with the same
// arguments.
//
// The real runc is, in this order: $SKEWTEST_RUNC; the path in the file
// next to this binary named like it plus ".runc"; the path baked in at
// build time with -ldflags "-X main.runcPath=..."; /usr/sbin/runc. dockerd
// and containerd may not pass the environment through, hence the file.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"sigs.k8s.io/skewtest/clusters/kind/internal/capshim"
)

// runcPath is the default real runc; set with -ldflags -X.
var runcPath = "/usr/sbin/runc"

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "skewtest-runc-shim: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	if err := capshim.Rewrite(os.Args[1:]); err != nil {
		return err
	}
	runc, err := realRunc()
	if err != nil {
		return err
	}
	argv := append([]string{runc}, os.Args[1:]...)
	if err := syscall.Exec(runc, argv, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", runc, err)
	}
	return nil
}

func realRunc() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	path := os.Getenv("SKEWTEST_RUNC")
	if path == "" {
		if b, err := os.ReadFile(self + ".runc"); err == nil {
			path = strings.TrimSpace(string(b))
		} else if !os.IsNotExist(err) {
			return "", err
		}
	}
	if path == "" {
		path = runcPath
	}
	// Never exec ourselves: that would loop forever.
	if a, err := filepath.EvalSymlinks(path); err == nil {
		if b, err := filepath.EvalSymlinks(self); err == nil && a == b {
			return "", fmt.Errorf("real runc %s is this shim", path)
		}
	}
	return path, nil
}
