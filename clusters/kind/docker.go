package kind

import (
	"context"
	"fmt"
	"os"
	"os/exec" // the host's docker CLI, before there is any node
	"path/filepath"

	"sigs.k8s.io/skewtest/clusters/kind/internal/capshim"
	"sigs.k8s.io/skewtest/clusters/kind/internal/dockerd"
)

// dockerChoice says whether the cluster's nodes need a private dockerd:
// on a host whose capability bounding set lacks CAP_SYS_RESOURCE (needShim:
// kind's privileged nodes need the runtime shim), or whose own Docker does
// not answer.
func dockerChoice(ctx context.Context) (private, needShim bool, err error) {
	needShim, err = capshim.NeedsShim()
	if err != nil {
		return false, false, err
	}
	if needShim {
		return true, true, nil
	}
	return exec.CommandContext(ctx, "docker", "info").Run() != nil, false, nil
}

// startDocker starts a private dockerd, with the capability shim when
// this host needs it, its data-root planted from seed (dockerd.Config.Seed)
// when seed is set.
func (p *Provider) startDocker(ctx context.Context, needShim bool, seed string) error {
	shim := ""
	if needShim {
		var err error
		if shim, err = capshim.Build(ctx, p.cfg.CacheDir); err != nil {
			return fmt.Errorf("kind provider: build the runtime shim: %w", err)
		}
	}
	d, err := dockerd.Start(ctx, dockerd.Config{Dir: filepath.Join(p.dir, "docker"), Shim: shim, Seed: seed, Logger: p.logger})
	if err != nil {
		return fmt.Errorf("kind provider: start a private dockerd: %w", err)
	}
	// kind runs the docker CLI with this process's environment.
	old, had := os.LookupEnv("DOCKER_HOST")
	p.mu.Lock()
	p.docker = d
	if had {
		p.oldHost = &old
	} else {
		empty := ""
		p.oldHost = &empty
	}
	p.mu.Unlock()
	return os.Setenv("DOCKER_HOST", d.Host())
}

// stopDocker stops the private dockerd; a variable so that tests can make
// it fail.
var stopDocker = func(ctx context.Context, d *dockerd.Daemon) error { return d.Stop(ctx) }
