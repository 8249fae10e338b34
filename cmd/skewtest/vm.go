package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/vm"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

const vmUsage = `usage: skewtest vm image
       skewtest vm up   [-name N] [-share DIR[:ro]]... [-go] [-env NAME=VALUE]... [-forward PORT]... [-memory MiB] [-cpus N] [-accel auto|kvm|tcg] [-serial-log FILE]
       skewtest vm exec [-name N] [up flags] -- CMD [ARG...]   (boots, runs, removes the guest when N is not up)
       skewtest vm show [-name N]   (the instance as JSON: SSH address, key, forwards, accel, serial log)
       skewtest vm down [-name N]
       skewtest vm kops-node -out DIR -server URL [-port N] [-busybox FILE] [-pvs N] [-nodes N] [-kubelet VERSION]
                        (in the guest: a local cluster whose node's kubelet systemd runs as
                        kops lays it out, until SIGTERM or stdin ends; make test-hosts)`

// exitStatus is a guest command's exit code, which skewtest vm exec exits
// with.
type exitStatus struct{ code int }

func (e *exitStatus) Error() string { return fmt.Sprintf("guest command exited %d", e.code) }

// vmCmd runs `skewtest vm VERB`.
func vmCmd(ctx context.Context, s streams, args []string) error {
	logger := s.logger
	if len(args) < 1 {
		return fmt.Errorf("%w: %s", exitcode.ErrInvalid, vmUsage)
	}
	switch args[0] {
	case "image":
		img, err := vm.BuildImage(ctx, vm.ImageConfig{CacheDir: binaries.DefaultCacheDir(), Logger: logger})
		if err != nil {
			return infrastructure(err)
		}
		fmt.Fprintf(s.out, "%s\t%s\t%s\n", img.Key, img.KernelVersion, img.Dir)
		return nil
	case "up":
		f, err := parseVMFlags(args[0], args[1:])
		if err != nil {
			return err
		}
		inst, err := f.up(ctx, logger, true)
		if err != nil {
			return err
		}
		fmt.Fprintf(s.out, "guest %s is up (%s, boot %.0fs): skewtest vm exec -name %s -- CMD; skewtest vm down -name %s\n",
			inst.Name, inst.Accel, inst.BootSeconds, inst.Name, inst.Name)
		for guest, host := range inst.Forwards {
			fmt.Fprintf(s.out, "guest port %d: %s\n", guest, host)
		}
		fmt.Fprintf(s.out, "ssh -i %s -o UserKnownHostsFile=%s -p %s %s@127.0.0.1\n", inst.KeyFile, inst.KnownHostsFile,
			inst.SSHAddress[strings.LastIndex(inst.SSHAddress, ":")+1:], inst.User)
		return nil
	case "exec":
		f, err := parseVMFlags(args[0], args[1:])
		if err != nil {
			return err
		}
		if len(f.argv) == 0 {
			return fmt.Errorf("%w: vm exec needs a command after --\n%s", exitcode.ErrInvalid, vmUsage)
		}
		inst, err := loadVM(f.name, logger)
		if errors.Is(err, exitcode.ErrInvalid) {
			return err
		}
		if err == nil && !inst.Running() {
			return infrastructure(fmt.Errorf("vm: instance %s is recorded but its qemu is gone: skewtest vm down -name %s", f.name, f.name))
		}
		if err != nil {
			// Not up: an ephemeral guest for this one command.
			if inst, err = f.up(ctx, logger, false); err != nil {
				return err
			}
			defer func() {
				if err := inst.Down(context.WithoutCancel(ctx)); err != nil {
					logger.Error("vm down", "err", err)
				}
			}()
		} else if f.changed {
			return fmt.Errorf("%w: instance %s is already up: shares and machine flags are fixed at vm up (run without them, or vm down first)", exitcode.ErrInvalid, f.name)
		}
		err = inst.Command(ctx, f.argv[0], f.argv[1:]...).SetStdin(os.Stdin).SetStdout(s.out).SetStderr(s.errOut).Run()
		if code := exec.ExitCode(err); code > 0 {
			return &exitStatus{code}
		}
		return infrastructure(err)
	case "kops-node":
		return kopsNodeCmd(ctx, logger, args[1:])
	case "show":
		inst, err := loadNamedVM(args, logger)
		if err != nil {
			return err
		}
		return showVM(s.out, inst)
	case "down":
		inst, err := loadNamedVM(args, logger)
		if err != nil {
			return err
		}
		return infrastructure(inst.Down(ctx))
	}
	return fmt.Errorf("%w: unknown vm command %q\n%s", exitcode.ErrInvalid, args[0], vmUsage)
}

// loadVM is vm.Load of the default state directory, its refusals (a state
// directory others can write, a state file skewtest did not write) marked
// as bad input: the user's to fix.
func loadVM(name string, logger *slog.Logger) (*vm.Instance, error) {
	inst, err := vm.Load("", name, logger)
	var invalid *vm.ConfigError
	if errors.As(err, &invalid) {
		return nil, fmt.Errorf("%w: %w", exitcode.ErrInvalid, err)
	}
	return inst, err
}

