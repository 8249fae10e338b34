package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// The first SIGINT/SIGTERM cancels the run, which then tears down and
	// exits 130/143; a second one exits at once.
	ctx, stop := exitcode.SignalContext(context.Background(), logger)
	err := dispatch(ctx, streams{logger: logger, out: os.Stdout, errOut: os.Stderr}, os.Args[1:])
	stop()
	var guest *exitStatus
	if errors.As(err, &guest) {
		// skewtest vm exec: the guest command's own exit code.
		os.Exit(guest.code)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "skewtest:", err)
	}
	os.Exit(exitcode.Of(err))
}
