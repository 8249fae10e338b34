package dockerd

// This file installs Debian's docker.io and tells whether it is installed.

import (
	"context"
	"fmt"
	"os"
	"os/exec" // apt-get and dpkg on this host, installing docker.io

	"sigs.k8s.io/skewtest/internal/lines"
)

// Installed reports whether Debian's docker.io (dockerd, the docker CLI,
// containerd and runc) is installed.
func Installed() bool {
	for _, p := range []string{DockerdPath, DockerCLI, "/usr/bin/containerd", "/usr/bin/containerd-shim-runc-v2", "/usr/sbin/runc"} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// Install installs Debian's docker.io with apt-get unless it is installed.
// Its package scripts try to start the service; without systemd nothing
// starts.
func Install(ctx context.Context) error {
	if Installed() {
		return nil
	}
	install := func() error {
		cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "--no-install-recommends", "docker.io")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get install docker.io: %w\n%s", err, lines.Last(string(out), 20))
		}
		return nil
	}
	if err := install(); err != nil {
		if out, uerr := exec.CommandContext(ctx, "apt-get", "update").CombinedOutput(); uerr != nil {
			return fmt.Errorf("%w; apt-get update: %v\n%s", err, uerr, lines.Last(string(out), 20))
		}
		if err := install(); err != nil {
			return err
		}
	}
	if !Installed() {
		return fmt.Errorf("docker.io installed but %s, %s, containerd or runc still missing", DockerdPath, DockerCLI)
	}
	return nil
}
