package main

import (
	"context"
	"log/slog"
)

func bench(ctx context.Context, logger *slog.Logger, args []string) error {
	return nil
}
