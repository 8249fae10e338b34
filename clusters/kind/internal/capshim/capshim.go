// Package capshim is an OCI runtime shim for hosts whose capability
// bounding set lacks CAP_SYS_RESOURCE (some VMs). On such hosts runc cannot
// start a `docker run --privileged` container ("unable to apply caps:
// operation not permitted"), because a privileged container asks for every
// capability, including one the host can never grant.
//
// dockerd is told to use the shim as its runtime (--add-runtime
// NAME=/path/to/skewtest-runc-shim --default-runtime NAME). Before exec'ing
// the real runc, the shim removes CAP_SYS_RESOURCE from the process
// capabilities of the bundle's config.json (create, run, restore) or of the
// process spec file given to `runc exec --process`. Everything else of a
// privileged container (devices, read-write cgroup and sysfs mounts, no
// seccomp, no AppArmor) is left as docker asked, which is what kind's nodes
// need.
package capshim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/skewtest/clusters/internal/helpers"
)

// Cap is the capability the shim removes.
const Cap = "CAP_SYS_RESOURCE"

// capSysResource is CAP_SYS_RESOURCE's number (linux/capability.h).
const capSysResource = 24

// capSets are the capability sets of an OCI process (runtime-spec
// config.md, "process.capabilities").
var capSets = []string{"bounding", "effective", "inheritable", "permitted", "ambient"}

// FilterSpec removes CAP_SYS_RESOURCE from every capability set of the OCI
// spec file at path and writes the file back if anything changed. The file
// is either a bundle's config.json (capabilities under
// process.capabilities) or a process spec as given to `runc exec
// --process` (capabilities at the top level); both places are filtered
// when present. Fields the shim does not know are kept as they were; the
// file keeps its mode.
func FilterSpec(path string) (changed bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("capshim: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return false, fmt.Errorf("capshim: %s: %w", path, err)
	}
	if top == nil { // the file was JSON null
		return false, fmt.Errorf("capshim: %s: not a JSON object", path)
	}
	// A process spec file: capabilities at the top level.
	topChanged, err := filterField(top, "capabilities")
	if err != nil {
		return false, fmt.Errorf("capshim: %s: capabilities: %w", path, err)
	}
	// A bundle's config.json: process.capabilities.
	procChanged := false
	if raw, ok := top["process"]; ok && !isNull(raw) {
		var proc map[string]json.RawMessage
		if err := json.Unmarshal(raw, &proc); err != nil {
			return false, fmt.Errorf("capshim: %s: process: %w", path, err)
		}
		procChanged, err = filterField(proc, "capabilities")
		if err != nil {
			return false, fmt.Errorf("capshim: %s: process.capabilities: %w", path, err)
		}
		if procChanged {
			if top["process"], err = json.Marshal(proc); err != nil {
				return false, fmt.Errorf("capshim: %s: %w", path, err)
			}
		}
	}
	if !topChanged && !procChanged {
		return false, nil
	}
	out, err := json.Marshal(top)
	if err != nil {
		return false, fmt.Errorf("capshim: %s: %w", path, err)
	}
	if err := writeKeepMode(path, out); err != nil {
		return false, fmt.Errorf("capshim: %w", err)
	}
	return true, nil
}

