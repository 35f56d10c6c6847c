package main

import (
	"fmt"
	"log/slog"

	"github.com/airlock-dev/airlock/sandbox"
)

// openBackend returns the backend a policy names ("" means native).
func openBackend(name string, log *slog.Logger) (sandbox.Backend, error) {
	if name == "" {
		name = "native"
	}
	return nil, fmt.Errorf("backend %q: %w", name, sandbox.ErrUnavailable)
}
