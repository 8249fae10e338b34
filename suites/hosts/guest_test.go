package hosts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec" // the suite runs the skewtest command it built, as a user does
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/clusters/timeouts"
)

// guestVM is the suite's qemu guest, driven as a user drives one: through
// the skewtest command's vm verbs (up, show, exec, down), not the package
// behind them.
type guestVM struct {
	bin  string // skewtest
	name string
	inst instance
}

// instance is the part of what `skewtest vm show` prints that the specs
// use.
type instance struct {
	Dir            string         `json:"dir"`
	SSHAddress     string         `json:"sshAddress"`
	Forwards       map[int]string `json:"forwards"`
	KeyFile        string         `json:"keyFile"`
	KnownHostsFile string         `json:"knownHostsFile"`
	User           string         `json:"user"`
	SerialLog      string         `json:"serialLog"`
	Accel          string         `json:"accel"`
	Running        bool           `json:"running"`
}

// accelTCG is what vm show says of a guest emulated without KVM.
const accelTCG = "tcg"

// skewtest runs the built skewtest command with args and returns its
// stdout; its stderr goes to the spec's log.
func skewtest(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := osexec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, GinkgoWriter
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("skewtest %s: %w", strings.Join(args, " "), err)
	}
	return out.String(), nil
}

// upGuest boots the guest with `skewtest vm up` and reads it back with
// `skewtest vm show`.
func upGuest(ctx context.Context, bin, name string, upArgs ...string) (*guestVM, error) {
	if _, err := skewtest(ctx, bin, append([]string{"vm", "up", "-name", name}, upArgs...)...); err != nil {
		return nil, err
	}
	g := &guestVM{bin: bin, name: name}
	return g, g.show(ctx)
}

// show reads the instance with `skewtest vm show`.
func (g *guestVM) show(ctx context.Context) error {
	out, err := skewtest(ctx, g.bin, "vm", "show", "-name", g.name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), &g.inst); err != nil {
		return fmt.Errorf("skewtest vm show -name %s: %w\n%s", g.name, err, out)
	}
	return nil
}

// down removes the guest with `skewtest vm down`.
func (g *guestVM) down(ctx context.Context) error {
	_, err := skewtest(ctx, g.bin, "vm", "down", "-name", g.name)
	return err
}

// command is argv in the guest, as root, through `skewtest vm exec`,
// whose exit code is argv's. Cancelling ctx kills argv in the guest.
func (g *guestVM) command(ctx context.Context, argv ...string) *osexec.Cmd {
	return osexec.CommandContext(ctx, g.bin, append([]string{"vm", "exec", "-name", g.name, "--"}, argv...)...)
}

// output runs argv in the guest and returns its trimmed stdout.
func (g *guestVM) output(ctx context.Context, argv ...string) (string, error) {
	cmd := g.command(ctx, argv...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return strings.TrimSpace(out.String()), fmt.Errorf("%s in the guest: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// must runs argv in the guest and returns its trimmed stdout; it must
// succeed.
func (g *guestVM) must(ctx context.Context, argv ...string) string {
	GinkgoHelper()
	out, err := g.output(ctx, argv...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// tcgTimeoutFactor stretches the run's waits in an emulated guest, where
// the same programs run 10-45 times slower (docs/measurements.md); under
// KVM they run at about the host's speed and keep their timeouts.
const tcgTimeoutFactor = 10

// timeoutFactor is the timeouts.FactorEnv setting for a run in the guest.
func (g *guestVM) timeoutFactor() string {
	if g.inst.Accel == accelTCG {
		return fmt.Sprintf("%s=%d", timeouts.FactorEnv, tcgTimeoutFactor)
	}
	return timeouts.FactorEnv + "=1"
}

// envArgv is argv run with env added, for a guest command.
func envArgv(env []string, argv ...string) []string {
	return append(append([]string{"env"}, env...), argv...)
}

// processesNaming lists the host's processes whose command line contains s.
func processesNaming(s string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
