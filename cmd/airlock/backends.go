package main

import (
	"fmt"
	"log/slog"

	"github.com/airlock-dev/airlock/sandbox"
)

// backendNames lists the backends this build knows, in doctor's order.
func backendNames() []string { return []string{"native", "gvisor", "wasm"} }

// openBackend returns the backend a policy names ("" means native).
func openBackend(name string, log *slog.Logger) (sandbox.Backend, error) {
	if name == "" {
		name = "native"
	}
	return nil, fmt.Errorf("backend %q: not built into this binary yet: %w", name, sandbox.ErrUnavailable)
}
