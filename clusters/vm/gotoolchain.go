package vm

import (
	"context"
	"fmt"
	osexec "os/exec" // go env on this host, to share its toolchain with the guest
	"strings"
)

// guestPath is sshd's PATH for root on Debian, which commands run with
// unless Env sets another.
const guestPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// GoToolchain returns the shares and environment that let the guest run
// the host's go command offline: GOROOT and the module cache read-only,
// the build cache read-write (entries are added atomically, and the
// guest's compiles then hit the host's warm cache: under TCG a cold
// compile is tens of times slower). A skewtest not built by make skewtest
// needs it: it builds its helper programs (clusters/internal/helpers)
// with go build at run time.
func GoToolchain(ctx context.Context) ([]Share, []string, error) {
	out, err := osexec.CommandContext(ctx, "go", "env", "GOROOT", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		return nil, nil, fmt.Errorf("vm: go env (is go on PATH?): %w", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 3 {
		return nil, nil, fmt.Errorf("vm: go env printed %q", out)
	}
	goroot, modcache, gocache := f[0], f[1], f[2]
	shares := []Share{
		{HostPath: goroot, ReadOnly: true},
		{HostPath: modcache, ReadOnly: true},
		{HostPath: gocache},
	}
	env := []string{
		"PATH=" + goroot + "/bin:" + guestPath,
		"GOROOT=" + goroot, "GOMODCACHE=" + modcache, "GOCACHE=" + gocache,
		// Offline, with the host's modules only, and never a toolchain
		// download.
		"GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly -buildvcs=false",
	}
	return shares, env, nil
}
