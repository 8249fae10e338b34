package clusters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/skewtest/clusters/existing"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/kind"
	"sigs.k8s.io/skewtest/clusters/kops"
	"sigs.k8s.io/skewtest/clusters/local"
	"sigs.k8s.io/skewtest/clusters/nodes"
)

// providers are the providers New knows, the default first. It is the one
// place that names them: everything else goes by their descriptors.
var providers = []Descriptor{
	local.Descriptor,
	kind.Descriptor,
	existing.Descriptor,
	kops.Descriptor,
}

// The modes of skewtest's own CSI driver (Options.CSIMode), for callers
// outside clusters/: CSIModeEBS serves raw block volumes, CSIModeTmpfs does
// not.
const (
	CSIModeTmpfs = string(csidriver.ModeTmpfs)
	CSIModeEBS   = string(csidriver.ModeEBS)
)

// CSIDriverMaxVolumesPerNode is how many volumes of skewtest's own CSI
// driver one node takes (its NodeGetInfo's max_volumes_per_node), in
// every mode: the most one pod can have on it.
const CSIDriverMaxVolumesPerNode = csidriver.MaxVolumesPerNode

// Providers are the descriptors of every provider New knows, the default
// first.
func Providers() []Descriptor { return slices.Clone(providers) }

// RunningOn are the names of the providers whose nodes have every
// capability of needs (a catalogue entry's), in Providers' order.
func RunningOn(needs []nodes.Capability) []string {
	return names(filter(func(d Descriptor) bool { return nodes.HasAll(d.NodeCapabilities, needs) }))
}

// Default is the provider an unset PROVIDER means.
func Default() Descriptor { return providers[0] }

// Lookup is the descriptor of the provider named name, or Check's error.
func Lookup(name string) (Descriptor, error) {
	for _, d := range providers {
		if d.Name == name {
			return d, nil
		}
	}
	return Descriptor{}, fmt.Errorf("unknown provider %q: want one of %s", name, strings.Join(names(providers), ", "))
}

// Check reports whether name is a provider New can make, with an error
// that names it and the choices.
func Check(name string) error {
	_, err := Lookup(name)
	return err
}

// CheckOptions is Check plus the checks of o and the provider's own
// settings (its Descriptor.FromEnv's value; nil for its defaults) that
// need no cluster, so a bad setting fails before any binary is built.
func CheckOptions(name string, o Options, settings any) error {
	d, err := lookupChecked(name, o)
	if err != nil {
		return err
	}
	if d.Check == nil {
		return nil
	}
	return d.Check(context.Background(), o, settings)
}

// New returns the named provider, made from o and its own settings (its
// Descriptor.FromEnv's value; nil for its defaults). Nothing is created
// until Up.
func New(name string, o Options, settings any) (Provider, error) {
	d, err := lookupChecked(name, o)
	if err != nil {
		return nil, err
	}
	return d.New(o, settings)
}

// lookupChecked is the named provider's descriptor once o passes the
// checks every provider gets: its test nodes and the CSI driver's mode.
func lookupChecked(name string, o Options) (Descriptor, error) {
	d, err := Lookup(name)
	if err != nil {
		return d, err
	}
	if err := checkNodeCount(d, o); err != nil {
		return d, err
	}
	if err := checkCSIMode(d, o); err != nil {
		return d, err
	}
	return d, nil
}

// checkNodeCount refuses more initial kubelets (test nodes) than the
// provider can make, before anything is built, naming those that can.
func checkNodeCount(d Descriptor, o Options) error {
	n := len(o.InitialKubelets)
	if d.MaxTestNodes == 0 || n <= d.MaxTestNodes {
		return nil
	}
	hint := ""
	if can := names(filter(func(p Descriptor) bool { return p.MaxTestNodes >= n })); len(can) > 0 {
		hint = fmt.Sprintf("; use PROVIDER=%s for several nodes", strings.Join(can, " or PROVIDER="))
	}
	return fmt.Errorf("provider %s: %d nodes asked for, but it makes at most %d%s", d.Name, n, d.MaxTestNodes, hint)
}

// checkCSIMode refuses a CSI driver mode the provider cannot run, naming
// those that can.
func checkCSIMode(d Descriptor, o Options) error {
	mode, err := csidriver.ParseMode(o.CSIMode)
	if err != nil {
		return fmt.Errorf("CSI_MODE: %w", err)
	}
	if slices.Contains(d.CSIModes, string(mode)) {
		return nil
	}
	hint := ""
	if can := names(filter(func(p Descriptor) bool { return slices.Contains(p.CSIModes, string(mode)) })); len(can) > 0 {
		hint = "; use PROVIDER=" + strings.Join(can, " or PROVIDER=")
	}
	return fmt.Errorf("CSI_MODE=%s: provider %s runs skewtest's CSI driver in mode %s only so far%s", mode, d.Name, strings.Join(d.CSIModes, " or "), hint)
}

