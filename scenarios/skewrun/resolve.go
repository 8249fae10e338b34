package skewrun

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// Resolver is the resolver of binary sources that o's settings give (the
// cache, the release server, the logger), for runs and for what builds
// kubelets ahead of them.
func (o Options) Resolver() *binaries.Resolver {
	return &binaries.Resolver{CacheDir: o.CacheDir, BaseURL: o.ReleaseBaseURL, Logger: o.Logger,
		Module: &binaries.ModuleBuilder{CacheDir: o.CacheDir, Logger: o.Logger}}
}

// resolveKubelets returns one kubelet binary per plan entry of v, from the cache,
// a build or a download, and checks that each reports its entry's version.
// A source the user must change (a missing file, a version the module
// proxy does not serve, a binary of another version) is exitcode.ErrInvalid; any
// other failure (network, disk, build) is exitcode.ErrInfrastructure.
func resolveKubelets(ctx context.Context, v *validated) ([]binaries.Binary, error) {
	o := v.Options
	resolver := o.Resolver()
	o.Logger.Info("resolving kubelet binaries", "plan", v.Plan.String(), "sources", strings.Join(v.Specs, ","))
	kubelets, err := resolver.ResolvePlan(ctx, "kubelet", v.Specs)
	if err != nil {
		return nil, classify(fmt.Errorf("resolve kubelets for plan %s: %w", v.Plan, err), exitcode.ErrInfrastructure)
	}
	for i, k := range kubelets {
		if want := "v" + v.Plan.Versions[i].String(); k.Version != want {
			return nil, fmt.Errorf("%w: plan entry %d wants kubelet %s but %s is %s; give a kubelet of %s for that entry in KUBELETS, or change PLAN", exitcode.ErrInvalid, i+1, want, k.Source, k.Version, want)
		}
	}
	return kubelets, nil
}
