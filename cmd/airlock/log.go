package main

import (
	"log/slog"
	"os"
	"strings"
)

// newLogger logs to stderr at $AIRLOCK_LOG (debug, info, warn, error;
// default warn), so a user can see why something was refused and where
// start-up time goes without a rebuild.
func newLogger() *slog.Logger {
	level := slog.LevelWarn
	switch strings.ToLower(os.Getenv("AIRLOCK_LOG")) {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "error":
		level = slog.LevelError
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
