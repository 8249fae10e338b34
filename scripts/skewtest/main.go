// Command skewtest holds the operations around a run that are not tests:
// prefetching binaries into the cache and cleaning up after a killed run.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "skewtest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("usage: skewtest build VERSION COMPONENT[,COMPONENT...]")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	switch args[0] {
	case "build":
		if len(args) != 3 {
			return fmt.Errorf("usage: skewtest build VERSION COMPONENT[,COMPONENT...]")
		}
		v, err := version.ParseSemantic(args[1])
		if err != nil {
			return fmt.Errorf("version %q: %w", args[1], err)
		}
		b := &binaries.ModuleBuilder{CacheDir: binaries.DefaultCacheDir(), Logger: logger}
		bins, err := b.Build(ctx, v, strings.Split(args[2], ",")...)
		if err != nil {
			return err
		}
		for _, bin := range bins {
			fmt.Printf("%s\t%s\t%s\t%s\n", bin.Component, bin.Version, bin.SHA256, bin.Path)
		}
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}
