package binaries

// This file runs the commands the sources need (a binary's --version,
// make, go build), logging while a long one is still running.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os/exec" // the Go toolchain on this host, its output streamed as progress
	"strings"
	"time"
)

func (r *Resolver) run(ctx context.Context, dir string, argv ...string) ([]byte, error) {
	if r.Runner != nil {
		return r.Runner(ctx, dir, argv...)
	}
	return execRun(ctx, r.logger(), dir, argv...)
}

// execRun runs argv with os/exec, logging every 30 s that it is still
// running.
func execRun(ctx context.Context, logger *slog.Logger, dir string, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	return RunWithProgress(logger, cmd, strings.Join(argv, " "))
}

// RunWithProgress runs cmd, which may take minutes, logging every 30 s
// that it is still running, and returns its combined output.
func RunWithProgress(logger *slog.Logger, cmd *exec.Cmd, what string) ([]byte, error) {
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	start := time.Now()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return out.Bytes(), err
		case <-tick.C:
			logger.Info("still running", "command", what, "elapsed", time.Since(start).Round(time.Second))
		}
	}
}
