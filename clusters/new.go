package clusters

import (
	"fmt"
	"log/slog"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/existing"
	"sigs.k8s.io/skewtest/clusters/local"
)

// Names of the providers New knows.
const (
	Local    = "local"
	Existing = "existing"
)

// planned are providers with an issue but no code yet, so the error can
// say so instead of "unknown".
var planned = map[string]string{
	"kind": "the kind provider is not implemented yet",
	"kops": "the kops (AWS) provider is not implemented yet",
}

// Options configure New. Fields a provider does not use are ignored.
type Options struct {
	RunID    string
	CacheDir string
	Logger   *slog.Logger
	// APIServerVersion and InitialKubelet are for providers that create
	// the cluster: the plan's newest version and its first kubelet.
	APIServerVersion *version.Version
	InitialKubelet   binaries.Binary
	// LocalRunRoot is the local provider's parent of run directories.
	LocalRunRoot string
	// Existing configures the existing provider.
	Existing existing.Config
}

// Check reports whether name is a provider New can make, with an error
// that names it and the choices.
func Check(name string) error {
	switch name {
	case Local, Existing:
		return nil
	}
	if why, ok := planned[name]; ok {
		return fmt.Errorf("provider %q: %s; use PROVIDER=%s or PROVIDER=%s", name, why, Local, Existing)
	}
	return fmt.Errorf("unknown provider %q: want one of %s", name, strings.Join([]string{Local, Existing}, ", "))
}

// New returns the named provider. Nothing is created until Up.
func New(name string, o Options) (Provider, error) {
	if err := Check(name); err != nil {
		return nil, err
	}
	switch name {
	case Local:
		return local.New(local.Config{RunID: o.RunID, RunRoot: o.LocalRunRoot, CacheDir: o.CacheDir,
			APIServerVersion: o.APIServerVersion, Kubelet: o.InitialKubelet, Logger: o.Logger})
	case Existing:
		cfg := o.Existing
		if cfg.Logger == nil {
			cfg.Logger = o.Logger
		}
		return existing.New(cfg)
	}
	panic("unreachable: Check accepted " + name)
}