// filterField filters the capabilities object obj[key], if there is one,
// and stores it back into obj when it changed.
func filterField(obj map[string]json.RawMessage, key string) (bool, error) {
	raw, ok := obj[key]
	if !ok || isNull(raw) {
		return false, nil
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(raw, &caps); err != nil {
		return false, err
	}
	changed := false
	for _, set := range capSets {
		rawSet, ok := caps[set]
		if !ok || isNull(rawSet) {
			continue
		}
		var names []string
		if err := json.Unmarshal(rawSet, &names); err != nil {
			return false, fmt.Errorf("%s: %w", set, err)
		}
		kept := make([]string, 0, len(names))
		for _, n := range names {
			if n != Cap {
				kept = append(kept, n)
			}
		}
		if len(kept) == len(names) {
			continue
		}
		b, err := json.Marshal(kept)
		if err != nil {
			return false, err
		}
		caps[set] = b
		changed = true
	}
	if !changed {
		return false, nil
	}
	b, err := json.Marshal(caps)
	if err != nil {
		return false, err
	}
	obj[key] = b
	return true, nil
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// writeKeepMode replaces path's content through a temporary file in the
// same directory and a rename, so that a reader never sees half a file,
// keeping path's permission bits.
func writeKeepMode(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".capshim-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// runc's global flags that take a value (runc main.go); every other global
// flag is a boolean.
var globalValueFlags = map[string]bool{
	"log": true, "log-format": true, "root": true, "criu": true, "rootless": true,
}

// Flags that take a value, per command (runc create.go, run.go,
// restore.go, exec.go). Flags parsing stops at the first argument that is
// not a flag (the container ID), as runc's does.
var commandValueFlags = map[string]map[string]bool{
	"create": {"bundle": true, "b": true, "console-socket": true, "pidfd-socket": true, "pid-file": true, "preserve-fds": true},
	"run":    {"bundle": true, "b": true, "console-socket": true, "pidfd-socket": true, "pid-file": true, "preserve-fds": true},
	"restore": {"bundle": true, "b": true, "console-socket": true, "pidfd-socket": true, "pid-file": true,
		"image-path": true, "work-path": true, "manage-cgroups-mode": true, "empty-ns": true, "lsm-profile": true, "lsm-mount-context": true},
	"exec": {"console-socket": true, "pidfd-socket": true, "cwd": true, "env": true, "e": true, "user": true, "u": true,
		"additional-gids": true, "g": true, "process": true, "p": true, "pid-file": true, "process-label": true,
		"apparmor": true, "cap": true, "c": true, "preserve-fds": true, "cgroup": true},
}

// SpecFile returns the spec file that runc's argv makes runc read and that
// the shim must filter: <bundle>/config.json for create, run and restore
// (the bundle defaults to the current directory, so the path is then
// relative), the --process file for exec, "" for anything else (including
// an exec without --process, which takes its process from the already
// filtered container config).
func SpecFile(args []string) (string, error) {
	i, err := skipFlags(args, 0, globalValueFlags)
	if err != nil {
		return "", err
	}
	if i >= len(args) {
		return "", nil
	}
	command := args[i]
	valueFlags, ok := commandValueFlags[command]
	if !ok {
		return "", nil
	}
	want := map[string]bool{"bundle": true, "b": true}
	if command == "exec" {
		want = map[string]bool{"process": true, "p": true}
	}
	found := ""
	for j := i + 1; j < len(args); j++ {
		name, value, hasValue, isFlag := splitFlag(args[j])
		if !isFlag {
			break
		}
		if name == "" { // "--" ends the flags
			break
		}
		if !valueFlags[name] {
			continue
		}
		if !hasValue {
			if j+1 >= len(args) {
				return "", fmt.Errorf("capshim: runc %s: flag %s needs a value", command, args[j])
			}
			j++
			value = args[j]
		}
		if want[name] {
			found = value // the last one wins, as with Go's flag package
		}
	}
	if command == "exec" {
		return found, nil
	}
	if found == "" {
		found = "."
	}
	return filepath.Join(found, "config.json"), nil
}

// skipFlags returns the index of the first argument at or after i that is
// not a flag or a flag's value.
func skipFlags(args []string, i int, valueFlags map[string]bool) (int, error) {
	for ; i < len(args); i++ {
		name, _, hasValue, isFlag := splitFlag(args[i])
		if !isFlag {
			return i, nil
		}
		if name == "" {
			return i + 1, nil
		}
		if valueFlags[name] && !hasValue {
			if i+1 >= len(args) {
				return 0, fmt.Errorf("capshim: runc flag %s needs a value", args[i])
			}
			i++
		}
	}
	return i, nil
}

// splitFlag splits "-x", "--x", "-x=v" and "--x=v" the way Go's flag
// package (and so runc's CLI) reads them. "--" is a flag with an empty
// name; "-" and anything not starting with "-" are not flags.
func splitFlag(arg string) (name, value string, hasValue, isFlag bool) {
	if len(arg) < 2 || arg[0] != '-' {
		return "", "", false, false
	}
	if arg == "--" {
		return "", "", false, true
	}
	name = strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
	name, value, hasValue = strings.Cut(name, "=")
	return name, value, hasValue, true
}

// Rewrite filters the spec file that runc's argv (os.Args[1:] of the shim)
// names, see SpecFile. It does nothing for commands that read no spec.
func Rewrite(args []string) error {
	path, err := SpecFile(args)
	if err != nil || path == "" {
		return err
	}
	_, err = FilterSpec(path)
	return err
}

// NeedsShim reports whether this host's capability bounding set (CapBnd in
// /proc/self/status) lacks CAP_SYS_RESOURCE, so that privileged containers
// need the shim.
func NeedsShim() (bool, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false, err
	}
	bnd, err := capBnd(data)
	if err != nil {
		return false, fmt.Errorf("/proc/self/status: %w", err)
	}
	return bnd&(1<<capSysResource) == 0, nil
}

// capBnd returns the CapBnd mask of a /proc/<pid>/status text.
func capBnd(status []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CapBnd:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return 0, fmt.Errorf("bad CapBnd %q: %w", strings.TrimSpace(v), err)
		}
		return mask, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no CapBnd line")
}

// BinaryName is the file name of the shim (helpers.RuncShim).
var BinaryName = helpers.RuncShim.Name

// Build writes the shim (helpers.RuncShim) to <cacheDir>/kind/
// skewtest-runc-shim and returns its path. It gets the program every time
// (carried by bin/skewtest, or built from source, which Go's build cache
// makes cheap) and replaces the cached file only when it differs: a shim
// cached by older source is never used, and one that matches is left
// alone (its modification time says when it last changed).
func Build(ctx context.Context, cacheDir string) (string, error) {
	dir := filepath.Join(cacheDir, "kind")
	out, err := filepath.Abs(filepath.Join(dir, BinaryName))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Written next to the target and renamed, so that a concurrent Build
	// or a killed one never leaves a half-written binary under the final
	// name.
	tmp, err := os.MkdirTemp(dir, "."+BinaryName+"-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	bins, err := helpers.Write(ctx, tmp, helpers.RuncShim)
	if err != nil {
		return "", err
	}
	if sameFile(bins[BinaryName], out) {
		return out, nil
	}
	if err := os.Rename(bins[BinaryName], out); err != nil {
		return "", err
	}
	return out, nil
}

// sameFile tells whether a and b are regular files with the same bytes.
func sameFile(a, b string) bool {
	fb, err := os.Stat(b)
	if err != nil || !fb.Mode().IsRegular() {
		return false
	}
	ba, err := os.ReadFile(a)
	if err != nil || int64(len(ba)) != fb.Size() {
		return false
	}
	bb, err := os.ReadFile(b)
	return err == nil && bytes.Equal(ba, bb)
}
