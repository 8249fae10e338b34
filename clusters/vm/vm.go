// Package vm boots a Debian 12 guest under qemu, with systemd as PID 1 and
// the unified cgroup v2 hierarchy, and runs commands in it over SSH: a host
// of the shape most of skewtest's users have, on machines that are not.
//
// The verbs, one file each:
//
//   - BuildImage (image.go): the guest's disk, kernel and initrd from
//     Debian packages only (debootstrap, linux-image-amd64), cached under
//     <cache>/vm/<key>/ and keyed by a hash of everything that goes in.
//   - Up (boot.go): a copy-on-write overlay on the cached disk, fresh SSH
//     host and client keys, qemu with KVM where it works and TCG where it
//     does not, 9p shares mounted at the host's paths, waiting for SSH.
//   - Instance.Command (exec.go): a command in the guest, over SSH with
//     the host key checked (clusters/internal/sshnode).
//   - Instance.Down (down.go): qemu's process group killed, the overlay and
//     keys removed: nothing of the instance stays on the host.
//
// An instance's state is written to <StateDir>/<name>/state.json before
// qemu starts, so that another process (skewtest vm exec, vm down) can use
// or remove it.
package vm

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/privdir"
)

// Timeouts, sized for TCG: the machines this runs on have no usable KVM,
// and TCG runs CPU-heavy guest code 10-45 times slower than the host.
const (
	// BootTimeoutTCG bounds qemu's start until SSH answers, under TCG.
	BootTimeoutTCG = 15 * time.Minute
	// BootTimeoutKVM is the same with KVM.
	BootTimeoutKVM = 3 * time.Minute
	// kvmProbeTimeout bounds the probe boot that decides whether KVM works:
	// on nested hosts a KVM guest can hang before printing anything.
	kvmProbeTimeout = 30 * time.Second
	// sshTimeout bounds dialling and the SSH handshake: a TCG guest busy
	// with a cluster can take tens of seconds to answer (10 s timed out).
	sshTimeout = time.Minute
	// sshRetryInterval is how often Up tries SSH while the guest boots.
	sshRetryInterval = 3 * time.Second
	// progressInterval is how often a long wait says it is still waiting.
	progressInterval = 30 * time.Second
	// downGrace is how long qemu gets to exit after SIGTERM before SIGKILL.
	downGrace = 10 * time.Second
)

// Guest defaults.
const (
	DefaultMemoryMiB = 6144
	DefaultCPUs      = 2
	// DefaultName names the instance when none is given.
	DefaultName = "default"
	// GuestUser is the user SSH logs in as.
	GuestUser = "root"
	// Hostname is the guest's hostname.
	Hostname = "skewtest-vm"
)

// Accel is the qemu accelerator.
type Accel string

const (
	// AccelAuto uses KVM when /dev/kvm exists and a probe boot prints the
	// kernel's banner, and TCG otherwise.
	AccelAuto Accel = "auto"
	AccelKVM  Accel = "kvm"
	AccelTCG  Accel = "tcg"
)

// defaultStateDir is where instances keep their overlay, keys and state:
// on disk (the overlay grows with what the guest writes, so not tmpfs
// /run), not in the cache, which guests see, and not in world-writable
// /tmp, where anyone could make the directory first and plant a state
// file whose pid `vm down` would signal. Beside the run root
// /var/lib/skewtest, not in it: `skewtest clean` takes every directory
// there for a run's.
const defaultStateDir = "/var/lib/skewtest-vm"

// DefaultStateDir is where instances keep their overlay, keys and state
// unless Config.StateDir says otherwise; created 0700 (checkStateDir).
func DefaultStateDir() string {
	return defaultStateDir
}

// checkStateDir refuses a state directory that someone other than the
// caller could write into (not the caller's, group or world writable, or
// a symbolic link): the state files there name the pids Down signals and
// the directories it removes. With create, a missing one is made 0700.
// A missing one is no error: it holds no instance.
func checkStateDir(dir string, create bool) error {
	problem, err := privdir.Problem(dir)
	if errors.Is(err, os.ErrNotExist) && create {
		problem, err = privdir.Ensure(dir, 0o700)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("vm: state directory %s: %w", dir, err)
	}
	if problem == "" {
		return nil
	}
	return &ConfigError{fmt.Errorf("vm: state directory %s is %s: whoever can write there can plant an instance's state "+
		"and have vm down signal any process; %s", dir, problem, privdir.Fix(dir))}
}

// killProcess is syscall.Kill; tests record the signals instead of
// sending them.
var killProcess = syscall.Kill

// signalGroup sends sig to process group pgid, refusing pgid <= 1: pids
// come from state files, and kill(-1) signals every process the caller
// may signal, kill(0) the caller's own group.
func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("vm: refusing to send %v to process group %d: no qemu of an instance has that pid, and the signal would reach every process", sig, pgid)
	}
	if err := killProcess(-pgid, sig); err != nil {
		return fmt.Errorf("vm: send %v to process group %d: %w", sig, pgid, err)
	}
	return nil
}
