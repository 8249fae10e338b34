package dockerd

// This file holds the host-wide lock that lets only one private dockerd
// run on a host at a time.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/skewtest/clusters/hostlock"
)

// acquireLock takes the host-wide lock, waiting while another process
// holds it, until ctx ends. It is hostlock's kind of file, in root's own
// directory (hostlock.Exclusive): the holder truncates the file and
// writes its pid, which through a link planted in a shared directory
// would overwrite a file of root's. It is not the host lock: a kind run
// holds that too, but a kind test package may start its daemons while
// another package's run holds the host.
func acquireLock(ctx context.Context, log *slog.Logger) (*os.File, error) {
	f, err := hostlock.Exclusive(ctx, lockPath, func() {
		holder, _ := os.ReadFile(lockPath)
		log.Info("waiting for another skewtest dockerd to stop", "lock", lockPath, "holder", strings.TrimSpace(string(holder)))
	})
	if err != nil {
		return nil, fmt.Errorf("dockerd: %w", err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
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