func filter(keep func(Descriptor) bool) []Descriptor {
	var out []Descriptor
	for _, d := range providers {
		if keep(d) {
			out = append(out, d)
		}
	}
	return out
}

func names(ds []Descriptor) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

// RunRoots are the directories `skewtest clean` looks in for what killed
// runs left: every provider's default run root (the run root, and, for
// non-root users, the one of providers that need no root here).
func RunRoots() []string {
	var roots []string
	for _, d := range providers {
		if r := d.RunRoot(""); !slices.Contains(roots, r) {
			roots = append(roots, r)
		}
	}
	return roots
}

// ofRunDir is the provider whose run directories are named as runDir is:
// the one whose RunDirPrefix begins its name (the longest, should several),
// else the one whose run directories are named by the run ID alone.
func ofRunDir(runDir string) Descriptor {
	base := filepath.Base(filepath.Clean(runDir))
	var byID, best Descriptor
	for _, d := range providers {
		switch {
		case d.RunDirPrefix == "":
			if byID.Name == "" {
				byID = d
			}
		case strings.HasPrefix(base, d.RunDirPrefix) && len(d.RunDirPrefix) > len(best.RunDirPrefix):
			best = d
		}
	}
	if best.Name != "" {
		return best
	}
	return byID
}

// CleansHost reports whether Clean of runDir changes this host
// (Descriptor.CleansHost of the provider it belongs to): false for an
// existing cluster's, whose clean reaches only its nodes, over SSH.
func CleansHost(runDir string) bool {
	return ofRunDir(runDir).CleansHost
}

// Inspect tells whether Clean may clean runDir, as the provider whose run
// directories are named as it is sees it (Descriptor.Inspect). Runs of
// providers that clean the host hold the host lock while they run, which
// `skewtest clean` takes first; an existing cluster's run takes none, and
// its state names the process acting on it.
func Inspect(runDir string) RunDir {
	d := ofRunDir(runDir)
	if d.Inspect == nil {
		return RunDir{Path: runDir, NotARun: fmt.Errorf("%s: no provider's run directory is named so", runDir)}
	}
	r := d.Inspect(filepath.Clean(runDir))
	r.Path = runDir
	return r
}

// Clean undoes what a run left when the harness itself was killed, given
// its run directory: <prefix><run-id> names the provider whose run it was
// (kind-, kops-, existing-), and a bare <run-id> a local run. It goes by
// the name alone: `skewtest clean` asks Inspect first.
func Clean(ctx context.Context, runDir string) error {
	d := ofRunDir(runDir)
	if d.Clean == nil {
		return fmt.Errorf("%s: no provider's run directory is named so", runDir)
	}
	return d.Clean(ctx, runDir)
}

// DirsUnder lists the directories directly under roots, the places a
// run directory may be; a root that does not exist has none. The error is
// the first root that cannot be read, with the directories found before.
func DirsUnder(roots []string) ([]string, error) {
	var dirs []string
	for _, root := range roots {
		entries, err := os.ReadDir(root)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return dirs, err
		}
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(root, e.Name()))
			}
		}
	}
	return dirs, nil
}

// LeftOnHost lists the run directories under roots (RunRoots when none)
// that hold a recognisable state of a run of a provider that changes this
// host (Descriptor.CleansHost): a cluster kept after a failure, or what a
// killed harness left. Asked while holding the host lock, which every such
// run holds while it runs, none of them is live. A directory with no state
// a provider recognises is not listed: it is not a run's; a root that
// cannot be read is passed over.
func LeftOnHost(roots ...string) []string {
	if len(roots) == 0 {
		roots = RunRoots()
	}
	var left []string
	seen := map[string]bool{}
	for _, root := range roots {
		dirs, _ := DirsUnder([]string{root})
		for _, dir := range dirs {
			if seen[dir] || !CleansHost(dir) {
				continue
			}
			seen[dir] = true
			if Inspect(dir).NotARun == nil {
				left = append(left, dir)
			}
		}
	}
	return left
}

// RemoveOrphans removes what runs left on this host outside their run
// directories once those are gone (Descriptor.RemoveOrphans), for
// `skewtest clean`.
func RemoveOrphans(logger *slog.Logger) error {
	var errs []error
	for _, d := range providers {
		if d.RemoveOrphans != nil {
			errs = append(errs, d.RemoveOrphans(logger))
		}
	}
	return errors.Join(errs...)
}
