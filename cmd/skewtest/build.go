package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/kind"
)

// buildCmd builds Kubernetes components of one version from the Go module
// into skewtest's cache and prints each binary's line.
func buildCmd(ctx context.Context, s streams, args []string) error {
	if len(args) != 2 {
		return invalid("usage: skewtest build VERSION COMPONENT[,...], e.g. skewtest build v1.37.2 kubelet")
	}
	v, err := parseVersion(args[0])
	if err != nil {
		return err
	}
	b := &binaries.ModuleBuilder{CacheDir: binaries.DefaultCacheDir(), Logger: s.logger}
	bins, err := b.Build(ctx, v, strings.Split(args[1], ",")...)
	if err != nil {
		return infrastructure(err)
	}
	printBinaries(s.out, bins)
	return nil
}

// buildContainerdCmd builds containerd v2 from its Go module.
func buildContainerdCmd(ctx context.Context, s streams, _ []string) error {
	b := &binaries.ModuleBuilder{CacheDir: binaries.DefaultCacheDir(), Logger: s.logger}
	bins, err := b.BuildTool(ctx, binaries.Containerd)
	if err != nil {
		return infrastructure(err)
	}
	printBinaries(s.out, bins)
	return nil
}

// kindNodeImageCmd builds the offline kind node image of one version.
func kindNodeImageCmd(ctx context.Context, s streams, args []string) error {
	if len(args) != 1 {
		return invalid("usage: skewtest kind-node-image VERSION, e.g. skewtest kind-node-image v1.37.2")
	}
	v, err := parseVersion(args[0])
	if err != nil {
		return err
	}
	img, err := kind.BuildNodeImage(ctx, v, binaries.DefaultCacheDir(), s.logger)
	if err != nil {
		return infrastructure(err)
	}
	fmt.Fprintf(s.out, "%s\t%s\n", img.Name, img.RootfsTar)
	return nil
}

func parseVersion(a string) (*version.Version, error) {
	v, err := version.ParseSemantic(a)
	if err != nil {
		return nil, invalid("version %q: %v; give a release such as v1.37.2", a, err)
	}
	return v, nil
}

func printBinaries(w io.Writer, bins map[string]binaries.Binary) {
	for _, bin := range bins {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", bin.Component, bin.Version, bin.SHA256, bin.Path)
	}
}
