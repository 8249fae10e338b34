package clusters

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/existing"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/kind"
	"sigs.k8s.io/skewtest/clusters/kops"
	"sigs.k8s.io/skewtest/clusters/local"
	"sigs.k8s.io/skewtest/reports"
)

// Names of the providers New knows.
const (
	Local    = "local"
	Existing = "existing"
	Kind     = "kind"
	Kops     = kops.Name
)

// The modes of skewtest's own CSI driver (Options.CSIMode), for callers
// outside clusters/: CSIModeEBS serves raw block volumes, CSIModeTmpfs does
// not.
const (
	CSIModeTmpfs = string(csidriver.ModeTmpfs)
	CSIModeEBS   = string(csidriver.ModeEBS)
)

// Options configure New. Fields a provider does not use are ignored.
type Options struct {
	RunID    string
	CacheDir string
	Logger   *slog.Logger
	// APIServerVersion and InitialKubelets are for providers that create
	// the cluster: the plan's newest version, and the kubelet each test
	// node starts with (one node per entry; a sign-off run has one, a
	// matrix tour one per trail). Of those providers only local makes
	// several nodes so far (MaxTestNodes); existing ignores both.
	APIServerVersion *version.Version
	InitialKubelets  []binaries.Binary
	// LocalRunRoot is the local provider's parent of run directories.
	LocalRunRoot string
	// Existing configures the existing provider.
	Existing existing.Config
	// KindNodeImage overrides the kind provider's offline node image.
	KindNodeImage string
	// KindCSI chooses the kind provider's CSI driver (kind.CSISkewtest or
	// kind.CSIHostpath; empty for the default).
	KindCSI string
	// CSIMode is the mode of skewtest's own CSI driver (CSI_MODE): "tmpfs"
	// (the default when empty) or "ebs". The local provider runs both;
	// kind runs tmpfs only so far.
	CSIMode string
	// Kops configures the kops provider; ArtifactsDir is the run's
	// artifacts directory, where it dumps logs when Down runs before
	// DumpClusterLogs did.
	Kops         kops.Config
	ArtifactsDir string
}

// Check reports whether name is a provider New can make, with an error
// that names it and the choices.
func Check(name string) error {
	switch name {
	case Local, Existing, Kind, Kops:
		return nil
	}
	return fmt.Errorf("unknown provider %q: want one of %s", name, strings.Join([]string{Local, Kind, Existing, Kops}, ", "))
}

// CheckOptions is Check plus the checks of o that need no cluster, so a
// bad setting fails before any binary is built.
func CheckOptions(name string, o Options) error {
	if err := Check(name); err != nil {
		return err
	}
	if err := o.checkNodeCount(name); err != nil {
		return err
	}
	if err := o.checkCSIMode(name); err != nil {
		return err
	}
	switch name {
	case Kind:
		return kind.CheckCSI(o.KindCSI)
	case Kops:
		// kops, a region and AWS credentials, before anything is built
		// or made: the settings New will give kops.New. The run ID is
		// made once the kubelets are resolved, after this check, so a
		// stand-in of the same form takes its place.
		if o.RunID == "" {
			o.RunID = reports.NewRunID(time.Now())
		}
		cfg := o.kopsConfig()
		return cfg.Validate(context.Background())
	}
	return nil
}

// kopsConfig is the kops provider's settings as New makes it and
// CheckOptions validates it: o.Kops with what the shared options fill in.
func (o Options) kopsConfig() kops.Config {
	cfg := o.Kops
	cfg.RunID, cfg.APIServerVersion, cfg.CacheDir, cfg.ArtifactsDir = o.RunID, o.APIServerVersion, o.CacheDir, o.ArtifactsDir
	if cfg.Logger == nil {
		cfg.Logger = o.Logger
	}
	if len(o.InitialKubelets) == 1 {
		cfg.Kubelet = o.InitialKubelets[0]
	}
	if cfg.RunDir == "" && o.RunID != "" {
		cfg.RunDir = filepath.Join(existingRunRoot(o.LocalRunRoot), kops.RunDirPrefix+o.RunID)
	}
	return cfg
}

// checkCSIMode refuses a CSI driver mode the provider cannot run.
func (o Options) checkCSIMode(name string) error {
	mode, err := csidriver.ParseMode(o.CSIMode)
	if err != nil {
		return fmt.Errorf("CSI_MODE: %w", err)
	}
	if mode != csidriver.ModeTmpfs && name != Local {
		return fmt.Errorf("CSI_MODE=%s: provider %s runs skewtest's CSI driver in mode %s only so far; use PROVIDER=%s", mode, name, csidriver.ModeTmpfs, Local)
	}
	return nil
}

// New returns the named provider. Nothing is created until Up.
func New(name string, o Options) (Provider, error) {
	if err := Check(name); err != nil {
		return nil, err
	}
	if err := o.checkNodeCount(name); err != nil {
		return nil, err
	}
	if err := o.checkCSIMode(name); err != nil {
		return nil, err
	}
	switch name {
	case Local:
		return local.New(local.Config{RunID: o.RunID, RunRoot: o.LocalRunRoot, CacheDir: o.CacheDir,
			APIServerVersion: o.APIServerVersion, Kubelets: o.InitialKubelets, CSIMode: o.CSIMode, Logger: o.Logger})
	case Kind:
		var kubelet binaries.Binary
		if len(o.InitialKubelets) == 1 {
			kubelet = o.InitialKubelets[0]
		}
		return kind.New(kind.Config{RunID: o.RunID, RunRoot: o.LocalRunRoot, CacheDir: o.CacheDir,
			APIServerVersion: o.APIServerVersion, Kubelet: kubelet, NodeImage: o.KindNodeImage, CSI: o.KindCSI, Logger: o.Logger})
	case Existing:
		cfg := o.Existing
		if cfg.Logger == nil {
			cfg.Logger = o.Logger
		}
		if cfg.RunID == "" {
			cfg.RunID = o.RunID
		}
		if cfg.StateDir == "" && o.RunID != "" {
			cfg.StateDir = filepath.Join(existingRunRoot(o.LocalRunRoot), existingDirPrefix+o.RunID)
		}
		return existing.New(cfg)
	case Kops:
		return kops.New(o.kopsConfig())
	}
	panic("unreachable: Check accepted " + name)
}

