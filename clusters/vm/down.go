package vm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/statefile"
)

// Load returns the instance name of stateDir (DefaultStateDir() when
// empty), as Up recorded it, for another process to use or take down.
func Load(stateDir, name string, log *slog.Logger) (*Instance, error) {
	if stateDir == "" {
		stateDir = DefaultStateDir()
	}
	if name == "" {
		name = DefaultName
	}
	if err := checkStateDir(stateDir, false); err != nil {
		return nil, err
	}
	dir := filepath.Join(stateDir, name)
	var inst Instance
	if err := statefile.Read(dir, stateFile, &inst); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("vm: no instance %q in %s (skewtest vm up -name %s starts one): %w", name, stateDir, name, err)
		}
		return nil, fmt.Errorf("vm: %w", err)
	}
	if inst.Dir != dir {
		return nil, fmt.Errorf("vm: %s records directory %s", filepath.Join(dir, stateFile), inst.Dir)
	}
	if inst.PID < 0 || inst.PID == 1 {
		return nil, &ConfigError{fmt.Errorf("vm: %s records pid %d, which no instance's qemu has: skewtest did not write it; remove %s", filepath.Join(dir, stateFile), inst.PID, dir)}
	}
	inst.log = log
	return &inst, nil
}

// Running reports whether the instance's qemu is still running.
func (i *Instance) Running() bool {
	if i.exited != nil {
		select {
		case <-i.exited:
			return false
		default:
			return true
		}
	}
	return i.ownsPID()
}

// save writes the instance's state file (statefile: replaced whole,
// after fsync).
func (i *Instance) save() error { return statefile.Write(i.Dir, stateFile, i, 0o600) }

// ownsPID reports whether PID is still this instance's qemu: its command
// line names the instance's overlay. A PID reused by another process after
// qemu died (or a reboot) is never killed.
func (i *Instance) ownsPID() bool {
	// Never init or a pid that names a group of processes (signalGroup).
	if i.PID <= 1 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(i.PID) + "/cmdline")
	if err != nil {
		return false
	}
	return strings.Contains(string(b), i.Overlay) && i.Overlay != ""
}

// Down ends the guest and removes everything Up made on the host: qemu's
// process group gets SIGTERM, then SIGKILL after downGrace; the instance's
// directory (overlay, keys, state) is removed. The cached image and the
// serial log (when outside the directory) stay. It is safe to call on a
// half-made or already-stopped instance.
func (i *Instance) Down(ctx context.Context) error {
	i.mu.Lock()
	if i.node != nil {
		i.node.Close()
		i.node = nil
	}
	i.mu.Unlock()
	var errs []error
	if i.ownsPID() {
		if err := i.kill(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if i.Dir != "" {
		if err := os.RemoveAll(i.Dir); err != nil {
			errs = append(errs, fmt.Errorf("vm: remove %s: %w", i.Dir, err))
		}
	}
	if len(errs) == 0 {
		i.logger().Info("vm: instance down, its files removed", "name", i.Name, "dir", i.Dir)
	}
	return errors.Join(errs...)
}

// kill signals qemu's process group and waits until qemu is gone.
func (i *Instance) kill(ctx context.Context) error {
	gone := func() bool { return !i.Running() }
	// ESRCH: the group is gone, whatever Running saw.
	if err := signalGroup(i.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	deadline := time.Now().Add(downGrace)
	for !gone() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	if gone() {
		return nil
	}
	if err := signalGroup(i.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	for end := time.Now().Add(downGrace); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if gone() {
			return nil
		}
	}
	return fmt.Errorf("vm: qemu (pid %d) of instance %s did not exit after SIGKILL", i.PID, i.Name)
}

// removeStale removes instance name's directory if its qemu is gone (the
// process that started it was killed): what Down would have removed.
func removeStale(stateDir, name string, log *slog.Logger) error {
	dir := filepath.Join(stateDir, name)
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	inst, err := Load(stateDir, name, log)
	if err != nil {
		// No readable state: Up died before writing it, so no qemu ran.
		log.Info("vm: removing an instance directory without state", "dir", dir)
		return os.RemoveAll(dir)
	}
	if inst.Running() {
		return nil
	}
	log.Info("vm: removing a stale instance (its qemu is gone)", "name", name, "dir", dir)
	return inst.Down(context.Background())
}

// CleanStale removes every instance under stateDir (DefaultStateDir() when
// empty) whose qemu is no longer running, and returns their names.
// Running guests are left alone: they may be another user's (skewtest vm
// down ends them).
func CleanStale(stateDir string, log *slog.Logger) ([]string, error) {
	if stateDir == "" {
		stateDir = DefaultStateDir()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkStateDir(stateDir, false); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if inst, err := Load(stateDir, e.Name(), log); err == nil && inst.Running() {
			continue
		}
		if err := removeStale(stateDir, e.Name(), log); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}
