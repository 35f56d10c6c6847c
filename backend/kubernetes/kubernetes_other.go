//go:build !linux

package kubernetes

import (
	"context"
	"fmt"

	"github.com/airlock-dev/airlock/sandbox"
)

// Off Linux the backend is not built: serve's other backends there are
// not either, and the Kubernetes client libraries it needs would cost
// every cross-OS build minutes.
var errNotLinux = fmt.Errorf("the kubernetes backend is built for Linux only (run airlock serve on a Linux machine or in the cluster): %w", sandbox.ErrUnavailable)

// Backend is the Kubernetes sandbox backend (unavailable off Linux).
type Backend struct{ cfg Config }

// New returns the backend; off Linux it can do nothing.
func New(cfg Config) *Backend { return &Backend{cfg: cfg} }

// Name returns "kubernetes".
func (b *Backend) Name() string { return Name }

// Probe reports the backend unavailable.
func (b *Backend) Probe(context.Context) sandbox.Probe {
	return sandbox.Probe{Available: false, Reason: errNotLinux.Error(), Isolation: "kernel"}
}

// Create fails: see Probe.
func (b *Backend) Create(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, errNotLinux
}

// Cleanup has nothing to do off Linux.
func (b *Backend) Cleanup(context.Context, map[string]bool) error { return nil }
