package main

import (
	"context"
	"log/slog"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/sandbox"
)

// backendNames lists the backends this build knows, in doctor's order.
func backendNames() []string { return backend.Names() }

// openBackend returns the backend called name ("" means native).
func openBackend(name string, log *slog.Logger) (sandbox.Backend, error) {
	return backend.Open(name, backend.Options{Log: log})
}

// openPolicyBackend is openBackend for a policy: "auto" picks the fastest
// available backend meeting the policy's isolation; imgs (nil: none) is
// the image store a docker backend loads the run's image from.
func openPolicyBackend(name, isolation string, imgs *images.Store, log *slog.Logger) (sandbox.Backend, error) {
	opts := backend.Options{Log: log, Images: imgs}
	if name == "auto" {
		return backend.Auto(context.Background(), isolation, opts)
	}
	return backend.Open(name, opts)
}
