// Command embedhelpers builds skewtest's helper programs (package helpers)
// from this source tree into the directory that the embedhelpers build
// tag embeds: `make skewtest` runs it, from the module's root, before it
// builds bin/skewtest with that tag.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"sigs.k8s.io/skewtest/clusters/internal/helpers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	_, err := helpers.BuildEmbedded(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedhelpers:", err)
		os.Exit(1)
	}
}