// MaxTestNodes is how many test nodes a provider that creates its cluster
// can make: several for local, one for kind so far; 0 for existing, whose
// cluster has the nodes it has.
func MaxTestNodes(name string) int {
	switch name {
	case Local:
		return local.MaxNodes
	case Kind, Kops:
		return 1
	}
	return 0
}

// checkNodeCount refuses more initial kubelets (test nodes) than the
// provider can make, before anything is built.
func (o Options) checkNodeCount(name string) error {
	if max := MaxTestNodes(name); max > 0 && len(o.InitialKubelets) > max {
		hint := ""
		if name != Local {
			hint = fmt.Sprintf("; use PROVIDER=%s for several nodes", Local)
		}
		return fmt.Errorf("provider %s: %d nodes asked for, but it makes at most %d%s", name, len(o.InitialKubelets), max, hint)
	}
	return nil
}

// existingDirPrefix names an existing-provider run's state directory,
// existing-<run-id>, beside the local and kind run directories.
const existingDirPrefix = "existing-"

// existingRunRoot is where existing-provider runs keep their state: the
// run root (/var/lib/skewtest) for root, and ~/.local/state/skewtest for
// anyone else, who reaches the nodes over SSH and needs no root here.
func existingRunRoot(runRoot string) string {
	if runRoot != "" {
		return runRoot
	}
	if os.Geteuid() != 0 {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, ".local", "state", "skewtest")
		}
	}
	return local.DefaultRunRoot
}

// RunRoots are the directories `skewtest clean` looks in for what killed
// runs left: the run root, and the existing provider's own for non-root
// users.
func RunRoots() []string {
	roots := []string{local.DefaultRunRoot}
	if r := existingRunRoot(""); r != local.DefaultRunRoot {
		roots = append(roots, r)
	}
	return roots
}

// CleansHost reports whether Clean of runDir changes this host: true
// for local and kind runs, false for an existing cluster's, whose clean
// reaches only its nodes, over SSH.
func CleansHost(runDir string) bool {
	return !strings.HasPrefix(filepath.Base(runDir), existingDirPrefix)
}

// RunDir is what `skewtest clean` knows of a directory before it cleans
// it (Inspect).
type RunDir struct {
	Path string
	// NotARun says why Path is not a run's directory that Clean knows:
	// it has no state of its provider (by its name's prefix) that parses
	// and names the run. nil when it is one.
	NotARun error
	// Live is set when the run takes no host lock (an existing cluster's)
	// and the process acting on it still runs; Undecided when whether it
	// does cannot be told. Both say what was found.
	Live, Undecided string
}

// Inspect tells whether Clean may clean runDir. Local, kind and kops runs
// hold the host lock while they run, which `skewtest clean` takes first;
// an existing cluster's run takes none, and its state names the process
// acting on it.
func Inspect(runDir string) RunDir {
	r := RunDir{Path: runDir}
	dir := filepath.Clean(runDir)
	base := filepath.Base(dir)
	switch {
	case strings.HasPrefix(base, kind.RunDirPrefix):
		r.NotARun = kind.CheckRunDir(dir)
	case strings.HasPrefix(base, kops.RunDirPrefix):
		st, err := kops.ReadState(dir)
		switch {
		case err != nil:
			r.NotARun = fmt.Errorf("no kops run state: %w", err)
		case st.RunID != strings.TrimPrefix(base, kops.RunDirPrefix):
			r.NotARun = fmt.Errorf("%s is the state of run %q, not of %q", filepath.Join(dir, kops.StateFile), st.RunID, strings.TrimPrefix(base, kops.RunDirPrefix))
		}
	case strings.HasPrefix(base, existingDirPrefix):
		l, what, err := existing.CheckRunDir(dir, strings.TrimPrefix(base, existingDirPrefix))
		switch {
		case err != nil:
			r.NotARun = err
		case l == existing.Live:
			r.Live = what
		case l == existing.Unknown:
			r.Undecided = what
		}
	default:
		r.NotARun = local.CheckRunDir(dir)
	}
	return r
}

// Clean undoes what a run left when the harness itself was killed, given
// its run directory: kind runs live in kind-<run-id>, local runs in
// <run-id>, and an existing cluster's run keeps in existing-<run-id> the
// state from which its nodes' own kubelets are put back. It goes by the
// name alone: `skewtest clean` asks Inspect first.
func Clean(ctx context.Context, runDir string) error {
	switch base := filepath.Base(runDir); {
	case strings.HasPrefix(base, kind.RunDirPrefix):
		return kind.Clean(ctx, runDir)
	case strings.HasPrefix(base, kops.RunDirPrefix):
		return kops.Clean(ctx, runDir)
	case strings.HasPrefix(base, existingDirPrefix):
		return existing.Clean(ctx, runDir)
	}
	return local.Clean(ctx, runDir)
}