// loadNamedVM is the instance that `skewtest vm VERB [-name N]` names:
// a bad flag or a refused state is bad input, a missing instance an
// infrastructure error.
func loadNamedVM(args []string, logger *slog.Logger) (*vm.Instance, error) {
	f, err := parseVMFlags(args[0], args[1:])
	if err != nil {
		return nil, err
	}
	inst, err := loadVM(f.name, logger)
	if err != nil && !errors.Is(err, exitcode.ErrInvalid) {
		return nil, infrastructure(err)
	}
	return inst, err
}

type vmFlags struct {
	name      string
	shares    []vm.Share
	goTools   bool
	memory    int
	cpus      int
	accel     string
	serialLog string
	forwards  []int
	env       []string
	argv      []string
	// changed: a flag other than -name was given.
	changed bool
}

func parseVMFlags(verb string, args []string) (*vmFlags, error) {
	f := &vmFlags{}
	fs := flag.NewFlagSet("vm "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.name, "name", vm.DefaultName, "instance name")
	if verb != "down" && verb != "show" {
		fs.Func("share", "host directory mounted at the same path in the guest, DIR or DIR:ro (repeatable)", func(v string) error {
			s := vm.Share{HostPath: v}
			if p, ok := strings.CutSuffix(v, ":ro"); ok {
				s = vm.Share{HostPath: p, ReadOnly: true}
			}
			abs, err := filepath.Abs(s.HostPath)
			if err != nil {
				return err
			}
			s.HostPath = abs
			f.shares = append(f.shares, s)
			return nil
		})
		fs.Func("env", "NAME=VALUE set for every command the guest runs through vm exec (repeatable)", func(v string) error {
			if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
				return fmt.Errorf("-env %q: want NAME=VALUE", v)
			}
			f.env = append(f.env, v)
			return nil
		})
		fs.BoolVar(&f.goTools, "go", false, "share the host's Go toolchain and caches, and put go on the guest's PATH")
		fs.Func("forward", "a guest TCP port forwarded from a free port on the host's loopback (repeatable; vm up prints the host's)", func(v string) error {
			port, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("-forward %q: want a port number", v)
			}
			f.forwards = append(f.forwards, port)
			return nil
		})
		fs.IntVar(&f.memory, "memory", vm.DefaultMemoryMiB, "guest memory in MiB")
		fs.IntVar(&f.cpus, "cpus", vm.DefaultCPUs, "guest CPUs")
		fs.StringVar(&f.accel, "accel", string(vm.AccelAuto), "auto, kvm or tcg")
		fs.StringVar(&f.serialLog, "serial-log", "", "the guest's serial console; default $ARTIFACTS/vm/NAME/serial.log")
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w: %v\n%s", exitcode.ErrInvalid, err, vmUsage)
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name != "name" {
			f.changed = true
		}
	})
	f.argv = fs.Args()
	if verb != "exec" && len(f.argv) > 0 {
		return nil, fmt.Errorf("%w: vm %s takes no arguments, got %q\n%s", exitcode.ErrInvalid, verb, f.argv, vmUsage)
	}
	return f, nil
}

// up builds (or finds) the image and boots an instance: the skewtest cache
// is always shared read-only, so the guest finds the host's binaries at the
// same path.
func (f *vmFlags) up(ctx context.Context, logger *slog.Logger, detach bool) (*vm.Instance, error) {
	cache := binaries.DefaultCacheDir()
	img, err := vm.BuildImage(ctx, vm.ImageConfig{CacheDir: cache, Logger: logger})
	if err != nil {
		return nil, infrastructure(err)
	}
	shares := []vm.Share{{HostPath: cache, ReadOnly: true}}
	env := []string{"SKEWTEST_CACHE=" + cache}
	if f.goTools {
		gs, genv, err := vm.GoToolchain(ctx)
		if err != nil {
			return nil, infrastructure(err)
		}
		shares, env = append(shares, gs...), append(env, genv...)
	}
	shares, env = append(shares, f.shares...), append(env, f.env...)
	serial := f.serialLog
	if serial == "" {
		artifacts := os.Getenv("ARTIFACTS")
		if artifacts == "" {
			artifacts = "_artifacts"
		}
		serial = filepath.Join(artifacts, "vm", f.name, "serial.log")
	}
	inst, err := vm.Up(ctx, vm.Config{
		Name: f.name, Image: img, Shares: shares, Env: env, SerialLog: serial, Forwards: f.forwards,
		MemoryMiB: f.memory, CPUs: f.cpus, Accel: vm.Accel(f.accel), Logger: logger,
		// vm up returns with the guest running; vm exec's own guest is
		// ended with this process.
		Detach: detach,
	})
	if err != nil {
		var invalid *vm.ConfigError
		if errors.As(err, &invalid) {
			return nil, fmt.Errorf("%w: %w", exitcode.ErrInvalid, err)
		}
		return nil, infrastructure(err)
	}
	return inst, nil
}

// shown is `skewtest vm show`'s output: the instance as its state records
// it, and whether its qemu still runs.
type shown struct {
	*vm.Instance
	Running bool `json:"running"`
}

func showVM(w io.Writer, inst *vm.Instance) error {
	b, err := json.MarshalIndent(shown{inst, inst.Running()}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
