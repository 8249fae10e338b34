package dockerd

// This file holds the host-wide lock that lets only one private dockerd
// run on a host at a time.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/clusters/internal/privdir"
)

// acquireLock takes the host-wide lock, waiting while another process
// holds it, until ctx ends.
func acquireLock(ctx context.Context, log *slog.Logger) (*os.File, error) {
	// The lock's directory is root's alone, as the host lock's: the holder
	// truncates the file and writes its pid, which through a link planted
	// in a shared directory would overwrite a file of root's.
	dir := filepath.Dir(lockPath)
	problem, err := privdir.Ensure(dir, 0o700)
	if err != nil {
		return nil, fmt.Errorf("dockerd: lock directory: %w", err)
	}
	if problem != "" {
		return nil, fmt.Errorf("dockerd: the lock's directory %s is %s; %s", dir, problem, privdir.Fix(dir))
	}
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dockerd: %w", err)
	}
	logged := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("dockerd: lock %s: %w", lockPath, err)
		}
		if !logged {
			holder, _ := os.ReadFile(lockPath)
			log.Info("waiting for another skewtest dockerd to stop", "lock", lockPath, "holder", strings.TrimSpace(string(holder)))
			logged = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("dockerd: another skewtest dockerd holds %s: %w", lockPath, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (d *Daemon) releaseLock() {
	if d.lock != nil {
		d.lock.Close()
		d.lock = nil
	}
	running.Delete(d.dir)
}

// running maps the Dir of each Daemon this process started to it. The
// host-wide lock is a flock held by this process's open file: if Clean
// were called here for a daemon this process still holds (a kept cluster
// cleaned by the same process), only that Daemon can release it.
var running sync.Map
